#include "client/retry.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
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

void renew_until_deadline(const LeaseRenewal& renewal, SteadyClock::time_point first,
                          const RetryClock& clock, const std::stop_token& stop) {
  SteadyClock::time_point next = first;
  for (;;) {
    const auto now = clock.now();
    const auto delay = next > now ? std::chrono::ceil<std::chrono::milliseconds>(next - now)
                                  : std::chrono::milliseconds(0);
    if (!clock.sleep(delay, stop) || stop.stop_requested()) return;
    const SteadyClock::time_point deadline = renewal.deadline();
    try {
      const auto following = renewal.renew(deadline);
      if (!following) return;
      next = *following;
    } catch (const std::exception& error) {
      if (stop.stop_requested()) return;
      if (clock.now() >= deadline) {
        renewal.on_expired(error.what());
        return;
      }
      renewal.on_retry(error.what());
      next = std::min(deadline, clock.now() + renewal.retry_delay);
    }
  }
}

}  // namespace dlock::client::detail
