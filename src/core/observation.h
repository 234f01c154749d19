#pragma once

// One observer of an election (ADR-0020 "Leader election", C3 "Elections"): a long poll that
// answers as soon as a read of the key satisfies it, or at its deadline with the state then.
// It wakes only on the store's watch_releases notifications (a release, a new leader, a new
// value — through any dlockd on the storage) and then reads once: no polling. A wake-up that
// arrives while a read is in flight makes one more read after it, so no change is missed.
// LockService owns the registry of live observations (for shutdown) and the caps.

#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/time_source.h"
#include "core/waiter_queue.h"
#include "dlock/lock_store.h"

namespace dlock::core {

class Observation : public std::enable_shared_from_this<Observation> {
 public:
  using Satisfied = std::function<bool(const std::optional<LockInfo>&)>;
  using Done = std::function<void(Outcome<std::optional<LockInfo>>)>;

  Observation(LockStore& store, boost::asio::thread_pool& workers, TimeSource& time,
              std::string key, Satisfied satisfied, Done done);

  // Arms the deadline `wait` from now, then subscribes and makes the first read (on a worker).
  void start(std::chrono::milliseconds wait);
  // Ends it with `error` (shutdown) unless already answered.
  void fail(std::exception_ptr error);
  // Its client has gone: ends it at once (answered with an error nobody reads).
  void abandon();

 private:
  void wake();         // a notification: read again (now, or after the read in flight)
  void read();         // on a worker
  void at_deadline();  // on the time source's thread
  // Takes the answer's right under mutex_: false when already answered.
  bool finish_locked();
  void answer(Outcome<std::optional<LockInfo>> outcome);

  LockStore& store_;
  boost::asio::thread_pool& workers_;
  const std::string key_;
  const Satisfied satisfied_;
  Done done_;

  mutable std::mutex mutex_;  // guards everything below
  bool finished_ = false;
  bool reading_ = false;  // a read is queued or in flight
  bool again_ = false;    // a wake-up came during it
  bool deadline_passed_ = false;
  bool have_last_ = false;  // a read has completed: last_ is the state as of then
  std::optional<LockInfo> last_;
  ReleaseSubscriptionPtr subscription_;
  TimerPtr deadline_;
};
using ObservationPtr = std::shared_ptr<Observation>;

}  // namespace dlock::core
