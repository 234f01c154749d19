#include "auth/failure_throttle.h"

#include <algorithm>

namespace dlock::auth {

using std::chrono::milliseconds;

namespace {
ThrottleOptions normalized(ThrottleOptions options) {
  options.burst = std::max<std::size_t>(options.burst, 1);
  options.max_addresses = std::max<std::size_t>(options.max_addresses, 1);
  return options;
}
}  // namespace

FailureThrottle::FailureThrottle(ThrottleOptions options)
    : options_(normalized(std::move(options))) {}

void FailureThrottle::forget_refilled(TimePoint now) {
  std::erase_if(buckets_, [now](const auto& entry) { return entry.second <= now; });
  saturated_ = buckets_.size() >= options_.max_addresses;
}

milliseconds FailureThrottle::wait_before_attempt(std::string_view address) {
  const auto now = options_.now();
  std::lock_guard lock(mutex_);
  const auto it = buckets_.find(std::string(address));
  if (it == buckets_.end()) {
    if (!saturated_) return milliseconds(0);
    forget_refilled(now);
    return saturated_ ? options_.refill_interval : milliseconds(0);
  }
  // At least one failure's worth left: the bucket lacks at most burst - 1.
  const auto allowed_debt = options_.refill_interval * static_cast<long>(options_.burst - 1);
  const auto debt = it->second - now;
  if (debt <= allowed_debt) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(debt - allowed_debt);
}

void FailureThrottle::record_failure(std::string_view address) {
  const auto now = options_.now();
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(std::string(address));
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_addresses) forget_refilled(now);
    if (buckets_.size() >= options_.max_addresses) {
      saturated_ = true;
      return;
    }
    it = buckets_.emplace(std::string(address), now).first;
  }
  it->second = std::max(it->second, now) + options_.refill_interval;
}

std::size_t FailureThrottle::tracked_addresses_for_test() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

}  // namespace dlock::auth
