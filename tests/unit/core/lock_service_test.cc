// Unit tests of core::LockService (ADR-0007) over an in-memory store, with a fault-injecting
// wrapper between them: grants, FIFO waiting and hand-over, deadlines, ended sessions, and the
// service's answers when the backend fails, hangs, or cannot tell whether a write happened.
// The service runs as in dlockd: its timers on an io_context run by one thread, store calls on
// its own worker pool.

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

namespace dlock::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using AcquireOutcome = core::Outcome<std::optional<LockHandle>>;

// Tests wait for conditions, never for time.
template <typename Condition>
bool wait_until(Condition condition, milliseconds timeout = 2s) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!condition()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
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

std::optional<ErrorCode> error_code(const std::exception_ptr& error) {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const Error& failure) {
    return failure.code();
  } catch (...) {
    return ErrorCode::kInternal;
  }
}

bool granted(const AcquireOutcome& outcome) {
  return !outcome.error && outcome.value && outcome.value->has_value();
}
bool held(const AcquireOutcome& outcome) {
  return !outcome.error && outcome.value && !outcome.value->has_value();
}
FencingToken token_of(const AcquireOutcome& outcome) { return (*outcome.value)->fencing_token; }

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
  void on_backend_attempt() override {}

  std::atomic<int> grants{0};
  std::atomic<int> backend_errors{0};
  std::atomic<std::int64_t> waiters{0};
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

  void SetUp() override {
    service_ = std::make_unique<core::LockService>(faults_, io_, options(), observer_);
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
    service_->acquire(kKey, session, ttl, wait, pending->callback());
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

  core::Outcome<bool> release(const std::string& session, FencingToken token) {
    Pending<bool> pending;
    service_->release(kKey, session, token, pending.callback());
    return pending.get();
  }

  FakeStore store_;
  FaultInjectingStore faults_{store_, 5s};
  CountingObserver observer_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::thread io_thread_;
  std::unique_ptr<core::LockService> service_;
};

// --- grants and waiting ---------------------------------------------------------------------

TEST_F(LockServiceTest, GrantThenHeldThenReentrantGrantWithAGreaterToken) {
  const auto a = open("a");
  const auto b = open("b");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  EXPECT_TRUE(held(acquire(b, 0ms)->get())) << "another session must be answered held";
  const auto again = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(again)) << "the holder re-acquiring is granted (re-entrant)";
  EXPECT_GT(token_of(again), token_of(first));
  ASSERT_TRUE(store_.read(kKey));
  EXPECT_EQ(store_.read(kKey)->fencing_token, token_of(again));
}

TEST_F(LockServiceTest, WaitersAreHandedTheLockInArrivalOrderWithGreaterTokens) {
  const auto holder = open("holder");
  const auto first = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(first));
  std::vector<std::string> sessions;
  std::vector<std::shared_ptr<Pending<std::optional<LockHandle>>>> waiters;
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(open("w" + std::to_string(i)));
    waiters.push_back(queue(sessions.back()));
  }
  std::string releasing = holder;
  FencingToken token = token_of(first);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    const auto released = release(releasing, token);
    ASSERT_TRUE(released.value && *released.value) << "release " << i;
    const auto outcome = waiters[i]->get();
    ASSERT_TRUE(granted(outcome)) << "waiter " << i << " is next in arrival order";
    EXPECT_EQ((*outcome.value)->session_id, sessions[i]);
    EXPECT_GT(token_of(outcome), token) << "hand-over mints a strictly greater token";
    for (std::size_t later = i + 1; later < waiters.size(); ++later) {
      EXPECT_FALSE(waiters[later]->answered()) << "waiter " << later << " overtook waiter " << i;
    }
    releasing = sessions[i];
    token = token_of(outcome);
  }
  EXPECT_EQ(faults_.calls("handover"), 4u) << "each release with a waiter is one hand-over";
}

TEST_F(LockServiceTest, WaiterGivesUpAtWaitMsWithHeld) {
  const auto holder = open("holder");
  const auto waiter = open("waiter");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto started = SteadyClock::now();
  const auto outcome = acquire(waiter, 150ms)->get();
  const auto waited = SteadyClock::now() - started;
  EXPECT_TRUE(held(outcome));
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 1500ms);
  EXPECT_EQ(observer_.waiters.load(), 0);
  // The waiter that gave up is not granted later: the release is a plain delete.
  const auto released = release(holder, token_of(grant));
  ASSERT_TRUE(released.value && *released.value);
  EXPECT_EQ(faults_.calls("handover"), 0u);
  EXPECT_FALSE(store_.read(kKey));
}

TEST_F(LockServiceTest, OnlyTheHeadWaiterTouchesTheBackend) {
  const auto holder = open("holder");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  std::vector<std::string> sessions;
  for (int i = 0; i < 16; ++i) sessions.push_back(open("w" + std::to_string(i)));
  std::vector<std::shared_ptr<Pending<std::optional<LockHandle>>>> waiters;
  for (const auto& session : sessions) waiters.push_back(acquire(session, 10s));
  ASSERT_TRUE(wait_until([&] { return observer_.waiters.load() == 16; }));
  // The head's attempt found the key held and read the holder's expiry to arm its timer.
  ASSERT_TRUE(wait_until([&] { return faults_.calls("try_insert") >= 2; }));
  EXPECT_EQ(faults_.calls("try_insert"), 2u) << "the holder's grant and one head attempt";
  // The release hands over to the head in one store operation, without a try_insert.
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  ASSERT_TRUE(wait_until([&] { return observer_.waiters.load() == 15; }));
  EXPECT_EQ(faults_.calls("try_insert"), 2u);
  EXPECT_EQ(faults_.calls("handover"), 1u);
  EXPECT_EQ(
      std::count_if(waiters.begin(), waiters.end(), [](const auto& w) { return w->answered(); }),
      1);
}

TEST_F(LockServiceTest, ClosedSessionsWaiterIsAnsweredSessionNotFoundAtOnce) {
  const auto holder = open("holder");
  const auto waiter_session = open("waiter");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto waiter = queue(waiter_session, 30s);
  Pending<std::vector<LockInfo>> closed;
  service_->close_session(waiter_session, closed.callback());
  ASSERT_FALSE(closed.get().error);
  const auto outcome = waiter->get(1s);  // far before its 30 s wait
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kSessionNotFound);
  EXPECT_EQ(observer_.waiters.load(), 0);
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  EXPECT_EQ(faults_.calls("handover"), 0u) << "the closed session's waiter is never granted";
  EXPECT_FALSE(store_.read(kKey));
}

// --- backend faults: unavailable ------------------------------------------------------------

TEST_F(LockServiceTest, UnavailableOnAcquireIsAnErrorNeverHeldAndTheServiceCarriesOn) {
  const auto a = open("a");
  faults_.inject("try_insert", Fault::kUnavailable, 1);
  const auto failed = acquire(a, 0ms)->get();
  EXPECT_EQ(error_code(failed.error), ErrorCode::kUnavailable);
  EXPECT_FALSE(failed.value) << "a failed backend call is never answered held";
  EXPECT_GE(observer_.backend_errors.load(), 1);
  EXPECT_TRUE(granted(acquire(a, 0ms)->get())) << "the next acquire goes through";
}

TEST_F(LockServiceTest, HeadWaiterKeepsItsPlaceThroughFailingAttemptsAndIsGrantedAfterwards) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_insert", Fault::kUnavailable);
  const auto head = queue(a, 10s);
  const auto next = queue(b, 10s);
  // Retried after the backoff, each attempt failing; nobody is answered meanwhile.
  ASSERT_TRUE(wait_until([&] { return faults_.calls("try_insert") >= 3; }));
  EXPECT_FALSE(head->answered());
  EXPECT_FALSE(next->answered());
  faults_.clear("try_insert");
  const auto outcome = head->get();
  ASSERT_TRUE(granted(outcome));
  EXPECT_EQ((*outcome.value)->session_id, a);
  EXPECT_FALSE(next->answered());
  ASSERT_TRUE(release(a, token_of(outcome)).value);
  EXPECT_TRUE(granted(next->get()));
}

// A waiter whose every attempt failed with UnavailableError is answered with that failure at
// wait_ms, not "held": no backend decision was made (lock_store.h: a failure is never
// disguised as "held"). Over HTTP, a client waiting through a backend outage gets 503, not 409.
TEST_F(LockServiceTest, WaiterWhoseAttemptsAllFailedIsAnsweredUnavailableNotHeld) {
  const auto a = open("a");
  faults_.inject("try_insert", Fault::kUnavailable);
  const auto outcome = acquire(a, 200ms)->get();
  EXPECT_FALSE(held(outcome)) << "no backend decision was made";
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnavailable);
}

// --- backend faults: a call that hangs ------------------------------------------------------

TEST_F(LockServiceTest, HangingAttemptIsAnsweredByTheWaitersDeadlineNeverGranted) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_insert", Fault::kHang, 1);
  const auto started = SteadyClock::now();
  const auto waiter = acquire(a, 200ms);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  // The service's promise: a waiter is answered at wait_ms even while its store call hangs
  // (the deadline timer and the answer run on the io_context). The attempt in
  // flight has neither decided nor failed yet, so that answer is "held"; it is never a grant.
  const auto outcome = waiter->get(2s);
  EXPECT_LT(SteadyClock::now() - started, 1500ms);
  EXPECT_EQ(faults_.blocked(), 1u) << "answered while the store call still hangs";
  EXPECT_FALSE(granted(outcome));
  // The hung call ends (the store's call timeout): the service carries on.
  faults_.release_hung();
  EXPECT_TRUE(granted(acquire(b, 0ms)->get()));
}

// The service has no deadline of its own for a call without wait: it answers when the store call
// returns, relying on C2's rule that every backend call is bounded by the store's call timeout.
TEST_F(LockServiceTest, HangingAcquireWithoutWaitIsAnsweredUnavailableWhenTheCallReturns) {
  const auto a = open("a");
  faults_.inject("try_insert", Fault::kHang, 1);
  const auto pending = acquire(a, 0ms);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  EXPECT_FALSE(pending->answered());
  faults_.release_hung();
  const auto outcome = pending->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnavailable);
  EXPECT_FALSE(outcome.value);
  EXPECT_TRUE(granted(acquire(a, 0ms)->get()));
}

// --- backend faults: unknown outcome --------------------------------------------------------

TEST_F(LockServiceTest, UnknownOutcomeOnAcquireIsAnErrorAndItsGrantIsNeverGrantedTwice) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_insert", Fault::kUnknownOutcome, 1);
  const auto outcome = acquire(a, 0ms)->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnknownOutcome);
  EXPECT_FALSE(outcome.value) << "never answered held, never a grant";
  // The write did happen: while that grant lives, nobody else is granted the key.
  const auto live = store_.read(kKey);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->session_id, a);
  EXPECT_TRUE(held(acquire(b, 0ms)->get()));
  EXPECT_TRUE(held(acquire(b, 150ms)->get())) << "a waiter is not granted over the unknown grant";
  // The client retrying its acquire gets the grant back, with a greater token.
  const auto retried = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(retried));
  EXPECT_GT(token_of(retried), live->fencing_token);
}

TEST_F(LockServiceTest, UnknownOutcomeOnAHeadAttemptIsRetriedAndTheNextWaiterIsNotGranted) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_insert", Fault::kUnknownOutcome, 1);
  const auto head = queue(a, 10s);
  const auto outcome = head->get();
  // The failed attempt is retried for the same session: re-entrant, so it supersedes the grant
  // of unknown outcome with a greater token rather than leaving it unaccounted for.
  ASSERT_TRUE(granted(outcome));
  EXPECT_EQ(faults_.calls("try_insert"), 2u);
  EXPECT_EQ(token_of(outcome), store_.last_token());
  EXPECT_TRUE(held(acquire(b, 150ms)->get()));
  ASSERT_TRUE(release(a, token_of(outcome)).value);
  EXPECT_TRUE(granted(acquire(b, 0ms)->get()));
}

TEST_F(LockServiceTest, UnknownOutcomeOnHandOverGrantsTheHeadOnceAndKeepsTheQueue) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto b = open("b");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto first = queue(a);
  const auto second = queue(b);
  faults_.inject("handover", Fault::kUnknownOutcome, 1);
  const auto released = release(holder, token_of(grant));
  EXPECT_EQ(error_code(released.error), ErrorCode::kUnknownOutcome);
  // The hand-over happened in the store; the head's retry (re-entrant) is granted, the next
  // waiter stays queued behind it.
  const auto outcome = first->get();
  ASSERT_TRUE(granted(outcome));
  EXPECT_EQ((*outcome.value)->session_id, a);
  EXPECT_EQ(store_.read(kKey)->fencing_token, token_of(outcome));
  EXPECT_FALSE(second->answered());
  ASSERT_TRUE(release(a, token_of(outcome)).value);
  const auto next = second->get();
  ASSERT_TRUE(granted(next));
  EXPECT_GT(token_of(next), token_of(outcome));
}

// --- backend faults during hand-over ---------------------------------------------------------

TEST_F(LockServiceTest, FailedHandOverKeepsEveryWaiterQueued) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto b = open("b");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto first = queue(a);
  const auto second = queue(b);
  faults_.inject("handover", Fault::kUnavailable, 1);
  const auto failed = release(holder, token_of(grant));
  EXPECT_EQ(error_code(failed.error), ErrorCode::kUnavailable);
  EXPECT_EQ(store_.read(kKey)->session_id, holder) << "a failed hand-over changes nothing";
  EXPECT_EQ(observer_.waiters.load(), 2);
  EXPECT_FALSE(first->answered());
  EXPECT_FALSE(second->answered());
  // The holder retries its release: the queue is served in order.
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  const auto outcome = first->get();
  ASSERT_TRUE(granted(outcome));
  EXPECT_FALSE(second->answered());
  ASSERT_TRUE(release(a, token_of(outcome)).value);
  EXPECT_TRUE(granted(second->get()));
}

TEST_F(LockServiceTest, FailedGiveBackOfAnOrphanGrantDoesNotLoseTheNextWaiter) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto b = open("b");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto gives_up = queue(a, 150ms, 200ms);  // its grant, if orphaned, lives 200 ms
  const auto next = queue(b, 10s);
  // The hand-over to `a` stalls past a's deadline: a is answered held while it is in flight.
  faults_.inject("handover", Fault::kStall, 1);
  Pending<bool> releasing;
  service_->release(kKey, holder, token_of(grant), releasing.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  EXPECT_TRUE(held(gives_up->get()));
  // The stalled hand-over then grants `a` in the store; the service gives that orphan back, and
  // the give-back fails: the orphan must expire by its TTL and `b` be served after it.
  faults_.inject("delete_if_owner", Fault::kUnavailable, 1);
  faults_.release_hung();
  ASSERT_TRUE(releasing.get().value);
  ASSERT_TRUE(wait_until([&] { return faults_.calls("delete_if_owner") == 1; }));
  const auto orphan = store_.read(kKey);
  const auto outcome = next->get(3s);
  ASSERT_TRUE(granted(outcome)) << "the next waiter is served once the orphan expires";
  EXPECT_EQ((*outcome.value)->session_id, b);
  if (orphan) {
    EXPECT_GT(token_of(outcome), orphan->fencing_token);
  }
}

// --- backend faults around waiting: subscription and reaper --------------------------------

TEST_F(LockServiceTest, FailedSubscriptionAnswersTheWaiterUnavailableAndTheServiceCarriesOn) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  faults_.inject("watch_releases", Fault::kUnavailable, 1);
  const auto refused = acquire(a, 5s)->get();
  EXPECT_EQ(error_code(refused.error), ErrorCode::kUnavailable);
  EXPECT_FALSE(refused.value) << "never held: the service could not wait";
  EXPECT_EQ(observer_.waiters.load(), 0);
  const auto waiter = queue(a);
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  EXPECT_TRUE(granted(waiter->get()));
}

TEST_F(LockServiceTest, FailingReaperIsRetriedAndThenDropsTheWaiterOfAnExpiredSession) {
  const auto holder = open("holder");
  const auto mortal = open("mortal", 100ms);  // never kept alive
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  faults_.inject("reap_expired", Fault::kUnavailable);
  const auto waiter = queue(mortal, 10s);
  // The session expires while the reaper fails; the waiter keeps its place meanwhile (a failed
  // run skips the check of waiting sessions too).
  ASSERT_TRUE(wait_until([&] { return !store_.get_session(mortal); }));
  const auto runs = faults_.calls("reap_expired");
  ASSERT_TRUE(wait_until([&] { return faults_.calls("reap_expired") >= runs + 2; }));
  EXPECT_FALSE(waiter->answered());
  faults_.clear("reap_expired");
  const auto outcome = waiter->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kSessionNotFound);
  EXPECT_EQ(observer_.waiters.load(), 0);
  EXPECT_EQ(store_.read(kKey)->session_id, holder);
}

// --- more faults: hand-over hangs, release of unknown outcome, keepalive fails -----------------

TEST_F(LockServiceTest, HangingHandOverAnswersTheWaiterAtItsDeadlineAndTheReleaseUnavailable) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto waiter = queue(a, 200ms);
  faults_.inject("handover", Fault::kHang, 1);
  Pending<bool> releasing;
  service_->release(kKey, holder, token_of(grant), releasing.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  // The hand-over has neither decided nor failed yet: the waiter's answer at wait_ms is "held".
  EXPECT_TRUE(held(waiter->get(2s)));
  EXPECT_FALSE(releasing.answered()) << "the release waits for its store call";
  faults_.release_hung();  // the call overran the store's timeout: it failed
  EXPECT_EQ(error_code(releasing.get().error), ErrorCode::kUnavailable);
  EXPECT_EQ(store_.read(kKey)->session_id, holder) << "a failed hand-over changes nothing";
  EXPECT_EQ(observer_.waiters.load(), 0);
  // The holder retries: no waiter is left, so it is a plain delete.
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  EXPECT_FALSE(store_.read(kKey));
}

TEST_F(LockServiceTest, UnknownOutcomeOnReleaseIsAnErrorAndTheKeyIsFreeIfTheDeleteHappened) {
  const auto a = open("a");
  const auto b = open("b");
  const auto grant = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  faults_.inject("delete_if_owner", Fault::kUnknownOutcome, 1);
  const auto released = release(a, token_of(grant));
  EXPECT_EQ(error_code(released.error), ErrorCode::kUnknownOutcome);
  EXPECT_FALSE(released.value) << "never reported released";
  // The delete happened in the store: the key is free, and a retried release is "lock lost".
  EXPECT_FALSE(store_.read(kKey));
  EXPECT_EQ(error_code(release(a, token_of(grant)).error), ErrorCode::kLockLost);
  EXPECT_TRUE(granted(acquire(b, 0ms)->get()));
}

TEST_F(LockServiceTest, UnavailableKeepaliveKeepsTheSessionAndItsWaiter) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto waiter = queue(a);
  faults_.inject("heartbeat", Fault::kUnavailable, 1);
  Pending<SessionInfo> kept;
  service_->keepalive(a, kept.callback());
  EXPECT_EQ(error_code(kept.get().error), ErrorCode::kUnavailable);
  EXPECT_FALSE(waiter->answered()) << "an outage is not the end of the session";
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  EXPECT_TRUE(granted(waiter->get()));
}

// --- the session cap ------------------------------------------------------------------------

class LockServiceSessionCapTest : public LockServiceTest {
 protected:
  core::ServiceOptions options() const override {
    auto options = LockServiceTest::options();
    options.max_sessions = 2;
    return options;
  }

  core::Outcome<SessionInfo> try_open(const std::string& owner) {
    Pending<SessionInfo> pending;
    service_->open_session(owner, kLongTtl, pending.callback());
    return pending.get();
  }
};

TEST_F(LockServiceSessionCapTest, OpenBeyondTheCapIsRefusedWithoutABackendCall) {
  const auto a = open("a");
  open("b");
  const auto refused = try_open("c");
  EXPECT_EQ(error_code(refused.error), ErrorCode::kResourceExhausted);
  EXPECT_EQ(faults_.calls("open_session"), 2U) << "refused before the store is asked";
  EXPECT_EQ(observer_.backend_errors.load(), 0) << "a cap is not a backend error";
  Pending<std::vector<LockInfo>> closed;
  service_->close_session(a, closed.callback());
  ASSERT_FALSE(closed.get().error);
  EXPECT_FALSE(try_open("c").error) << "a closed session frees its place";
}

TEST_F(LockServiceSessionCapTest, SessionsThatExpiredUnseenStopCountingAgainstTheCap) {
  // The store does not report them (as when they were closed through another dlockd): only
  // the cap's own pruning, after a grace period for clock skew (5 s), can free their places.
  faults_.inject("reap_expired", Fault::kUnavailable);
  Pending<SessionInfo> first;
  Pending<SessionInfo> second;
  service_->open_session("a", 1ms, first.callback());
  service_->open_session("b", 1ms, second.callback());
  ASSERT_FALSE(first.get().error);
  ASSERT_FALSE(second.get().error);
  EXPECT_EQ(error_code(try_open("c").error), ErrorCode::kResourceExhausted);
  ASSERT_TRUE(wait_until([&] { return !try_open("c").error; }, 8s))
      << "the expired sessions were never pruned";
}

// One worker: a hung store call occupies the whole pool.
class LockServiceOneWorkerTest : public LockServiceTest {
 protected:
  core::ServiceOptions options() const override {
    auto options = LockServiceTest::options();
    options.workers = 1;
    return options;
  }
};

// A waiter's deadline is answered on the io_context's thread, not on the worker pool: when every
// worker is blocked in a store call, waiters are still answered at wait_ms (ADR-0007
// "Deadlines"), not after the store's call timeout (C2).
TEST_F(LockServiceOneWorkerTest, WaiterIsAnsweredAtItsDeadlineWhileEveryWorkerIsBlocked) {
  const auto a = open("a");
  faults_.inject("try_insert", Fault::kHang, 1);
  const auto started = SteadyClock::now();
  const auto waiter = acquire(a, 100ms);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  EXPECT_TRUE(waiter->answered(1s)) << "not answered while the only worker is blocked";
  EXPECT_LT(SteadyClock::now() - started, 1s);
}

}  // namespace
}  // namespace dlock::testing
