#include "cli/watch_command.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cli/server_retry.h"
#include "cli/terminal_text.h"
#include "dlock/errors.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

// "14:03:07.250", local time (as `date` shows it).
std::string local_clock(WallClock::time_point at) {
  const auto since = at.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since);
  const auto millis = std::chrono::duration_cast<milliseconds>(since - seconds).count();
  const time_t whole = static_cast<time_t>(seconds.count());
  struct tm parts {};
  localtime_r(&whole, &parts);
  char text[32];
  std::snprintf(text, sizeof text, "%02d:%02d:%02d.%03lld", parts.tm_hour, parts.tm_min,
                parts.tm_sec, static_cast<long long>(millis));
  return text;
}

std::string padded(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

constexpr std::size_t kTimeWidth = 12, kKindWidth = 13, kKeyWidth = 24, kOwnerWidth = 16;

std::string header() {
  return padded("TIME", kTimeWidth) + "  " + padded("EVENT", kKindWidth) + "  " +
         padded("KEY", kKeyWidth) + "  " + padded("OWNER", kOwnerWidth) + "  DETAIL";
}

}  // namespace

std::string watch_line(const client::WatchEvent& event) {
  if (event.kind == "reset") {
    return padded(local_clock(WallClock::now()), kTimeWidth) + "  " + padded("reset", kKindWidth) +
           "  " + printable(event.reason);
  }
  std::string detail;
  const auto add = [&detail](const std::string& item) {
    if (!detail.empty()) detail += "  ";
    detail += item;
  };
  if (event.fencing_token) add("token " + std::to_string(*event.fencing_token));
  if (!event.mode.empty()) add(printable(event.mode));
  if (!event.reason.empty()) add(printable(event.reason));
  if (event.session_id) add("session " + printable(*event.session_id));
  std::string line = padded(local_clock(event.at), kTimeWidth) + "  " +
                     padded(printable(event.kind), kKindWidth) + "  " +
                     padded(printable(event.key), kKeyWidth) + "  " +
                     padded(printable(event.owner), kOwnerWidth) + "  " + detail;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

void follow_watch(client::Client& client, const WatchOptions& options, std::ostream& out,
                  std::ostream& err, const std::stop_token& stop,
                  const std::function<void(milliseconds)>& sleep) {
  if (!options.json) out << header() << '\n' << std::flush;
  std::string position;  // "": from now (the first answer's `next` pins it)
  milliseconds backoff{0};
  bool pinned = false;
  while (!stop.stop_requested()) {
    client::WatchPage page;
    try {
      // The first call only learns the position (no wait), so that nothing between the start
      // and the first long poll is missed.
      page = client.watch(options.target, options.prefix, position,
                          pinned ? options.poll : milliseconds(0), options.ns);
    } catch (const Error& error) {
      // Unreachable, or a lost answer to a read: asking again from the same position loses
      // nothing and repeats nothing.
      if (error.code() != ErrorCode::kUnavailable && error.code() != ErrorCode::kUnknownOutcome) {
        throw;
      }
      const auto failure = describe_failure(error.what());
      backoff = std::clamp(backoff * 2, milliseconds(500), milliseconds(5000));
      err << "dlock: watch: connection lost (" << printable(failure.reason) << "); resuming "
          << (position.empty() ? std::string("from now") : "after " + printable(position)) << " in "
          << backoff.count() << "ms\n"
          << std::flush;
      sleep(backoff);
      continue;
    }
    if (backoff.count() > 0) {
      err << "dlock: watch: resumed after " << printable(position) << '\n' << std::flush;
      backoff = milliseconds(0);
    }
    if (stop.stop_requested()) return;
    for (const auto& event : page.events) {
      if (event.kind == "reset") {
        err << "dlock: watch: the server could not resume after " << printable(position) << " ("
            << printable(event.reason) << "): events may be missing; re-read the state\n"
            << std::flush;
      }
      out << (options.json ? event.json : watch_line(event)) << '\n';
    }
    out.flush();
    position = page.next;
    pinned = true;
  }
}

}  // namespace dlock::cli
