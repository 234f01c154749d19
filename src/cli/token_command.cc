#include "cli/token_command.h"

#include <boost/json.hpp>
#include <ostream>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "cli/terminal_text.h"

namespace dlock::cli {

void print_new_token(const std::string& principal, const std::string& permissions, bool json,
                     std::ostream& out) {
  const auto parsed = auth::parse_permissions(permissions);
  const std::string token = auth::random_token();
  const std::string line = auth::tokens_file_line(principal, token, parsed);
  if (json) {
    out << boost::json::serialize(
               boost::json::object{{"principal", principal},
                                   {"permissions", auth::format_permissions(parsed)},
                                   {"token", token},
                                   {"sha256", auth::to_hex(auth::sha256(token))},
                                   {"tokens_file_line", line}})
        << '\n';
    return;
  }
  out << "# SECRET bearer token for " << printable(principal)
      << " (shown once; hand it only to them, e.g. as DLOCK_TOKEN):\n"
      << token << '\n'
      << "# Line for the tokens file of every dlockd (not secret: it holds the token's SHA-256);\n"
      << "# add it, then send each dlockd SIGHUP:\n"
      << printable(line) << '\n';
}

}  // namespace dlock::cli
