#pragma once

// dlockd's life once configured: the store, the lock service, the HTTP front end, readiness
// (the ready file, /readyz), and the graceful shutdown on SIGTERM/SIGINT. src/exe/dlockd.cc is
// the thin main that parses the configuration (C5) and calls run_dlockd.

#include "server/config.h"

namespace dlock::server {

// sysexits(3), dlockd's exit codes.
inline constexpr int kExitUsage = 64;        // bad configuration
inline constexpr int kExitUnavailable = 69;  // the store or the listen address cannot be had

// Serves until SIGTERM or SIGINT, then drains: stops accepting, answers waiters 503, waits
// (bounded) for requests in flight. Returns the process exit code.
int run_dlockd(const ServerConfig& config);

}  // namespace dlock::server
