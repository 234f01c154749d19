#pragma once

// The records the store SPI (lock_store.h) exchanges. Standard library only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dlock {

// Monotonic clock for every client-side deadline: wall-clock jumps never move it.
using SteadyClock = std::chrono::steady_clock;
// Wall clock of the *backend* (database clock), used only for informational timestamps.
using WallClock = std::chrono::system_clock;

using FencingToken = std::uint64_t;

// How long a grant lives (docs/adr/0018-session-bound-locks.md): a TTL of its own (expiring
// unless extended), or exactly as long as its session (kept alive by the session's heartbeats,
// ended by the session's expiry or close, never extended on its own).
class LockLease {
 public:
  // A TTL of the grant's own. Implicit on purpose: every TTL is a lease choice, so callers that
  // pass a duration keep meaning what they meant before session-bound grants existed.
  template <class Rep, class Period>
  LockLease(std::chrono::duration<Rep, Period> ttl)  // NOLINT(google-explicit-constructor)
      : ttl_(std::chrono::milliseconds(ttl)) {}
  // A grant that lives exactly as long as its session.
  static LockLease session() { return LockLease(); }

  bool session_bound() const { return !ttl_.has_value(); }
  // The grant's own TTL; only for a lease that is not session-bound.
  std::chrono::milliseconds ttl() const { return *ttl_; }

  friend bool operator==(const LockLease&, const LockLease&) = default;

 private:
  LockLease() = default;
  std::optional<std::chrono::milliseconds> ttl_;
};

// Whom a holder of a name may hold it with (docs/adr/0020-more-primitives-design.md). Holders of
// different modes exclude each other.
enum class HoldMode : std::uint8_t {
  kExclusive,  // alone: the mutex, the write side of a read-write lock
  kShared,     // with any number of other shared holders: the read side
  kPermit,     // with other permit holders, up to the name's limit: a counting semaphore
};

// "exclusive", "shared" or "permit": the spelling of C2, C3 and the metrics.
constexpr const char* to_string(HoldMode mode) noexcept {
  switch (mode) {
    case HoldMode::kShared:
      return "shared";
    case HoldMode::kPermit:
      return "permit";
    case HoldMode::kExclusive:
      break;
  }
  return "exclusive";
}

// What a grant asks for: exactly one of an exclusive grant, a shared holder, one permit of
// `limit`, or an election's leader with its value (docs/adr/0020-more-primitives-design.md), and
// how long it lives. Built only by the named constructors, so no other combination (a shared
// leader, a limit on an exclusive grant) can be represented. Values (a permit limit of 0, an
// empty leader value) are checked at the store boundary (lock_store.h, "Who checks what").
class GrantRequest {
 public:
  enum class Kind : std::uint8_t { kExclusive, kShared, kPermit, kLeader };

  static GrantRequest exclusive(LockLease lease) { return {Kind::kExclusive, lease, 0, {}}; }
  static GrantRequest shared(LockLease lease) { return {Kind::kShared, lease, 0, {}}; }
  static GrantRequest permit(std::uint32_t limit, LockLease lease) {
    return {Kind::kPermit, lease, limit, {}};
  }
  static GrantRequest leader(std::string value, LockLease lease) {
    return {Kind::kLeader, lease, 0, std::move(value)};
  }

  Kind kind() const { return kind_; }
  // The mode of the grant it makes: a leader's is exclusive.
  HoldMode mode() const {
    switch (kind_) {
      case Kind::kShared:
        return HoldMode::kShared;
      case Kind::kPermit:
        return HoldMode::kPermit;
      case Kind::kExclusive:
      case Kind::kLeader:
        break;
    }
    return HoldMode::kExclusive;
  }
  // Shared or permit: one holder of a holder set (ADR-0020).
  bool holder() const { return kind_ == Kind::kShared || kind_ == Kind::kPermit; }
  const LockLease& lease() const { return lease_; }
  // A permit's number of permits of its name; 0 for every other kind.
  std::uint32_t limit() const { return limit_; }
  // A leader's value; std::nullopt for every other kind.
  std::optional<std::string_view> leader_value() const {
    if (kind_ != Kind::kLeader) return std::nullopt;
    return value_;
  }

  friend bool operator==(const GrantRequest&, const GrantRequest&) = default;

 private:
  GrantRequest(Kind kind, LockLease lease, std::uint32_t limit, std::string value)
      : kind_(kind), lease_(lease), limit_(limit), value_(std::move(value)) {}

  Kind kind_;
  LockLease lease_;
  std::uint32_t limit_;
  std::string value_;
};

// An existing grant, for every operation that acts on one (LockStore::extend, delete_if_owner,
// handover, proclaim): its key, owner, session and token. It carries no mode: the token names
// exactly one grant of its key, whatever its mode, and the store knows which.
struct GrantRef {
  // Namespace-qualified key, "<namespace>/<key>".
  std::string key;
  std::string owner_id;
  std::string session_id;
  FencingToken fencing_token = 0;
};

// One successful acquisition of a key by (owner_id, session_id): the result of a grant.
struct LockHandle {
  // Namespace-qualified key, "<namespace>/<key>".
  std::string key;
  std::string owner_id;
  std::string session_id;
  // Minted once per grant; strictly greater than every token ever issued for `key`;
  // never re-read from the backend after the grant (INV-04).
  FencingToken fencing_token = 0;
  // Time the granting request was *sent* plus the granted TTL, on the monotonic clock. The
  // client stops believing in the lock no later than the backend expires it.
  SteadyClock::time_point client_deadline{};
  // Expiry as the backend's clock reports it. Informational only: never compare it with the
  // local clock to decide whether the lock is still held.
  WallClock::time_point server_expiry{};
  // True for a grant that lives exactly as long as its session (LockLease::session()): its
  // deadline and expiry are the session's as of the grant, and heartbeats keep it.
  bool session_bound = false;
  // Exclusive for a lock; shared or permit for one holder among several of its key.
  HoldMode mode = HoldMode::kExclusive;

  // The reference extend, release, handover and proclaim take.
  GrantRef ref() const { return {key, owner_id, session_id, fencing_token}; }
};

// What LockStore::read and LockStore::list report about a live grant.
struct LockInfo {
  std::string key;
  std::string owner_id;
  std::string session_id;
  FencingToken fencing_token = 0;
  WallClock::time_point acquired_at{};
  // A session-bound grant reports its session's expiry.
  WallClock::time_point expires_at{};
  bool session_bound = false;
  HoldMode mode = HoldMode::kExclusive;
  // For a permit: the number of permits of its name (the live holders' agreed limit); else 0.
  std::uint32_t limit = 0;
  // An election's leader (LockStore::try_grant of a leader) carries its value; a plain lock, a
  // shared or a permit holder has none.
  std::optional<std::string> value{};
};

// A name that a lock-delay (C2 "Lock-delay") keeps from every new grant: LockStore::list_delays.
struct KeyDelay {
  std::string key;
  // When the latest of its running delays ends, by the backend's clock (as LockInfo::expires_at).
  WallClock::time_point until{};
};

// Result of an administrative force-revoke. Appears nowhere on the acquire path.
struct LockOutcome {
  // True when a live grant was removed.
  bool revoked = false;
  // The revoked grant's token and owner, when there was one.
  std::optional<FencingToken> fencing_token;
  std::optional<std::string> owner_id;
};

// A client's liveness lease. Locks belong to a session and die with it.
struct SessionInfo {
  std::string session_id;
  std::string owner_id;
  std::chrono::milliseconds ttl{0};
  WallClock::time_point expires_at{};
  // Lock-delay (C2 "Lock-delay"): how long a name stays ungrantable after a grant of this
  // session ended without a release. 0: none.
  std::chrono::milliseconds lock_delay{0};
};

}  // namespace dlock
