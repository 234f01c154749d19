#pragma once

// The sessions-scale row (bench/README.md): N sessions opened through dlockd and kept alive by
// their client, each renewed every `keepalive_every` at a `ttl` lease, as a fleet of clients
// would, while the caller runs a lock workload. Sessions lost = keepalives answered 404
// session_not_found (the server expired the session before its keepalive arrived). The open
// phase is bounded (`open_limit`): a backend that cannot open them all in time gets its window
// with the sessions it has, and the result says how many that was.

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
  // No open request is sent once this long has passed since the first (0: no bound); the
  // window then starts with the sessions opened so far (and those whose open is in flight).
  std::chrono::milliseconds open_limit{0};
  // A line every few seconds while opening and keeping alive (to run.log).
  std::function<void(const std::string&)> progress;
  // Called once (on the driver's thread) when every session has been opened or failed to, or
  // when open_limit stopped the open phase: the window starts.
  std::function<void()> all_open;
};

struct SessionsScaleResult {
  std::uint64_t opened = 0, open_errors = 0;
  double open_seconds = 0;             // until all_open
  bool open_limit_hit = false;         // open_limit stopped the open phase
  std::uint64_t opened_at_window = 0;  // `opened` when the window started
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

struct CloseSessionsResult {
  std::uint64_t closed = 0;  // answered 204 (the session and its locks are gone, C3)
  std::uint64_t errors = 0;  // any other answer
  double seconds = 0;
  bool stopped = false;  // `limit` passed before every session was closed
};

// DELETE /v1/sessions/{id} for every id, over `connections` connections: each close releases the
// session's locks (C3). No close is sent once `limit` has passed, and requests still unanswered
// 10 s after it are abandoned.
CloseSessionsResult http_close_sessions(const HttpTarget& target,
                                        const std::vector<std::string>& session_ids,
                                        int connections, std::chrono::milliseconds limit);

}  // namespace dlock::bench
