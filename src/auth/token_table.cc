#include "auth/token_table.h"

#include "dlock/errors.h"

namespace dlock::auth {

namespace {
constexpr std::size_t kMaxPrincipalBytes = 128;
}  // namespace

bool Principal::allows(Role role, std::string_view ns) const noexcept {
  for (const auto& permission : permissions) {
    if (permission.allows(role, ns)) return true;
  }
  return false;
}

bool Principal::has_role_somewhere(Role role) const noexcept {
  for (const auto& permission : permissions) {
    if (static_cast<int>(permission.role) >= static_cast<int>(role)) return true;
  }
  return false;
}

void check_principal_name(std::string_view name) {
  if (name.empty()) throw InvalidArgumentError("principal", "the principal name is empty");
  if (name.front() == '#') {
    throw InvalidArgumentError("principal", "a principal name cannot start with '#' (a comment)");
  }
  if (name.size() > kMaxPrincipalBytes) {
    throw InvalidArgumentError("principal", "a principal name has at most 128 bytes");
  }
  for (const char c : name) {
    // Printable ASCII without the space: names appear in log lines and metric-free audit events.
    if (c <= ' ' || c > '~') {
      throw InvalidArgumentError(
          "principal", "a principal name is printable ASCII without spaces or control characters");
    }
  }
}

TokenTable::TokenTable(std::vector<Principal> principals) {
  principals_.reserve(principals.size());
  for (auto& principal : principals) {
    // Appending one by one gives each clash the earlier principal's name.
    check_principal_name(principal.name);
    for (const auto& existing : principals_) {
      if (existing.name == principal.name) {
        throw InvalidArgumentError("principal",
                                   "principal '" + principal.name + "' appears more than once");
      }
      if (existing.token_hash && principal.token_hash &&
          constant_time_equal(*existing.token_hash, *principal.token_hash)) {
        throw InvalidArgumentError("token_hash", "principals '" + existing.name + "' and '" +
                                                     principal.name + "' have the same token");
      }
    }
    principals_.push_back(std::move(principal));
  }
}

const Principal* TokenTable::find_by_token(std::string_view bearer_token) const {
  const Sha256Digest presented = sha256(bearer_token);
  const Principal* found = nullptr;
  for (const auto& principal : principals_) {
    // No early exit: the scan costs the same whichever entry matches.
    const bool match =
        principal.token_hash && constant_time_equal(*principal.token_hash, presented);
    if (match) found = &principal;
  }
  return found;
}

const Principal* TokenTable::find_by_name(std::string_view name) const noexcept {
  for (const auto& principal : principals_) {
    if (principal.name == name) return &principal;
  }
  return nullptr;
}

TokenTable TokenTable::with(Principal principal) const {
  std::vector<Principal> principals = principals_;
  principals.push_back(std::move(principal));
  return TokenTable(std::move(principals));
}

}  // namespace dlock::auth
