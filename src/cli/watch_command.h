#pragma once

// `dlock watch KEY` / `dlock watch --prefix PREFIX` (C3 "Watch"): follow a key's or a prefix's
// lock events with the watch long poll, one line (or one JSON object) per event, resuming from
// the last position after a lost connection.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <stop_token>
#include <string>

#include "dlock/client.h"

namespace dlock::cli {

inline constexpr const char* kWatchHelp = "Follow a key's or a prefix's lock events";
inline constexpr const char* kWatchFooter = R"(DESCRIPTION
  Prints one line per event of KEY (or, with --prefix, of every key beginning with PREFIX; an
  empty PREFIX is the whole namespace) from now on: TIME (local), EVENT (grant, release, expire,
  revoke, waiter_joined, waiter_left), KEY, OWNER, then the fencing token, the mode, why a waiter
  left (granted, gave_up, error) and the session ID when you may see it. With --json: the
  server's event objects of C3 "Watch", one per line.

  It long-polls the server from the position of the last event. When the server cannot be
  reached it says so on stderr and resumes from that position once it can: nothing is repeated
  or skipped. A server that cannot continue from the position (dlockd restarted, another dlockd
  behind the URL, or the watch fell more than 10000 events behind) answers a `reset` event,
  printed and reported on stderr: events may be missing, re-read the state (`dlock get`, `dlock
  list`). A watch sees the events of the dlockd it talks to (docs/adr/0032-watch.md).
  Runs until SIGINT (Ctrl-C) or SIGTERM, which end it with status 0.

EXIT STATUS
  0 interrupted, 64 usage error, 77 permission denied, 1 other errors.)";

struct WatchOptions {
  std::string target;  // the key, or the prefix
  bool prefix = false;
  std::string ns;
  bool json = false;
  std::chrono::milliseconds poll{std::chrono::seconds(60)};  // one long poll at most
};

// One event as `dlock watch` prints it on a terminal: local time, kind, key, then what the
// event carries, in aligned columns; every server string through printable().
std::string watch_line(const client::WatchEvent& event);

// Prints the events after "now" until `stop`: text lines (a header first) or, with json, the
// server's event objects one per line. A failure to reach the server is reported on `err` at
// once ("connection lost ... resuming from <position>") and the poll is retried with backoff
// (`sleep`) from the last position, then "resumed" is reported; a reset event (the server could
// not continue from the position: events may be missing) is printed and also reported on `err`.
// Other errors propagate.
void follow_watch(client::Client& client, const WatchOptions& options, std::ostream& out,
                  std::ostream& err, const std::stop_token& stop,
                  const std::function<void(std::chrono::milliseconds)>& sleep);

}  // namespace dlock::cli
