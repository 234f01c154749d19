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

milliseconds FailureThrottle::wait_locked(const Bucket& bucket, TimePoint now) const {
  // At least one failure's worth left: the bucket lacks at most burst - 1.
  const auto allowed_debt = options_.refill_interval * static_cast<long>(options_.burst - 1);
  const auto debt = bucket.full_at - now;
  if (debt <= allowed_debt) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(debt - allowed_debt);
}

void FailureThrottle::record_locked(std::string_view address, TimePoint now) {
  auto found = index_.find(address);
  if (found == index_.end()) {
    // Forget the least recently failed: refilled buckets (they hold nothing), then, when the
    // table is still full, whichever is oldest.
    while (!order_.empty() &&
           (order_.back().full_at <= now || index_.size() >= options_.max_addresses)) {
      index_.erase(order_.back().address);
      order_.pop_back();
    }
    order_.push_front(Bucket{std::string(address), now});
    found = index_.emplace(order_.front().address, order_.begin()).first;
  } else {
    order_.splice(order_.begin(), order_, found->second);
  }
  Bucket& bucket = *found->second;
  bucket.full_at = std::max(bucket.full_at, now) + options_.refill_interval;
}

milliseconds FailureThrottle::fail(std::string_view address) {
  const auto now = options_.now();
  std::lock_guard lock(mutex_);
  if (const auto found = index_.find(address); found != index_.end()) {
    const auto wait = wait_locked(*found->second, now);
    if (wait.count() > 0) {
      order_.splice(order_.begin(), order_, found->second);
      return wait;
    }
  }
  record_locked(address, now);
  return milliseconds(0);
}

milliseconds FailureThrottle::wait_before_attempt(std::string_view address) const {
  const auto now = options_.now();
  std::lock_guard lock(mutex_);
  const auto found = index_.find(address);
  return found == index_.end() ? milliseconds(0) : wait_locked(*found->second, now);
}

void FailureThrottle::record_failure(std::string_view address) {
  const auto now = options_.now();
  std::lock_guard lock(mutex_);
  record_locked(address, now);
}

std::size_t FailureThrottle::tracked_addresses_for_test() const {
  std::lock_guard lock(mutex_);
  return index_.size();
}

}  // namespace dlock::auth
