#pragma once

// Principals and the table that finds them by bearer token or by name (ADR-0016).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"

namespace dlock::auth {

struct Principal {
  std::string name;
  // SHA-256 of the bearer token; nullopt for a certificate-only principal (hash `-`), whom no
  // bearer token authenticates.
  std::optional<Sha256Digest> token_hash;
  std::vector<Permission> permissions;

  // Whether any permission allows `role` on namespace `ns`.
  bool allows(Role role, std::string_view ns) const noexcept;
  // Whether some permission grants `role` (or more) on some namespace: opening a session,
  // which belongs to no namespace, needs `lock` somewhere (ADR-0016).
  bool has_role_somewhere(Role role) const noexcept;
};

// Throws InvalidArgumentError (field "principal") unless `name` is 1-128 bytes of printable
// ASCII without spaces, not starting with '#'.
void check_principal_name(std::string_view name);

// Immutable after construction; safe to share between threads.
class TokenTable {
 public:
  TokenTable() = default;
  // Throws InvalidArgumentError when a name is invalid, or two principals share a name or a
  // token hash (the message names the principals, never a hash).
  explicit TokenTable(std::vector<Principal> principals);

  // The principal whose token hashes to SHA-256(bearer_token), or nullptr. Every entry is
  // compared, each in constant time, so the time taken does not depend on which entry (if
  // any) matches or where a stored hash differs.
  const Principal* find_by_token(std::string_view bearer_token) const;
  // The principal called `name` (e.g. a client certificate's CN), or nullptr.
  const Principal* find_by_name(std::string_view name) const noexcept;

  // A copy with `principal` added; throws as the constructor does on a clash.
  TokenTable with(Principal principal) const;

  const std::vector<Principal>& principals() const noexcept { return principals_; }
  std::size_t size() const noexcept { return principals_.size(); }

 private:
  std::vector<Principal> principals_;
};

}  // namespace dlock::auth
