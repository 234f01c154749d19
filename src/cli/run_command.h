#pragma once

// `dlock run KEY -- CMD ARGS…`: hold a lock for exactly as long as CMD runs.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.h"

namespace dlock::cli {

struct RunOptions {
  std::string key;
  std::string ns;
  std::string owner;
  // Session TTL, and the lock's own TTL when !session_bound; 0 = the server's default.
  std::chrono::milliseconds ttl{0};
  // A lock that lives exactly as long as the session (ADR-0018, `--lease session`, the
  // default); false: a lock with a TTL of its own, extended every TTL/3 (`--lease ttl`).
  bool session_bound = true;
  std::chrono::milliseconds wait{0};
  // The session's lock-delay (`--lock-delay`, C2 "Lock-delay"; SessionOptions::lock_delay).
  std::chrono::milliseconds lock_delay{0};
  // kShared: a read lock (`--shared`). permits > 0: one permit of the semaphore `key` of that
  // many (`--semaphore N`). As AcquireOptions::mode and ::permits (dlock/client.h).
  HoldMode mode = HoldMode::kExclusive;
  std::uint32_t permits = 0;
  // Set: `dlock elect` - campaign for the election `key` with this value instead of acquiring
  // (C3 "Elections"): session-bound, exclusive; CMD also gets DLOCK_LEADER_VALUE.
  std::optional<std::string> leader_value;
  // How long before the lock's client deadline CMD's group is sent SIGTERM, and how long
  // after SIGTERM it is sent SIGKILL; empty = the defaults of stop_times() (ADR-0014).
  std::optional<std::chrono::milliseconds> stop_margin;
  std::optional<std::chrono::milliseconds> kill_grace;
  std::vector<std::string> command;
  // Who holds the key now and who waits for it (a read of it, short deadline; may throw), for
  // the waiting line and for naming the holder when the key stays held. Empty: not named.
  std::function<client::KeyState()> state;
  // stderr is a terminal: while the acquire waits, one line redrawn every second (WaitLine).
  bool terminal = false;
};

// Opens a session, acquires (or campaigns, with leader_value) waiting up to options.wait, runs
// CMD with DLOCK_KEY,
// DLOCK_FENCING_TOKEN, DLOCK_SESSION_ID, DLOCK_NAMESPACE and DLOCK_LOCK_MODE set, as the leader of
// its own process group, keeps session and lock alive while it runs, and releases afterwards, once
// nothing of the group is left (members CMD leaves behind are stopped first). A session-bound
// lock's deadline is the session's, moved by its keepalives; the grant is checked every TTL/3
// (an extend, a checked no-op for it) so that a revoke is noticed as with a TTL lock. Returns
// CMD's status, kExitNotAcquired when the key stayed held, kExitLockLost when the lock was
// lost, or could not be extended (its session kept alive, when session-bound) until
// stop_margin before its deadline, and CMD's group was stopped
// (SIGTERM, then SIGKILL after kill_grace, at the latest stop_margin / 2 before the deadline).
// SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to dlock are forwarded to CMD's group. Errors from the
// client library propagate (the caller maps them to exit codes).
int run_locked(client::Client& client, const RunOptions& options, std::ostream& err);

}  // namespace dlock::cli
