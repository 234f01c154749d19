#include "auth/tokens_file.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "dlock/errors.h"

namespace dlock::auth {
namespace {

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

}  // namespace

TokensFileError::TokensFileError(std::string path, std::size_t line, const std::string& reason)
    : InvalidArgumentError(
          "auth.tokens.file",
          path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + reason),
      path_(std::move(path)),
      line_(line),
      reason_(reason) {}

TokenTable parse_tokens(std::string_view text, const std::string& path) {
  std::vector<Principal> principals;
  std::vector<std::size_t> line_of;  // the line each principal came from, for clash messages
  std::size_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto fields = fields_of(line);
    if (fields.empty() || fields[0].front() == '#') continue;
    const auto fail = [&](const std::string& reason) -> void {
      throw TokensFileError(path, number, reason);
    };
    if (fields.size() != 3) {
      // The hash field may be a secret's hash: say how many fields, not what they were.
      fail("expected '<principal> <sha256-hex|-> <role>:<pattern>[,...]', found " +
           std::to_string(fields.size()) + " field" + (fields.size() == 1 ? "" : "s"));
    }
    Principal principal;
    try {
      check_principal_name(fields[0]);
    } catch (const InvalidArgumentError& error) {
      fail(error.what());
    }
    principal.name = std::string(fields[0]);
    if (fields[1] != "-") {
      principal.token_hash = digest_from_hex(fields[1]);
      if (!principal.token_hash) {
        fail("principal '" + principal.name +
             "': the second field is not 64 hex digits (SHA-256 of the token) or '-'");
      }
    }
    try {
      principal.permissions = parse_permissions(fields[2]);
    } catch (const InvalidArgumentError& error) {
      fail("principal '" + principal.name + "': " + error.what());
    }
    for (std::size_t i = 0; i < principals.size(); ++i) {
      if (principals[i].name == principal.name) {
        fail("principal '" + principal.name + "' already defined on line " +
             std::to_string(line_of[i]));
      }
      if (principals[i].token_hash && principal.token_hash &&
          constant_time_equal(*principals[i].token_hash, *principal.token_hash)) {
        fail("principal '" + principal.name + "' has the same token hash as '" +
             principals[i].name + "' on line " + std::to_string(line_of[i]));
      }
    }
    principals.push_back(std::move(principal));
    line_of.push_back(number);
  }
  return TokenTable(std::move(principals));
}

TokenTable load_tokens_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokensFileError(path, 0, "cannot open the tokens file");
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw TokensFileError(path, 0, "cannot read the tokens file");
  return parse_tokens(content.str(), path);
}

std::string tokens_file_line(std::string_view principal, std::string_view token,
                             const std::vector<Permission>& permissions) {
  check_principal_name(principal);
  return std::string(principal) + " " + to_hex(sha256(token)) + " " +
         format_permissions(permissions);
}

}  // namespace dlock::auth
