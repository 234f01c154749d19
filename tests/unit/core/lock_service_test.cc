// Unit tests of core::LockService (ADR-0007) over an in-memory store, with a fault-injecting
// wrapper between them (lock_service_fixture.h): grants, FIFO waiting and hand-over, deadlines,
// ended sessions and the session cap. The service's answers when the backend fails, hangs, or
// cannot tell whether a write happened are in lock_service_faults_test.cc.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lock_service_fixture.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

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
  const auto pending = queue(waiter, 150ms);
  advance(149ms);
  EXPECT_FALSE(pending->answered()) << "answered before its wait_ms";
  advance(1ms);  // the deadline answers on this thread, within advance()
  ASSERT_TRUE(pending->answered()) << "not answered at its wait_ms";
  EXPECT_TRUE(held(pending->get()));
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
  ASSERT_TRUE(wait_until([&] { return faults_.calls("try_grant") >= 2; }));
  EXPECT_EQ(faults_.calls("try_grant"), 2u) << "the holder's grant and one head attempt";
  // The release hands over to the head in one store operation, without a try_grant.
  ASSERT_TRUE(release(holder, token_of(grant)).value);
  ASSERT_TRUE(wait_until([&] { return observer_.waiters.load() == 15; }));
  EXPECT_EQ(faults_.calls("try_grant"), 2u);
  EXPECT_EQ(faults_.calls("handover"), 1u);
  EXPECT_EQ(
      std::count_if(waiters.begin(), waiters.end(), [](const auto& w) { return w->answered(); }),
      1);
}

// --- re-entrancy while others wait, from the holder this service knows (ADR-0036) ------------
// The service keeps the key's holder it learnt; an acquire that joins a queue reads nothing. A
// grant made behind its back (another dlockd: here, calls on the store itself) is reported by
// the store's watch_releases.

TEST_F(LockServiceTest, HolderReacquiringWhileOthersWaitIsGrantedWithoutAStoreRead) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto waiting = queue(b);
  ASSERT_TRUE(head_read_the_holder());
  const auto again = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(again)) << "the holder does not wait behind a waiter for its own lock";
  EXPECT_GT(token_of(again), token_of(first));
  const auto queued = queue(c);
  EXPECT_EQ(faults_.calls("read_holders"), 0u) << "the holder was known: no read per acquire";
  // Not waiting, it reads (a hand-over elsewhere may not be reported yet) and is answered held.
  EXPECT_TRUE(held(acquire(c, 0ms)->get())) << "another session does not overtake the queue";
  EXPECT_FALSE(waiting->answered());
  ASSERT_TRUE(release(a, token_of(again)).value);
  ASSERT_TRUE(granted(waiting->get()));
  EXPECT_FALSE(queued->answered());
}

TEST_F(LockServiceTest, AfterAHandOverTheFormerHolderWaitsItsTurnWithoutAStoreRead) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto b_waits = queue(b);
  const auto c_waits = queue(c);
  ASSERT_TRUE(release(a, token_of(first)).value);
  const auto b_granted = b_waits->get();
  ASSERT_TRUE(granted(b_granted));
  const auto reads = faults_.calls("read_holders") + faults_.calls("read");
  const auto a_waits = queue(a);  // behind c, who waits still
  EXPECT_EQ(faults_.calls("read_holders") + faults_.calls("read"), reads)
      << "the hand-over told the service who holds the key";
  ASSERT_TRUE(release(b, token_of(b_granted)).value);
  ASSERT_TRUE(granted(c_waits->get()));
  EXPECT_FALSE(a_waits->answered()) << "the former holder overtook the queue";
}

TEST_F(LockServiceTest, HandOverMadeElsewhereIsReportedAndItsHolderIsReentrantHere) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto c_waits = queue(c);
  ASSERT_TRUE(head_read_the_holder());  // the service knows a
  // Another dlockd hands a's grant to b: one store write this service did not make.
  const auto handed = store_.handover((*first.value)->ref(), "b", b, kLongTtl);
  ASSERT_TRUE(handed);
  const auto again = acquire(b, 10s);
  // No time passes: neither c's deadline nor a wake-up at an expiry can answer b.
  const auto outcome = again->get();
  ASSERT_TRUE(granted(outcome)) << "b holds the key: re-entrant, not queued behind c";
  EXPECT_GT(token_of(outcome), handed->fencing_token);
  EXPECT_FALSE(c_waits->answered());
}

TEST_F(LockServiceTest, HolderQueuedBeforeItsHandOverIsKnownMovesToTheFront) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const auto first = acquire(a, 0ms, 1s)->get();
  ASSERT_TRUE(granted(first));
  const auto c_waits = queue(c, 30s);
  ASSERT_TRUE(head_read_the_holder());  // the service knows a
  // Handed to b elsewhere, not reported yet: b's acquire here queues behind c.
  store_.raw_handover(kKey, "b", b, kLongTtl);
  const auto b_waits = queue(b, 30s);
  // c's wake-up at a's expiry finds b holding: b, queued for its own lock, moves up and is
  // granted (re-entrant); c keeps waiting for b's grant to end.
  ASSERT_TRUE(advance_until([&] { return b_waits->answered(); }, 5ms, 1100ms));
  EXPECT_TRUE(granted(b_waits->get()));
  EXPECT_FALSE(c_waits->answered());
}

// An acquire that does not wait cannot be fixed up later (a waiter can: check_holder moves it
// up), so it reads the holder even when the service knows another: a hand-over made elsewhere and
// not reported yet makes it the holder, and it is granted as re-entrant, not answered "held".
TEST_F(LockServiceTest, HolderNotWaitingIsGrantedAfterAHandOverNotYetReported) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto c_waits = queue(c, 30s);
  ASSERT_TRUE(head_read_the_holder());  // the service knows a
  const auto handed = store_.raw_handover(kKey, "b", b, kLongTtl);
  const auto outcome = acquire(b, 0ms)->get();
  ASSERT_TRUE(granted(outcome)) << "b holds the key: re-entrant, not refused as held";
  EXPECT_GT(token_of(outcome), handed);
  EXPECT_FALSE(c_waits->answered());
}

TEST_F(LockServiceTest, RevokedHolderReacquiringWaitsBehindTheQueue) {
  const auto a = open("a");
  const auto b = open("b");
  const auto first = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto b_waits = queue(b);
  ASSERT_TRUE(head_read_the_holder());
  // The head's attempts after the revoke fail (retried every 20 ms): the key stays free.
  faults_.inject("try_grant", Fault::kUnavailable);
  Pending<LockOutcome> revoked;
  service_->revoke(kKey, revoked.callback());
  ASSERT_TRUE(revoked.get().value->revoked);
  const auto a_waits = queue(a);
  faults_.clear("try_grant");
  ASSERT_TRUE(advance_until([&] { return b_waits->answered(); }, 5ms, 100ms));
  EXPECT_TRUE(granted(b_waits->get()));
  EXPECT_FALSE(a_waits->answered()) << "a revoked holder overtook the queue";
}

// No reaper run: an expiry the reaper reported would tell the service as a release does.
class LockServiceNoReaperTest : public LockServiceTest {
 protected:
  core::ServiceOptions options() const override {
    auto chosen = LockServiceTest::options();
    chosen.reap_interval = std::chrono::hours(1);
    return chosen;
  }
};

TEST_F(LockServiceNoReaperTest, ExpiredHolderReacquiringWaitsBehindTheQueue) {
  const auto a = open("a");
  const auto b = open("b");
  const auto first = acquire(a, 0ms, 1s)->get();
  ASSERT_TRUE(granted(first));
  const auto b_waits = queue(b, 10s);
  ASSERT_TRUE(head_read_the_holder());
  advance(1002ms);  // a's grant expired; the head's wake-up is 5 ms after it
  // What the service knew of a ended with a's grant: a is not the holder any more.
  const auto a_waits = queue(a, 10s);
  ASSERT_TRUE(advance_until([&] { return b_waits->answered(); }, 1ms, 20ms));
  EXPECT_TRUE(granted(b_waits->get()));
  EXPECT_FALSE(a_waits->answered()) << "an expired holder overtook the queue";
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

// --- lock-delay (C2 "Lock-delay") ---------------------------------------------------------------

// A waiter queued while a revoked grant's lock-delay runs is granted once the delay is over
// (the reaper announces its end), not before and not never.
TEST_F(LockServiceTest, WaiterIsGrantedWhenTheLockDelayEnds) {
  Pending<SessionInfo> opened;
  service_->open_session("a", kLongTtl, opened.callback(), "", 400ms);
  const auto outcome = opened.get();
  ASSERT_FALSE(outcome.error);
  ASSERT_TRUE(outcome.value);
  EXPECT_EQ(outcome.value->lock_delay, 400ms);
  const auto a = outcome.value->session_id;
  const auto b = open("b");
  ASSERT_TRUE(granted(acquire(a, 0ms)->get()));
  Pending<LockOutcome> revoked;
  service_->revoke(kKey, revoked.callback());
  ASSERT_FALSE(revoked.get().error);
  EXPECT_TRUE(held(acquire(b, 0ms)->get())) << "granted during the lock-delay";
  const auto waiter = queue(b, 5s);
  const auto answered = [&] { return waiter->answered(); };
  EXPECT_FALSE(advance_until(answered, 50ms, 399ms)) << "granted before the delay ended";
  ASSERT_TRUE(advance_until(answered, 50ms, 1s)) << "never granted after the delay";
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
  advance(5001ms);  // their expiry (1 ms) plus the grace: not yet past it
  EXPECT_EQ(error_code(try_open("c").error), ErrorCode::kResourceExhausted)
      << "pruned within the grace period";
  advance(1ms);
  EXPECT_FALSE(try_open("c").error) << "the expired sessions were never pruned";
}

// Opens run on several workers at once: the cap check and the place it found are one step, so
// an open racing another for the last place is refused, not admitted beside it.
TEST_F(LockServiceSessionCapTest, ConcurrentOpensCannotAllPassTheCapBeforeAnyIsAdded) {
  open("a");
  faults_.inject("open_session", Fault::kStall, 2);
  Pending<SessionInfo> b;
  Pending<SessionInfo> c;
  service_->open_session("b", kLongTtl, b.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  service_->open_session("c", kLongTtl, c.callback());
  EXPECT_EQ(error_code(c.get().error), ErrorCode::kResourceExhausted)
      << "b's open under way holds the last place";
  faults_.release_hung();
  EXPECT_FALSE(b.get().error);
}

TEST_F(LockServiceSessionCapTest, AFailedOpenGivesItsPlaceBack) {
  open("a");
  faults_.inject("open_session", Fault::kUnavailable, 1);
  EXPECT_EQ(error_code(try_open("b").error), ErrorCode::kUnavailable);
  EXPECT_FALSE(try_open("b").error) << "the failed open's place was not given back";
}

// One worker: a hung store call occupies the whole pool. On real time: the point is which
// thread runs the deadline's timer in dlockd (the io_context's).
class LockServiceOneWorkerTest : public LockServiceTest {
 protected:
  bool real_time() const override { return true; }
  core::ServiceOptions options() const override {
    auto options = LockServiceTest::options();
    options.workers = 1;
    return options;
  }
};

// A waiter's deadline is answered on the io_context's thread, not on the worker pool: when every
// worker is blocked in a store call, waiters are still answered at wait_ms (ADR-0007
// "Deadlines"), not after the store's call timeout (C2). (A waiter whose own attempt is in flight
// is answered by that attempt instead: AStalledAttemptNeverSupersedesALaterGrantOfItsOwnSession.)
TEST_F(LockServiceOneWorkerTest, WaiterIsAnsweredAtItsDeadlineWhileEveryWorkerIsBlocked) {
  const auto holder = open("holder");
  const auto a = open("a");
  ASSERT_TRUE(granted(acquire(holder, 0ms)->get()));
  const auto started = SteadyClock::now();
  const auto waiter = queue(a, 300ms);
  // Its attempt found the key held and ended (the wake-up at the holder's expiry reads it).
  ASSERT_TRUE(head_read_the_holder());
  faults_.inject("try_grant", Fault::kHang, 1);
  Pending<std::optional<LockHandle>> other;
  service_->acquire("ns/other", holder, GrantRequest::exclusive(kLongTtl), 0ms, other.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s)) << "the only worker is not blocked";
  EXPECT_TRUE(waiter->answered(1s)) << "not answered while the only worker is blocked";
  EXPECT_TRUE(held(waiter->get()));
  EXPECT_LT(SteadyClock::now() - started, 1s);
}

}  // namespace
}  // namespace dlock::testing
