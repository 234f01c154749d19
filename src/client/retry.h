#pragma once

// The retry policy for transient failures: capped exponential backoff with jitter, bounded by
// the caller's deadline. Time is injected so the policy is tested without real sleeps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>

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

// A lease kept alive in the background (the session keepalive, the lock auto-extend): renewed
// at the times `renew` asks for, a transient failure retried until the lease's own deadline —
// only then can the server have let it lapse, and only then is it reported expired.
struct LeaseRenewal {
  // The lease's current client deadline, read before each attempt.
  std::function<SteadyClock::time_point()> deadline;
  // One renewal bounded by `deadline`. Returns when to renew next, or nothing when the loop
  // must end (a final answer such as "session not found", which `renew` has already recorded).
  // Throws std::exception for a failure worth retrying.
  std::function<std::optional<SteadyClock::time_point>(SteadyClock::time_point deadline)> renew;
  // A failure left the deadline passed: the lease may be gone. Called once; the loop ends.
  std::function<void(const std::string& error)> on_expired;
  // A failure before the deadline, retried after `retry_delay` (never past the deadline).
  std::function<void(const std::string& error)> on_retry;
  std::chrono::milliseconds retry_delay{50};
};

// Runs `renewal` from `first` until it ends or `stop` is requested; returns on this thread.
void renew_until_deadline(const LeaseRenewal& renewal, SteadyClock::time_point first,
                          const RetryClock& clock, const std::stop_token& stop);

}  // namespace dlock::client::detail
