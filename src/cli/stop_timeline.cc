#include "cli/stop_timeline.h"

#include <algorithm>

#include "dlock/client.h"
#include "dlock/errors.h"

namespace dlock::cli {

using std::chrono::milliseconds;

StopTimes stop_times(milliseconds ttl, std::optional<milliseconds> margin,
                     std::optional<milliseconds> grace) {
  StopTimes times;
  if (margin) {
    if (margin->count() <= 0) {
      throw InvalidArgumentError("stop_margin", "--stop-margin must be positive");
    }
    if (ttl.count() > 0 && *margin * 2 >= ttl) {
      throw InvalidArgumentError(
          "stop_margin", "--stop-margin " + client::format_duration(*margin) +
                             " must be less than half the lock's TTL (" +
                             client::format_duration(ttl) + "): the lock has 2/3 of its TTL " +
                             "left when it is extended, so CMD would be stopped while the lock " +
                             "is fine");
    }
    times.margin = *margin;
  } else {
    times.margin = std::max(milliseconds(1000), ttl / 10);
    if (ttl.count() > 0) times.margin = std::min(times.margin, ttl / 3);
  }
  if (grace) {
    if (grace->count() <= 0) {
      throw InvalidArgumentError("kill_grace", "--kill-grace must be positive");
    }
    times.grace = *grace;
  } else {
    times.grace = times.margin / 2;
  }
  return times;
}

SteadyClock::time_point term_time(SteadyClock::time_point deadline, const StopTimes& times) {
  return deadline - times.margin;
}

SteadyClock::time_point kill_time(SteadyClock::time_point term_sent,
                                  SteadyClock::time_point deadline, const StopTimes& times) {
  // SIGKILL is not instant (the kernel tears down each process), so it is sent while half
  // the margin is still left, whatever --kill-grace asks for.
  return std::min<SteadyClock::time_point>(term_sent + times.grace, deadline - times.margin / 2);
}

}  // namespace dlock::cli
