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
};

// What LockStore::read and LockStore::list report about a live grant.
struct LockInfo {
  std::string key;
  std::string owner_id;
  std::string session_id;
  FencingToken fencing_token = 0;
  WallClock::time_point acquired_at{};
  WallClock::time_point expires_at{};
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
};

}  // namespace dlock
