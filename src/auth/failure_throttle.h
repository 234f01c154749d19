#pragma once

// Slows down token guessing (ADR-0016, contract C6): a token bucket per remote address, drained
// by failed authentications. The throttle answers only failures: a request whose token is valid
// is accepted whatever its address's bucket holds (the Authenticator looks the token up first),
// so a principal never pays for another's failures behind the same NAT or ingress. While an
// address's bucket is empty its failures are answered 429 instead of 401 and drain nothing more;
// the bucket refills at one failure per refill_interval.
//
// Memory is bounded by max_addresses: a failure from a new address when the table is full
// evicts the least recently failed address (an LRU list, O(1)). A newcomer is never refused for
// lack of room, and an evicted address starts afresh with a full bucket.

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
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
  // Addresses tracked at once (0 counts as 1); beyond it the least recently failed is forgotten.
  std::size_t max_addresses = 10000;
  SteadyNow now = [] { return std::chrono::steady_clock::now(); };
};

class FailureThrottle {
 public:
  explicit FailureThrottle(ThrottleOptions options = {});

  // A failed authentication from `address`. Zero when the address's bucket had a failure's
  // worth left: the failure is counted (drains the bucket; answer 401). Otherwise how long until
  // it has one again (answer 429 with Retry-After); then nothing is drained, and the address
  // becomes the most recently failed.
  std::chrono::milliseconds fail(std::string_view address);

  // Zero when a failure from `address` now would be counted; otherwise how long until it would.
  std::chrono::milliseconds wait_before_attempt(std::string_view address) const;
  // Counts a failure from `address` whatever its bucket holds (tests and fail()).
  void record_failure(std::string_view address);

  std::size_t tracked_addresses_for_test() const;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // The bucket as the time it will be full again (GCRA): it lacks (full_at - now) /
  // refill_interval failures' worth; integer arithmetic, nothing to refill explicitly.
  struct Bucket {
    std::string address;
    TimePoint full_at;
  };
  using Order = std::list<Bucket>;  // most recently failed first

  std::chrono::milliseconds wait_locked(const Bucket& bucket, TimePoint now) const;
  void record_locked(std::string_view address, TimePoint now);

  const ThrottleOptions options_;
  mutable std::mutex mutex_;
  Order order_;
  // Keys view the addresses of order_'s nodes, which never move.
  std::unordered_map<std::string_view, Order::iterator> index_;
};

}  // namespace dlock::auth
