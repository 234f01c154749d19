#include "auth/admin_token.h"

#include <sys/stat.h>

#include <bitset>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "dlock/errors.h"

namespace dlock::auth {

void check_admin_token(std::string_view token) {
  const auto fail = [](const std::string& reason) {
    throw InvalidArgumentError(
        "admin.token",
        "admin.token " + reason +
            "; use e.g. the token (not the line) that `dlock token new admin admin:*` "
            "prints");
  };
  if (token.size() < kMinAdminTokenChars) {
    fail("is too short (" + std::to_string(token.size()) + " characters, at least " +
         std::to_string(kMinAdminTokenChars) + " needed)");
  }
  std::bitset<128> seen;
  for (const char c : token) {
    if (c <= ' ' || c > '~') fail("may hold only printable ASCII characters without spaces");
    seen.set(static_cast<unsigned char>(c));
  }
  if (seen.count() < kMinAdminTokenDistinctChars) {
    fail("is too predictable (fewer than " + std::to_string(kMinAdminTokenDistinctChars) +
         " distinct characters)");
  }
}

Principal admin_principal(std::string_view token) {
  check_admin_token(token);
  Principal principal;
  principal.name = std::string(kAdminPrincipalName);
  principal.token_hash = sha256(token);
  principal.permissions = {Permission{Role::kAdmin, "*"}};
  return principal;
}

std::string read_admin_token_file(const std::string& path) {
  const auto fail = [&](const std::string& reason) {
    throw InvalidArgumentError("admin.token.file", "admin token file " + path + ": " + reason);
  };
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) fail(std::strerror(errno));
  if (!S_ISREG(status.st_mode)) fail("not a regular file");
  if ((status.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    fail("group or others have access to it; chmod 600 it (and rotate the token if it leaked)");
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) fail("cannot read it, or it is empty");
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) fail("its first line is empty");
  return line.substr(first, last - first + 1);
}

}  // namespace dlock::auth
