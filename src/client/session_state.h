#pragma once

// The state behind Session and Lock handles. Each background thread (keepalive, auto-extend)
// lives in the state it maintains and is stopped and joined before that state dies.

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "client/client_core.h"

namespace dlock::client::detail {

// Records the first loss and calls the callback once, outside the mutex.
class LossFlag {
 public:
  // Returns true when this call recorded the loss.
  bool mark(const std::string& reason, const std::function<void(const std::string&)>& callback);
  bool lost() const { return lost_.load(); }
  std::string reason() const;

 private:
  std::atomic<bool> lost_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

struct SessionState {
  ClientCore* core = nullptr;
  std::string id;
  std::string owner;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds lock_delay{0};  // as the server granted it (C2 "Lock-delay")
  std::function<void(const std::string&)> on_lost;
  LossFlag loss;
  std::atomic<bool> closed{false};
  // Set when the server said the session does not exist: nothing left to close or release.
  std::atomic<bool> gone{false};

  std::mutex mutex;
  // Send time of the last successful open/keepalive + TTL less the clock-rate allowance: the
  // server cannot have expired the session before then.
  SteadyClock::time_point deadline;

  std::jthread keepalive;  // last: joined before the members it uses are destroyed
};

struct LockState {
  ClientCore* core = nullptr;
  std::shared_ptr<SessionState> session;
  std::string key;
  std::string ns;
  FencingToken token = 0;
  // Lives as long as the session (ADR-0018): its deadline is the session's, never extended.
  bool session_bound = false;
  // Which hold (ADR-0020); a permit's extend and release go to /v1/semaphores.
  HoldMode mode = HoldMode::kExclusive;
  std::uint32_t limit = 0;  // a permit's semaphore size
  // A leadership (Session::campaign): released by resigning through /v1/elections/{key}.
  bool leader = false;
  std::function<void(const std::string&)> on_lost;
  LossFlag loss;
  std::atomic<bool> released{false};
  // Set when the server said the grant is gone: there is nothing left to release.
  std::atomic<bool> gone{false};

  mutable std::mutex mutex;
  std::chrono::milliseconds ttl{0};
  SteadyClock::time_point client_deadline;
  WallClock::time_point server_expiry;
  std::string value;  // a leadership's value, changed by proclaim

  std::jthread extender;  // last: joined before the members it uses are destroyed
};

}  // namespace dlock::client::detail
