#pragma once

// Roles and namespace patterns of the tokens file (contract C6, ADR-0016).
//
// A permission is `<role>:<pattern>`. Roles are ordered: `read` < `lock` < `admin`, and a
// role implies every smaller one on the same pattern (`lock` implies `read`; `admin` implies
// both and alone allows revoke). A pattern is a namespace (exact match), `prefix*` (every
// namespace starting with prefix) or `*` (every namespace).

#include <string>
#include <string_view>
#include <vector>

namespace dlock::auth {

enum class Role {
  kRead,   // get and list locks
  kLock,   // sessions, acquire, extend, release (and read)
  kAdmin,  // revoke (and lock and read)
};

// "read", "lock", "admin".
const char* to_string(Role role) noexcept;

// Whether `pattern` (a namespace, `prefix*` or `*`) covers namespace `ns`.
bool pattern_matches(std::string_view pattern, std::string_view ns) noexcept;

struct Permission {
  Role role = Role::kRead;
  std::string pattern;

  // Whether this permission allows `wanted` on `ns` (role implication included).
  bool allows(Role wanted, std::string_view ns) const noexcept;
  friend bool operator==(const Permission&, const Permission&) = default;
};

// Parses "<role>:<pattern>[,<role>:<pattern>...]" (no spaces). Throws InvalidArgumentError
// (field "permissions") saying which permission is wrong and why.
std::vector<Permission> parse_permissions(std::string_view text);

// The inverse of parse_permissions: "lock:payments,read:*".
std::string format_permissions(const std::vector<Permission>& permissions);

}  // namespace dlock::auth
