#include "auth/permissions.h"

#include "dlock/errors.h"

namespace dlock::auth {
namespace {

// The namespace rules of contract C3: 1-64 bytes of letters, digits, '-', '_' and '.'.
constexpr std::size_t kMaxNamespaceBytes = 64;

bool namespace_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

int rank(Role role) { return static_cast<int>(role); }

[[noreturn]] void fail(const std::string& message) {
  throw InvalidArgumentError("permissions", message);
}

void check_pattern(std::string_view pattern, std::string_view permission) {
  if (pattern.empty()) {
    fail("permission '" + std::string(permission) + "' has an empty namespace pattern");
  }
  if (pattern == "*") return;
  const bool prefix = pattern.back() == '*';
  const std::string_view body = prefix ? pattern.substr(0, pattern.size() - 1) : pattern;
  if (body.size() > kMaxNamespaceBytes) {
    fail("permission '" + std::string(permission) + "': a namespace has at most 64 bytes");
  }
  for (const char c : body) {
    if (!namespace_char(c)) {
      fail("permission '" + std::string(permission) +
           "': a pattern is a namespace (letters, digits, '-', '_', '.'), 'prefix*' or '*'");
    }
  }
}

Permission parse_one(std::string_view text) {
  const auto colon = text.find(':');
  if (text.empty()) fail("empty permission (stray ',')");
  if (colon == std::string_view::npos) {
    fail("permission '" + std::string(text) + "' is not <role>:<pattern>");
  }
  const std::string_view role = text.substr(0, colon);
  const std::string_view pattern = text.substr(colon + 1);
  Permission permission;
  if (role == "read") {
    permission.role = Role::kRead;
  } else if (role == "lock") {
    permission.role = Role::kLock;
  } else if (role == "admin") {
    permission.role = Role::kAdmin;
  } else {
    fail("permission '" + std::string(text) + "': role '" + std::string(role) +
         "' is not read, lock or admin");
  }
  check_pattern(pattern, text);
  permission.pattern = std::string(pattern);
  return permission;
}

}  // namespace

const char* to_string(Role role) noexcept {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kLock:
      return "lock";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

bool pattern_matches(std::string_view pattern, std::string_view ns) noexcept {
  if (!pattern.empty() && pattern.back() == '*') {
    return ns.starts_with(pattern.substr(0, pattern.size() - 1));
  }
  return pattern == ns;
}

bool Permission::allows(Role wanted, std::string_view ns) const noexcept {
  return rank(role) >= rank(wanted) && pattern_matches(pattern, ns);
}

std::vector<Permission> parse_permissions(std::string_view text) {
  if (text.empty()) fail("no permissions (expected <role>:<pattern>[,...])");
  std::vector<Permission> permissions;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    permissions.push_back(parse_one(text.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return permissions;
}

std::string format_permissions(const std::vector<Permission>& permissions) {
  std::string text;
  for (const auto& permission : permissions) {
    if (!text.empty()) text += ',';
    text += to_string(permission.role);
    text += ':';
    text += permission.pattern;
  }
  return text;
}

}  // namespace dlock::auth
