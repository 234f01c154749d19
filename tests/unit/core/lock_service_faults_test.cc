// Unit tests of core::LockService under backend faults, one or more per fault kind of
// FaultInjectingStore (unavailable, a call that hangs past its deadline, a slow call that then
// succeeds, unknown outcome) on acquire, a head waiter's attempt, hand-over, give-back, release,
// keepalive, the release subscription and the reaper. Fixture: lock_service_fixture.h.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lock_service_fixture.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

// --- backend faults: unavailable ------------------------------------------------------------

TEST_F(LockServiceTest, UnavailableOnAcquireIsAnErrorNeverHeldAndTheServiceCarriesOn) {
  const auto a = open("a");
  faults_.inject("try_grant", Fault::kUnavailable, 1);
  const auto failed = acquire(a, 0ms)->get();
  EXPECT_EQ(error_code(failed.error), ErrorCode::kUnavailable);
  EXPECT_FALSE(failed.value) << "a failed backend call is never answered held";
  EXPECT_GE(observer_.backend_errors.load(), 1);
  EXPECT_TRUE(granted(acquire(a, 0ms)->get())) << "the next acquire goes through";
}

TEST_F(LockServiceTest, HeadWaiterKeepsItsPlaceThroughFailingAttemptsAndIsGrantedAfterwards) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_grant", Fault::kUnavailable);
  const auto head = queue(a, 10s);
  const auto next = queue(b, 10s);
  // Retried after the backoff (20 ms), each attempt failing; nobody is answered meanwhile.
  ASSERT_TRUE(wait_until([&] { return faults_.calls("try_grant") == 1; }));
  EXPECT_FALSE(advance_until([&] { return faults_.calls("try_grant") > 1; }, 19ms, 19ms))
      << "retried before the backoff";
  ASSERT_TRUE(advance_until([&] { return faults_.calls("try_grant") >= 3; }, 1ms, 200ms));
  EXPECT_FALSE(head->answered());
  EXPECT_FALSE(next->answered());
  faults_.clear("try_grant");
  ASSERT_TRUE(advance_until([&] { return head->answered(); }, 20ms, 200ms));
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
  faults_.inject("try_grant", Fault::kUnavailable);
  const auto waiter = queue(a, 200ms);
  EXPECT_FALSE(advance_until([&] { return waiter->answered(); }, 20ms, 199ms));
  advance(1ms);
  const auto outcome = waiter->get();
  EXPECT_FALSE(held(outcome)) << "no backend decision was made";
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnavailable);
}

// --- backend faults: a call that hangs ------------------------------------------------------

TEST_F(LockServiceTest, AWaiterWhoseAttemptHangsIsAnsweredByThatAttemptNeverGranted) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_grant", Fault::kHang, 1);
  const auto waiter = acquire(a, 200ms);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  // Its wait_ms passes while its attempt is in flight: that attempt decides (ADR-0007
  // "Deadlines"), as for a call without wait, bounded by the store's call timeout (C2).
  advance(200ms);
  EXPECT_FALSE(waiter->answered()) << "answered while its own attempt is in flight";
  // The hung call ends with a failure: the answer is that failure, never "held", never a grant.
  faults_.release_hung();
  const auto outcome = waiter->get(2s);
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnavailable);
  EXPECT_FALSE(granted(outcome));
  EXPECT_EQ(observer_.waiters.load(), 0);
  // The service carries on.
  EXPECT_TRUE(granted(acquire(b, 0ms)->get()));
}

// dlock_backend_acquire_attempts_total counts an attempt once it has ended (C4): a test (or an
// operator) that sees a count knows none of those attempts is still in flight.
TEST_F(LockServiceTest, ABackendAttemptIsCountedOnlyOnceItHasEnded) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto b = open("b");
  ASSERT_TRUE(granted(acquire(holder, 0ms)->get()));
  ASSERT_EQ(observer_.attempts.load(), 1);
  faults_.inject("try_grant", Fault::kStall, 2);
  const auto immediate = acquire(b, 0ms);  // an acquire that does not wait: it stalls
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  const auto waiter = queue(a, 10s);  // its first attempt stalls too
  ASSERT_TRUE(faults_.wait_for_blocked(2, 2s));
  EXPECT_EQ(observer_.attempts.load(), 1) << "an attempt in flight was counted";
  faults_.release_hung();
  EXPECT_TRUE(held(immediate->get()));
  EXPECT_TRUE(wait_until([&] { return observer_.attempts.load() == 3; }));
  EXPECT_FALSE(waiter->answered());
}

// The early end of a grant seen once in the Kubernetes simulation (docs/deploy.md): a waiter's
// attempt stalls in the store (an etcd leader election); answered "held" at wait_ms while it is in
// flight, the client asks again, is granted, and the stalled attempt lands afterwards as a
// re-entrant acquire of that grant — a new token, superseding the one the client was just given
// — and is then given back as an orphan: the key ends up free, or held under a token nobody
// knows, right after the client was told it holds it. Whatever the service answers the waiter,
// the grant it delivered to a session last must be the one that lives.
TEST_F(LockServiceTest, AStalledAttemptNeverSupersedesALaterGrantOfItsOwnSession) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto first = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto waiter = queue(a, 200ms);  // its first attempt finds the key held
  faults_.inject("try_grant", Fault::kStall, 1);
  // Released through another dlockd: the release wakes the waiter, whose attempt stalls.
  ASSERT_TRUE(store_.delete_if_owner(GrantRef{kKey, "holder", holder, token_of(first)}));
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  advance(200ms);  // its wait_ms
  LockHandle delivered;
  if (waiter->answered()) {
    // Answered while its attempt is in flight: the client moves on and asks again.
    ASSERT_TRUE(held(waiter->get()));
    const auto again = acquire(a, 0ms)->get();
    ASSERT_TRUE(granted(again));
    delivered = **again.value;
    faults_.release_hung();  // the stalled attempt lands now
    EXPECT_TRUE(wait_until([&] { return faults_.blocked() == 0; }));
  } else {
    // Not answered while its attempt is in flight: that attempt decides.
    faults_.release_hung();
    const auto outcome = waiter->get(2s);
    ASSERT_TRUE(granted(outcome));
    delivered = **outcome.value;
  }
  // What the stalled attempt does afterwards (an orphan is given back on a worker) must not end
  // or replace the grant the client holds.
  const auto replaced = [&] {
    const auto live = store_.read(kKey);
    return !live || live->session_id != a || live->fencing_token != delivered.fencing_token;
  };
  EXPECT_FALSE(wait_until(replaced, 500ms))
      << "the grant delivered to a (token " << delivered.fencing_token
      << ") was superseded or ended by a stalled attempt of an already answered request";
}

// Shutdown (SIGTERM: the pod is being replaced) while a waiter's own attempt is in flight: answered
// 503 at once, its client would ask the other server and could be granted there, and the attempt
// landing afterwards would supersede that grant as a re-entrant acquire (as above). The attempt
// answers it instead, within the drain (the store call's timeout, C2); waiters without an attempt
// in flight are answered 503 at once.
TEST_F(LockServiceTest, ShutdownLeavesAWaiterWhoseAttemptIsInFlightToThatAttempt) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto b = open("b");
  const auto first = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto waiter = queue(a, 10s);
  const auto behind = queue(b, 10s);
  faults_.inject("try_grant", Fault::kStall, 1);
  ASSERT_TRUE(store_.delete_if_owner(GrantRef{kKey, "holder", holder, token_of(first)}));
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  service_->shutdown();  // answers the waiters it answers on this thread
  const auto refused = behind->get(1s);
  EXPECT_EQ(error_code(refused.error), ErrorCode::kUnavailable) << "no attempt in flight for it";
  EXPECT_FALSE(waiter->answered()) << "answered while its own attempt is in flight";
  faults_.release_hung();
  const auto outcome = waiter->get(2s);
  ASSERT_TRUE(granted(outcome)) << "its attempt granted it";
  const auto live = store_.read(kKey);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->session_id, a);
  EXPECT_EQ(live->fencing_token, token_of(outcome)) << "the delivered grant must stay live";
  EXPECT_TRUE(wait_until([&] { return observer_.waiters.load() == 0; }));
}

// The same, but the attempt finds the key held (taken meanwhile through another dlockd): the
// waiter's wait was cut short by the shutdown, so it is answered "unavailable" (503 with
// Retry-After, C3) as the other waiters are, never "held" (409) before its wait_ms.
TEST_F(LockServiceTest, ShutdownDuringAWaitersAttemptThatFindsTheKeyHeldAnswersUnavailable) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto c = open("c");
  const auto first = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto waiter = queue(a, 10s);
  faults_.inject("try_grant", Fault::kStall, 1);
  ASSERT_TRUE(store_.delete_if_owner(GrantRef{kKey, "holder", holder, token_of(first)}));
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  ASSERT_TRUE(store_.try_grant(kKey, "c", c,
                               GrantRequest::exclusive(LockLease(30s))));  // through another dlockd
  service_->shutdown();  // answers the waiters it answers on this thread
  EXPECT_FALSE(waiter->answered()) << "answered while its own attempt is in flight";
  faults_.release_hung();
  const auto outcome = waiter->get(2s);
  EXPECT_FALSE(granted(outcome));
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnavailable)
      << "a wait cut short by the shutdown is not \"held\"";
  EXPECT_TRUE(wait_until([&] { return observer_.waiters.load() == 0; }));
}

// The service has no deadline of its own for a call without wait: it answers when the store call
// returns, relying on C2's rule that every backend call is bounded by the store's call timeout.
TEST_F(LockServiceTest, HangingAcquireWithoutWaitIsAnsweredUnavailableWhenTheCallReturns) {
  const auto a = open("a");
  faults_.inject("try_grant", Fault::kHang, 1);
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
  faults_.inject("try_grant", Fault::kUnknownOutcome, 1);
  const auto outcome = acquire(a, 0ms)->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kUnknownOutcome);
  EXPECT_FALSE(outcome.value) << "never answered held, never a grant";
  // The write did happen: while that grant lives, nobody else is granted the key.
  const auto live = store_.read(kKey);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->session_id, a);
  EXPECT_TRUE(held(acquire(b, 0ms)->get()));
  const auto waiter = queue(b, 150ms);
  advance(150ms);
  EXPECT_TRUE(held(waiter->get())) << "a waiter is not granted over the unknown grant";
  // The client retrying its acquire gets the grant back, with a greater token.
  const auto retried = acquire(a, 0ms)->get();
  ASSERT_TRUE(granted(retried));
  EXPECT_GT(token_of(retried), live->fencing_token);
}

TEST_F(LockServiceTest, UnknownOutcomeOnAHeadAttemptIsRetriedAndTheNextWaiterIsNotGranted) {
  const auto a = open("a");
  const auto b = open("b");
  faults_.inject("try_grant", Fault::kUnknownOutcome, 1);
  const auto head = queue(a, 10s);
  ASSERT_TRUE(advance_until([&] { return head->answered(); }, 20ms, 200ms));
  const auto outcome = head->get();
  // The failed attempt is retried for the same session: re-entrant, so it supersedes the grant
  // of unknown outcome with a greater token rather than leaving it unaccounted for.
  ASSERT_TRUE(granted(outcome));
  EXPECT_EQ(faults_.calls("try_grant"), 2u);
  EXPECT_EQ(token_of(outcome), store_.last_token());
  const auto waiter = queue(b, 150ms);
  advance(150ms);
  EXPECT_TRUE(held(waiter->get()));
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
  // a's grant, if orphaned, lives 200 ms; a's client closes its connection while it waits.
  const auto closed = std::make_shared<core::Cancellation>();
  auto gives_up = std::make_shared<Pending<std::optional<LockHandle>>>();
  service_->acquire(kKey, a, GrantRequest::exclusive(200ms), 10s, gives_up->callback(), closed);
  ASSERT_TRUE(wait_until([&] { return observer_.waiters.load() == 1; }));
  const auto next = queue(b, 10s);
  // The hand-over to `a` stalls; a's connection closes while it is in flight.
  faults_.inject("handover", Fault::kStall, 1);
  Pending<bool> releasing;
  service_->release(kKey, holder, token_of(grant), releasing.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  closed->cancel();
  EXPECT_TRUE(held(gives_up->get()));  // nobody reads it: the connection is closed
  // The stalled hand-over then grants `a` in the store; the service gives that orphan back, and
  // the give-back fails: the orphan must expire by its TTL and `b` be served after it.
  faults_.inject("delete_if_owner", Fault::kUnavailable, 1);
  faults_.release_hung();
  ASSERT_TRUE(releasing.get().value);
  ASSERT_TRUE(wait_until([&] { return faults_.calls("delete_if_owner") == 1; }));
  const auto orphan = store_.read(kKey);
  EXPECT_TRUE(advance_until([&] { return next->answered(); }, 50ms, 1s));
  const auto outcome = next->get();
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
  advance(100ms);
  ASSERT_FALSE(store_.get_session(mortal));
  const auto runs = faults_.calls("reap_expired");
  ASSERT_TRUE(advance_until([&] { return faults_.calls("reap_expired") >= runs + 2; }, 50ms, 1s));
  EXPECT_FALSE(waiter->answered());
  faults_.clear("reap_expired");
  ASSERT_TRUE(advance_until([&] { return waiter->answered(); }, 50ms, 1s));
  const auto outcome = waiter->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kSessionNotFound);
  EXPECT_EQ(observer_.waiters.load(), 0);
  EXPECT_EQ(store_.read(kKey)->session_id, holder);
}

// --- more faults: hand-over hangs, release of unknown outcome, keepalive fails -----------------

// A hand-over is an attempt for the head like its own (C3): its wait_ms running out meanwhile
// does not answer it "held" while the backend may still grant it, or a third client would find
// the key held by a session nobody was told of (the linearizability checker found exactly that:
// tests/linearizability). The hand-over's outcome answers it, here its failure.
TEST_F(LockServiceTest, HangingHandOverAnswersTheWaiterWithItsOutcomeAndTheReleaseUnavailable) {
  const auto holder = open("holder");
  const auto a = open("a");
  const auto grant = acquire(holder, 0ms)->get();
  ASSERT_TRUE(granted(grant));
  const auto waiter = queue(a, 200ms);
  faults_.inject("handover", Fault::kHang, 1);
  Pending<bool> releasing;
  service_->release(kKey, holder, token_of(grant), releasing.callback());
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  // The hand-over has neither decided nor failed yet: no answer at wait_ms (200 ms).
  advance(200ms);
  EXPECT_FALSE(waiter->answered()) << "answered before the hand-over to it decided";
  EXPECT_FALSE(releasing.answered()) << "the release waits for its store call";
  faults_.release_hung();  // the call overran the store's timeout: it failed
  EXPECT_EQ(error_code(releasing.get().error), ErrorCode::kUnavailable);
  EXPECT_EQ(error_code(waiter->get(2s).error), ErrorCode::kUnavailable) << "never held";
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

}  // namespace
}  // namespace dlock::testing
