#pragma once

// The fixture of the core::LockService unit tests (lock_service_*_test.cc; one binary): a real
// LockService over an in-memory store with a fault-injecting wrapper between them, store calls on
// its own worker pool as in dlockd, and helpers to wait for and read its answers. Time is
// simulated (support/simulated_time.h): the service's timers and the store's clock move only when
// a test calls advance(), so deadlines, expiries, retries and reaping happen at exact instants
// and take no real time. A fixture whose real_time() is true runs the timers on an io_context
// thread and the real clocks instead, for tests whose point is that wiring.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/lock_service.h"
#include "support/fake_store.h"
#include "support/fault_injecting_store.h"
#include "support/simulated_time.h"
#include "support/subprocess.h"

namespace dlock::testing {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using AcquireOutcome = core::Outcome<std::optional<LockHandle>>;

// Tests wait for conditions (the workers' effects), never for time (support/subprocess.h).
template <typename Condition>
bool wait_until(Condition condition, milliseconds timeout = 2s) {
  return wait_for(condition, timeout, 1ms);
}

// The answer to one asynchronous service call.
template <typename T>
class Pending {
 public:
  core::LockService::Callback<T> callback() {
    return
        [promise = promise_](core::Outcome<T> outcome) { promise->set_value(std::move(outcome)); };
  }
  bool answered(milliseconds within = 0ms) const {
    return future_.wait_for(within) == std::future_status::ready;
  }
  core::Outcome<T> get(milliseconds within = 3s) const {
    if (!answered(within)) {
      ADD_FAILURE() << "no answer within " << within.count() << " ms";
      return {std::nullopt, std::make_exception_ptr(InternalError("no answer"))};
    }
    return future_.get();
  }

 private:
  std::shared_ptr<std::promise<core::Outcome<T>>> promise_ =
      std::make_shared<std::promise<core::Outcome<T>>>();
  std::shared_future<core::Outcome<T>> future_ = promise_->get_future().share();
};

inline std::optional<ErrorCode> error_code(const std::exception_ptr& error) {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const Error& failure) {
    return failure.code();
  } catch (...) {
    return ErrorCode::kInternal;
  }
}

inline bool granted(const AcquireOutcome& outcome) {
  return !outcome.error && outcome.value && outcome.value->has_value();
}
inline bool held(const AcquireOutcome& outcome) {
  return !outcome.error && outcome.value && !outcome.value->has_value();
}
inline FencingToken token_of(const AcquireOutcome& outcome) {
  return (*outcome.value)->fencing_token;
}

class CountingObserver : public core::ServiceObserver {
 public:
  void on_acquire(std::string_view, std::chrono::nanoseconds) override {}
  void on_grant(const LockHandle&) override { ++grants; }
  void on_release(std::string_view, FencingToken) override {}
  void on_expiry(const LockInfo&) override {}
  void on_session_lost(std::string_view) override {}
  void on_backend_error(const Error&) override { ++backend_errors; }
  void on_waiters(std::int64_t delta) override { waiters += delta; }
  void on_sessions(std::int64_t) override {}
  void on_backend_attempt() override { ++attempts; }

  std::atomic<int> grants{0};
  std::atomic<int> backend_errors{0};
  std::atomic<std::int64_t> waiters{0};
  std::atomic<int> attempts{0};
};

constexpr milliseconds kLongTtl = 30s;
const std::string kKey = "ns/key";

class LockServiceTest : public ::testing::Test {
 protected:
  virtual core::ServiceOptions options() const {
    core::ServiceOptions options;
    options.workers = 4;
    options.reap_interval = 50ms;
    options.retry_backoff = 20ms;
    return options;
  }

  // Real clocks and timers on an io_context thread instead of simulated time.
  virtual bool real_time() const { return false; }

  void SetUp() override {
    auto chosen = options();
    if (!real_time()) chosen.time = &time_;
    service_ = std::make_unique<core::LockService>(faults_, io_, chosen, observer_);
    io_thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    // Blocked store calls must end before the destructor joins the worker pool.
    faults_.clear_all();
    faults_.release_hung();
    work_.reset();
    io_.stop();
    io_thread_.join();
    service_.reset();
  }

  std::string open(const std::string& owner, milliseconds ttl = kLongTtl) {
    Pending<SessionInfo> pending;
    service_->open_session(owner, ttl, pending.callback());
    const auto outcome = pending.get();
    if (outcome.error || !outcome.value) {
      ADD_FAILURE() << "open_session failed";
      return "";
    }
    return outcome.value->session_id;
  }

  std::shared_ptr<Pending<std::optional<LockHandle>>> acquire(const std::string& session,
                                                              milliseconds wait,
                                                              milliseconds ttl = kLongTtl) {
    auto pending = std::make_shared<Pending<std::optional<LockHandle>>>();
    service_->acquire(kKey, session, GrantRequest::exclusive(ttl), wait, pending->callback());
    return pending;
  }

  // Acquires with a wait and returns once the service has queued the request.
  std::shared_ptr<Pending<std::optional<LockHandle>>> queue(const std::string& session,
                                                            milliseconds wait = 10s,
                                                            milliseconds ttl = kLongTtl) {
    const auto before = observer_.waiters.load();
    auto pending = acquire(session, wait, ttl);
    EXPECT_TRUE(wait_until([&] { return observer_.waiters.load() == before + 1; }))
        << "the acquire was not queued";
    return pending;
  }

  // Waits until the head waiter's failed attempt has read the key's holder (for its expiry), the
  // first read of the test: from then the service knows the holder (ADR-0036).
  bool head_read_the_holder() {
    return wait_until([&] { return faults_.calls("read") == 1; });
  }

  // Moves simulated time forward, running every timer due by then.
  void advance(milliseconds by) { time_.advance(by); }

  // Moves simulated time forward `step` at a time, at most `limit` in all, until `condition`
  // holds. For effects that a timer hands to the workers (a retry, a reaper run, a wake-up at an
  // expiry): after each step the workers are given until `condition` holds, or a few real
  // milliseconds, to act before time moves on. False when `limit` passed without it.
  template <typename Condition>
  bool advance_until(Condition condition, milliseconds step, milliseconds limit) {
    for (milliseconds moved{0};;) {
      if (wait_until(condition, 5ms)) return true;
      if (moved >= limit) return false;
      const auto by = std::min(step, limit - moved);
      advance(by);
      moved += by;
    }
  }

  core::Outcome<bool> release(const std::string& session, FencingToken token) {
    Pending<bool> pending;
    service_->release(kKey, session, token, pending.callback());
    return pending.get();
  }

  SimulatedTime time_;
  FakeStore store_{FakeStoreOptions{
      .now = [this] { return real_time() ? WallClock::now() : time_.wall_now(); }}};
  FaultInjectingStore faults_{store_, 5s};
  CountingObserver observer_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::thread io_thread_;
  std::unique_ptr<core::LockService> service_;
};

}  // namespace dlock::testing
