#pragma once

// dlockd's life once configured: the store, the lock service, the HTTP front end, readiness
// (the ready file, /readyz), and the graceful shutdown on SIGTERM/SIGINT. src/exe/dlockd.cc is
// the thin main that parses the configuration (C5) and calls run_dlockd.

#include "server/config.h"

namespace dlock::server {

// sysexits(3), dlockd's exit codes.
inline constexpr int kExitUsage = 64;        // bad configuration
inline constexpr int kExitUnavailable = 69;  // the store or the listen address cannot be had

// SIGHUP (reload the tokens file, C6) while dlockd starts: main calls hold_hangups() first
// thing, before any thread exists (each thread inherits the blocked mask), so that a SIGHUP that
// arrives while the configuration loads or the store opens stays pending instead of killing the
// process (its default action); run_dlockd unblocks it once its handler is installed, and the
// pending SIGHUP is then one reload. release_hangups() gives SIGHUP back its default action in
// this thread (for a one-shot run that does not serve).
void hold_hangups();
void release_hangups();

// Serves until SIGTERM or SIGINT, then drains: stops accepting, answers waiters 503, waits
// (bounded) for requests in flight. Returns the process exit code. SIGTERM or SIGINT before
// the listening socket exists (while the store opens) keep their default action: the process
// ends at once, with nothing to drain.
int run_dlockd(const ServerConfig& config);

}  // namespace dlock::server
