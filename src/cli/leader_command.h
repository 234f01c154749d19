#pragma once

// `dlock leader NAME [--watch]` (C3 "Elections"): print an election's leader, or follow it with
// the observe long poll, one line per change.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <stop_token>
#include <string>

#include "cli/output.h"
#include "dlock/client.h"

namespace dlock::cli {

// How long one observe of --watch waits at most (below the server's lock.max.wait, 5m).
inline constexpr std::chrono::milliseconds kWatchPoll{std::chrono::seconds(60)};

// Prints the leader of `name` now, then, until `stop` is requested, observes it with the last
// answer's token and value (so each change wakes it once) and prints one line per change: a
// new leader (a greater token), a new value of the same leader (proclaim), nobody leading.
// An observe that ends after `poll` without a change prints nothing. Errors propagate.
void watch_leader(client::Client& client, const std::string& name, const std::string& ns,
                  Printer& printer, std::ostream& out, std::chrono::milliseconds poll,
                  const std::stop_token& stop);

// Runs `body` on a thread of its own until SIGINT or SIGTERM, which end the process with status
// 0 (the poll in flight is abandoned, `out` flushed); an error of `body` is rethrown. For the
// commands that follow a long poll (`dlock leader --watch`, `dlock watch`).
int until_interrupted(const std::function<void(const std::stop_token&)>& body, std::ostream& out);

// `dlock leader --watch`: watch_leader until interrupted (until_interrupted).
int watch_until_interrupted(client::Client& client, const std::string& name, const std::string& ns,
                            Printer& printer, std::ostream& out);

}  // namespace dlock::cli
