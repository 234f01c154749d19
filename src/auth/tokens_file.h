#pragma once

// The tokens file (contract C6, ADR-0016): one principal a line,
//   <principal> <sha256-hex of the bearer token | -> <role>:<pattern>[,<role>:<pattern>...]
// fields separated by spaces or tabs, `#` starting a comment line, blank lines ignored. A hash
// `-` is a certificate-only principal (mTLS: a client certificate's CN names it).

#include <cstddef>
#include <string>
#include <string_view>

#include "auth/token_table.h"
#include "dlock/errors.h"

namespace dlock::auth {

// A tokens file that cannot be used. what() is "<path>:<line>: <what is wrong>" (line 0: the
// file as a whole); it never contains a hash or a token. The server reports it as it reports
// a ConfigError (ADR-0003: an InvalidArgumentError whose field is "auth.tokens.file";
// configuration errors stop start-up; on SIGHUP the old table stays).
class TokensFileError : public InvalidArgumentError {
 public:
  TokensFileError(std::string path, std::size_t line, const std::string& reason);
  const std::string& path() const noexcept { return path_; }
  std::size_t line() const noexcept { return line_; }  // 1-based; 0 = not one line
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string path_;
  std::size_t line_;
  std::string reason_;
};

// Parses the text of a tokens file; `path` only names it in errors.
TokenTable parse_tokens(std::string_view text, const std::string& path);

// Reads and parses `path`; throws TokensFileError when it cannot be read or does not parse.
TokenTable load_tokens_file(const std::string& path);

// The line to add to a tokens file for `principal` with `token` (what `dlock token new`
// prints): "<principal> <sha256-hex(token)> <permissions>". Throws InvalidArgumentError for
// an invalid name.
std::string tokens_file_line(std::string_view principal, std::string_view token,
                             const std::vector<Permission>& permissions);

}  // namespace dlock::auth
