#pragma once

// `dlock run KEY -- CMD ARGS…`: hold a lock for exactly as long as CMD runs.

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "dlock/client.h"

namespace dlock::cli {

struct RunOptions {
  std::string key;
  std::string ns;
  std::string owner;
  // Lock and session TTL; 0 = the server's default.
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds wait{0};
  // Time between SIGTERM and SIGKILL when the lock is lost.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(10)};
  std::vector<std::string> command;
};

// Opens a session, acquires (waiting up to options.wait), runs CMD with DLOCK_KEY,
// DLOCK_FENCING_TOKEN, DLOCK_SESSION_ID and DLOCK_NAMESPACE set, keeps session and lock alive
// while it runs, and releases afterwards. Returns CMD's status, kExitNotAcquired when the key
// stayed held, kExitLockLost when the lock was lost and CMD was terminated (SIGTERM, then
// SIGKILL after kill_grace). SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to dlock are forwarded to CMD.
// Errors from the client library propagate (the caller maps them to exit codes).
int run_locked(client::Client& client, const RunOptions& options, std::ostream& err);

}  // namespace dlock::cli
