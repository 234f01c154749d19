#pragma once

// The core's clocks and timers (ADR-0034): every clock read and every timer in src/core goes
// through a TimeSource, so that unit tests drive time themselves (tests/support/simulated_time.h)
// instead of waiting for it. dlockd uses AsioTimeSource: the system clocks, and timers on the
// io_context, whose thread runs their callbacks.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "dlock/types.h"

namespace dlock::core {

// A one-shot timer. Not thread-safe on its own: each owner arms and cancels it under its lock.
class Timer {
 public:
  virtual ~Timer() = default;  // cancels: a destroyed timer never runs its callback
  // Runs `fire` once, `delay` from now, unless cancelled or re-armed before; re-arming replaces
  // the callback armed before. The callback may be destroyed later than a cancel, never run.
  virtual void arm(std::chrono::milliseconds delay, std::function<void()> fire) = 0;
  virtual void cancel() = 0;
};
using TimerPtr = std::unique_ptr<Timer>;

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  // The monotonic clock: deadlines, how long a waiter has waited, latencies.
  virtual SteadyClock::time_point steady_now() const = 0;
  // The wall clock: event times, and expiries as the backend states them (LockInfo::expires_at).
  virtual WallClock::time_point wall_now() const = 0;
  // Thread-safe. Each timer's callback runs on the source's thread (for AsioTimeSource, the
  // io_context's), never inside arm().
  virtual TimerPtr make_timer() = 0;
};

// Real time: the system clocks, and timers on `io` (boost::asio::steady_timer).
class AsioTimeSource final : public TimeSource {
 public:
  explicit AsioTimeSource(boost::asio::io_context& io) : io_(io) {}
  SteadyClock::time_point steady_now() const override { return SteadyClock::now(); }
  WallClock::time_point wall_now() const override { return WallClock::now(); }
  TimerPtr make_timer() override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace dlock::core
