#pragma once

// The sessions-scale row (bench/README.md): N sessions opened through dlockd and kept alive by
// their client, each renewed every `keepalive_every` at a `ttl` lease, as a fleet of clients
// would, while the caller runs a lock workload. Sessions lost = keepalives answered 404
// session_not_found (the server expired the session before its keepalive arrived).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "http_load.h"

namespace dlock::bench {

struct SessionsScaleOptions {
  std::uint64_t sessions = 0;
  std::chrono::milliseconds ttl{30000};
  std::chrono::milliseconds keepalive_every{10000};
  // Connections that open sessions.
  int connections = 32;
  // Connections that send keepalives: enough that the bench is not what limits their rate
  // (10 000/s for 100k sessions at 10 s, at a few ms each). 0: one per 1 000 sessions,
  // between 32 and 256.
  int renewers = 0;
  // A line every few seconds while opening and keeping alive (to run.log).
  std::function<void(const std::string&)> progress;
  // Called once (on the driver's thread) when every session has been opened or failed to.
  std::function<void()> all_open;
};

struct SessionsScaleResult {
  std::uint64_t opened = 0, open_errors = 0;
  double open_seconds = 0;
  std::uint64_t keepalives = 0;        // answered 200
  std::uint64_t keepalive_errors = 0;  // anything but 200 and 404 (retried at once)
  std::uint64_t lost = 0;              // keepalive answered 404: the session had expired
  std::uint64_t reconnects = 0;        // renewer connections dlockd had closed, opened again
  double max_behind_ms = 0;            // the latest a keepalive went out after it was due
  std::vector<double> keepalive_ms;    // latency of every keepalive sent after all_open
  double window_seconds = 0;           // from all_open to stop
};

// Runs until `stop` is set (after all_open), then lets the requests in flight finish (2 s
// at most).
SessionsScaleResult http_sessions_scale(const HttpTarget& target,
                                        const SessionsScaleOptions& options,
                                        const std::atomic<bool>& stop);

}  // namespace dlock::bench
