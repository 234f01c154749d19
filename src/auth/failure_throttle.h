#pragma once

// Slows down token guessing (ADR-0016): a token bucket per remote address, drained by failed
// authentications. While an address's bucket is empty every attempt from it is refused before
// its token is even looked at (otherwise the refusal would still answer the guess), until the
// bucket refills. Successful authentications neither drain nor refill it.

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dlock::auth {

using SteadyNow = std::function<std::chrono::steady_clock::time_point()>;

struct ThrottleOptions {
  // Failures an address may have in a burst before it is throttled (0 counts as 1).
  std::size_t burst = 10;
  // One more failure is allowed per this interval (the bucket's refill rate): 10 a minute.
  std::chrono::milliseconds refill_interval{6000};
  // Addresses tracked at once. When the table is full, addresses whose bucket has refilled are
  // forgotten; if none has, a failure from a new address is throttled (fail closed: memory
  // stays bounded, and a client with a good token is never affected).
  std::size_t max_addresses = 10000;
  SteadyNow now = [] { return std::chrono::steady_clock::now(); };
};

class FailureThrottle {
 public:
  explicit FailureThrottle(ThrottleOptions options = {});

  // Zero when `address` may try now; otherwise how long until it may try again.
  std::chrono::milliseconds wait_before_attempt(std::string_view address);
  // Notes a failed authentication from `address`.
  void record_failure(std::string_view address);

  std::size_t tracked_addresses_for_test() const;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // The bucket as the time it will be full again (GCRA): it lacks (full_at - now) /
  // refill_interval failures' worth; integer arithmetic, nothing to refill explicitly.
  void forget_refilled(TimePoint now);

  const ThrottleOptions options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, TimePoint> buckets_;  // address -> full_at
  // Set when the table was full and nothing could be forgotten: new addresses are throttled.
  bool saturated_ = false;
};

}  // namespace dlock::auth
