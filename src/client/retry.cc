#include "client/retry.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace dlock::client::detail {

std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, int attempt,
                                        std::uint64_t random_bits) {
  const std::int64_t cap = std::max<std::int64_t>(policy.max.count(), 1);
  std::int64_t full = std::max<std::int64_t>(policy.initial.count(), 1);
  // Doubling stops at the cap, so large attempt numbers cannot overflow.
  for (int i = 0; i < attempt && full < cap; ++i) full *= 2;
  full = std::min(full, cap);
  const std::int64_t fixed = full / 2;
  const std::int64_t spread = full - fixed;
  return std::chrono::milliseconds(
      fixed + static_cast<std::int64_t>(random_bits % static_cast<std::uint64_t>(spread + 1)));
}

RetryClock RetryClock::real() {
  RetryClock clock;
  clock.now = [] { return SteadyClock::now(); };
  clock.sleep = [](std::chrono::milliseconds delay, const std::stop_token& stop) {
    std::mutex mutex;
    std::condition_variable_any wakeup;
    std::unique_lock lock(mutex);
    // wait_for with a stop_token returns early, with the predicate's value, on request_stop().
    wakeup.wait_for(lock, stop, delay, [] { return false; });
    return !stop.stop_requested();
  };
  return clock;
}

}  // namespace dlock::client::detail
