#pragma once

// The records the store SPI (lock_store.h) exchanges. Standard library only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

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

// One successful acquisition of a key by (owner_id, session_id).
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
  // An election's leader (LockStore::try_insert_leader) carries its value; a plain lock, a
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
