#pragma once

// The retry policy for transient failures: capped exponential backoff with jitter, bounded by
// the caller's deadline. Time is injected so the policy is tested without real sleeps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>

#include "dlock/types.h"

namespace dlock::client::detail {

struct BackoffPolicy {
  std::chrono::milliseconds initial{50};
  std::chrono::milliseconds max{2000};
};

// Delay before retry number `attempt` (0 = the first retry): with d = min(max, initial * 2^
// attempt), a value in [d/2, d]. The random half keeps many clients that failed together (a
// dlockd restart) from retrying in lock-step; the fixed half keeps the delay from collapsing
// to zero. `random_bits` is any uniformly random 64-bit value.
std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, int attempt,
                                        std::uint64_t random_bits);

// How the retry loop reads time and waits. Production: steady clock and an interruptible
// wait; tests: a fake clock that advances when "sleeping".
struct RetryClock {
  std::function<SteadyClock::time_point()> now;
  // Waits `delay` unless `stop` is requested first; returns false when stopped.
  std::function<bool(std::chrono::milliseconds delay, const std::stop_token& stop)> sleep;

  static RetryClock real();
};

}  // namespace dlock::client::detail
