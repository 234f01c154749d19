#pragma once

// When `dlock run` stops its command (ADR-0014). The command must be gone before the lock's
// client deadline, because from then on another owner may hold the key:
//
//   deadline - margin          SIGTERM (and SIGCONT) to CMD's whole process group
//   + grace, at the latest
//   deadline - margin / 2      SIGKILL to the group
//   deadline                   the client stops believing in the lock
//
// A lock known to be lost already (revoked, lock_lost, session gone) is stopped at once:
// SIGTERM now, SIGKILL after the grace, never later than margin / 2 before the deadline.

#include <chrono>
#include <optional>

#include "dlock/types.h"

namespace dlock::cli {

struct StopTimes {
  // How long before the deadline the stop starts.
  std::chrono::milliseconds margin{0};
  // How long after SIGTERM the group is SIGKILLed (cut so SIGKILL keeps margin / 2 in hand).
  std::chrono::milliseconds grace{0};
};

// The margin and grace for a lock of `ttl`, from the flags when given. Defaults: margin
// max(1 s, ttl / 10), at most ttl / 3; grace margin / 2. Throws InvalidArgumentError for a
// margin of ttl / 2 or more (a healthy lock has 2/3 of its TTL left when it is extended, so
// such a margin would stop commands whose lock is fine) or a non-positive margin or grace.
StopTimes stop_times(std::chrono::milliseconds ttl, std::optional<std::chrono::milliseconds> margin,
                     std::optional<std::chrono::milliseconds> grace);

// When to send SIGTERM for a lock valid until `deadline`.
SteadyClock::time_point term_time(SteadyClock::time_point deadline, const StopTimes& times);

// When to send SIGKILL after SIGTERM was sent at `term_sent`, the deadline being `deadline`.
SteadyClock::time_point kill_time(SteadyClock::time_point term_sent,
                                  SteadyClock::time_point deadline, const StopTimes& times);

}  // namespace dlock::cli
