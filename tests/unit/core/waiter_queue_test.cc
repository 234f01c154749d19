// Unit tests of core::WaiterQueue (ADR-0007): the per-key queue's decisions, without a store,
// threads or timers — first come first served, one attempt at a time, a head taken out before
// its grant is delivered, answers at wait_ms, ended sessions.

#include "core/waiter_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "dlock/errors.h"

namespace dlock::core {
namespace {

WaiterPtr waiter(const std::string& session_id) {
  auto made = std::make_shared<Waiter>();
  made->session_id = session_id;
  made->owner_id = "owner-" + session_id;
  return made;
}

std::exception_ptr unavailable() {
  return std::make_exception_ptr(UnavailableError("backend down"));
}

TEST(WaiterQueue, OnlyTheFirstWaiterIsTheHeadAndAttemptsAreForTheHeadInArrivalOrder) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  EXPECT_TRUE(queue.push(a));
  EXPECT_FALSE(queue.push(b)) << "a later arrival waits its turn";
  EXPECT_EQ(queue.begin_attempt(), a);
  const auto after = queue.end_attempt(a, Attempt::kGranted, nullptr);
  EXPECT_TRUE(after.deliver);
  EXPECT_TRUE(after.waiting);
  EXPECT_TRUE(a->finished);
  EXPECT_EQ(queue.begin_attempt(), b) << "the next in arrival order";
}

TEST(WaiterQueue, OneAttemptAtATimeAndAWakeUpDuringItAsksForAnother) {
  WaiterQueue queue;
  const auto a = waiter("a");
  queue.push(a);
  ASSERT_EQ(queue.begin_attempt(), a);
  EXPECT_EQ(queue.begin_attempt(), nullptr) << "an attempt is in flight";
  EXPECT_EQ(queue.begin_handover(), nullptr) << "a release does not hand over meanwhile";
  EXPECT_FALSE(queue.idle());
  const auto after = queue.end_attempt(a, Attempt::kHeld, nullptr);
  EXPECT_FALSE(after.deliver) << "held: the head keeps its place";
  EXPECT_TRUE(after.again);
  EXPECT_TRUE(after.waiting);
  EXPECT_FALSE(a->finished);
  ASSERT_EQ(queue.begin_attempt(), a);
  EXPECT_FALSE(queue.end_attempt(a, Attempt::kHeld, nullptr).again) << "asked for once";
}

TEST(WaiterQueue, AHeadCancelledDuringItsAttemptIsNotDeliveredItsGrant) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  queue.push(a);
  queue.push(b);
  ASSERT_EQ(queue.begin_attempt(), a);
  ASSERT_TRUE(queue.cancel(a)) << "a's client goes while its attempt is in flight";
  const auto after = queue.end_attempt(a, Attempt::kGranted, nullptr);
  EXPECT_FALSE(after.deliver) << "its grant is an orphan, to be given back";
  EXPECT_FALSE(after.expired);
  EXPECT_EQ(queue.begin_attempt(), b);
}

// ADR-0007 "Deadlines": wait_ms ending during the head's own attempt leaves the answer to that
// attempt, whatever it decides.
TEST(WaiterQueue, AHeadWhoseWaitEndsDuringItsAttemptIsAnsweredByThatAttempt) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  const auto c = waiter("c");
  for (const auto& w : {a, b, c}) queue.push(w);
  ASSERT_EQ(queue.begin_attempt(), a);
  EXPECT_FALSE(queue.give_up(a)) << "answered now, while its attempt is in flight";
  EXPECT_FALSE(a->finished);
  auto after = queue.end_attempt(a, Attempt::kGranted, nullptr);
  EXPECT_TRUE(after.deliver) << "the grant is delivered, not given back";
  EXPECT_FALSE(after.expired);

  ASSERT_EQ(queue.begin_attempt(), b);
  EXPECT_FALSE(queue.give_up(b));
  after = queue.end_attempt(b, Attempt::kHeld, nullptr);
  EXPECT_FALSE(after.deliver);
  EXPECT_TRUE(after.expired) << "held: answered now, out of the queue";
  EXPECT_EQ(after.failure, nullptr);
  EXPECT_TRUE(b->finished);

  ASSERT_EQ(queue.begin_attempt(), c);
  EXPECT_FALSE(queue.give_up(c));
  const auto failure = unavailable();
  after = queue.end_attempt(c, Attempt::kFailed, failure);
  EXPECT_TRUE(after.expired) << "failed: answered with the failure, never held";
  EXPECT_EQ(after.failure, failure);
  EXPECT_TRUE(queue.idle());
}

// A hand-over the releaser could not make (a shared holder's release) decided nothing for the
// head: a head whose wait_ms ended meanwhile is answered by the next attempt, not "held" now
// (the key may be free by then).
TEST(WaiterQueue, AnUndecidedHandOverLeavesAnExpiredHeadToTheNextAttempt) {
  WaiterQueue queue;
  const auto a = waiter("a");
  queue.push(a);
  ASSERT_EQ(queue.begin_handover(), a);
  EXPECT_FALSE(queue.give_up(a).has_value());
  const auto undecided = queue.end_attempt(a, Attempt::kUndecided, nullptr);
  EXPECT_FALSE(undecided.deliver);
  EXPECT_FALSE(undecided.expired);
  EXPECT_FALSE(a->finished);
  ASSERT_EQ(queue.begin_attempt(), a);
  EXPECT_TRUE(queue.end_attempt(a, Attempt::kGranted, nullptr).deliver);
  EXPECT_TRUE(queue.idle());
}

// A head that leaves during a hand-over to it (its connection closed) is answered at once; the
// hand-over's grant is then not delivered (the service gives it back).
TEST(WaiterQueue, AHeadCancelledDuringAHandOverIsAnsweredAtOnce) {
  WaiterQueue queue;
  const auto a = waiter("a");
  queue.push(a);
  ASSERT_EQ(queue.begin_handover(), a);
  ASSERT_TRUE(queue.cancel(a));
  EXPECT_FALSE(queue.end_attempt(a, Attempt::kGranted, nullptr).deliver);
}

TEST(WaiterQueue, AFailedAttemptKeepsTheHeadAndAWaiterGivingUpIsAnsweredWithTheFailure) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  queue.push(a);
  queue.push(b);
  ASSERT_EQ(queue.begin_attempt(), a);
  const auto failure = unavailable();
  const auto after = queue.end_attempt(a, Attempt::kFailed, failure);
  EXPECT_FALSE(after.deliver);
  EXPECT_FALSE(a->finished) << "no decision: the head keeps its place";
  // No backend decision was made: the answer at wait_ms is that failure, never "held".
  const auto answer = queue.give_up(b);
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, failure);
  EXPECT_FALSE(queue.give_up(b)) << "a waiter is answered once";
  // An attempt that decides clears the failure: the next waiter giving up is "held".
  ASSERT_EQ(queue.begin_attempt(), a);
  queue.end_attempt(a, Attempt::kHeld, nullptr);
  const auto held = queue.give_up(a);
  ASSERT_TRUE(held);
  EXPECT_EQ(*held, nullptr);
  EXPECT_TRUE(queue.idle());
}

TEST(WaiterQueue, ARefusedHeadIsTakenOutAndAnswered) {
  WaiterQueue queue;
  const auto a = waiter("a");
  queue.push(a);
  ASSERT_EQ(queue.begin_handover(), a);
  const auto after = queue.end_attempt(a, Attempt::kRefused, nullptr);
  EXPECT_TRUE(after.deliver);
  EXPECT_FALSE(after.waiting);
  EXPECT_TRUE(queue.idle());
}

TEST(WaiterQueue, EndedSessionsWaitersAreTakenOutIncludingAHeadInFlight) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  const auto a2 = waiter("a");
  const auto c = waiter("c");
  for (const auto& w : {a, b, a2, c}) queue.push(w);
  ASSERT_EQ(queue.begin_attempt(), a);
  const auto taken = queue.take_sessions({"a"});
  ASSERT_EQ(taken.size(), 2U);
  EXPECT_EQ(taken[0], a);
  EXPECT_EQ(taken[1], a2);
  EXPECT_EQ(queue.waiting_sessions(), (std::vector<std::string>{"b", "c"}));
  // The head's attempt then finds it answered.
  EXPECT_FALSE(queue.end_attempt(a, Attempt::kGranted, nullptr).deliver);
  EXPECT_EQ(queue.begin_attempt(), b);
}

TEST(WaiterQueue, TakeAllAnswersEveryPendingWaiterOnce) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  queue.push(a);
  queue.push(b);
  EXPECT_EQ(queue.take_all().size(), 2U);
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.take(a));
  EXPECT_TRUE(queue.take_all().empty());
}

// Shutdown during the head's own acquire attempt: as at its wait_ms, the attempt answers it.
TEST(WaiterQueue, TakeAllLeavesTheHeadToItsAttemptInFlight) {
  for (const auto attempt : {Attempt::kGranted, Attempt::kHeld, Attempt::kFailed}) {
    WaiterQueue queue;
    const auto a = waiter("a");
    const auto b = waiter("b");
    queue.push(a);
    queue.push(b);
    ASSERT_EQ(queue.begin_attempt(), a);
    const auto taken = queue.take_all();
    ASSERT_EQ(taken.size(), 1U);
    EXPECT_EQ(taken[0], b);
    EXPECT_FALSE(a->finished) << "answered while its own attempt is in flight";
    const auto failure =
        attempt == Attempt::kFailed ? std::make_exception_ptr(ContentionError("busy")) : nullptr;
    const auto after = queue.end_attempt(a, attempt, failure);
    EXPECT_TRUE(after.deliver || after.expired) << "the attempt must answer it";
    EXPECT_EQ(after.deliver, attempt == Attempt::kGranted);
    if (attempt == Attempt::kHeld) {
      // Not "held" (the wait was cut short by the shutdown): "unavailable", as for the others.
      ASSERT_TRUE(after.failure);
      EXPECT_THROW(std::rethrow_exception(after.failure), UnavailableError);
    }
    if (attempt == Attempt::kFailed) {
      EXPECT_EQ(after.failure, failure);
    }
    EXPECT_FALSE(after.waiting);
    EXPECT_TRUE(queue.idle());
  }
}

// A hand-over is an attempt for the head like its own: a shutdown leaves the head's answer to it
// (a grant delivered, a failure answered), as it does at the head's wait_ms (give_up).
TEST(WaiterQueue, TakeAllLeavesTheHeadOfAHandOverToItsOutcome) {
  for (const auto attempt : {Attempt::kGranted, Attempt::kFailed}) {
    WaiterQueue queue;
    const auto a = waiter("a");
    queue.push(a);
    ASSERT_EQ(queue.begin_handover(), a);
    EXPECT_TRUE(queue.take_all().empty());
    const auto failure = std::make_exception_ptr(UnavailableError("hand-over failed"));
    const auto after =
        queue.end_attempt(a, attempt, attempt == Attempt::kFailed ? failure : nullptr);
    EXPECT_EQ(after.deliver, attempt == Attempt::kGranted);
    EXPECT_EQ(after.expired, attempt == Attempt::kFailed);
    EXPECT_TRUE(queue.idle());
  }
  // Its wait_ms during the hand-over: not answered then (give_up), but by the hand-over.
  WaiterQueue queue;
  const auto a = waiter("a");
  queue.push(a);
  ASSERT_EQ(queue.begin_handover(), a);
  EXPECT_FALSE(queue.give_up(a).has_value());
  EXPECT_TRUE(queue.end_attempt(a, Attempt::kGranted, nullptr).deliver);
}

// The holder's own session, queued before the queue knew it held the key, moves up (ADR-0036):
// behind an attempt in flight, once, and only for an exclusive request.
TEST(WaiterQueue, PromoteMovesTheHoldersExclusiveWaiterUpOnceBehindAnAttemptInFlight) {
  WaiterQueue queue;
  const auto a = waiter("a");
  const auto b = waiter("b");
  const auto shared = waiter("s");
  shared->request = GrantRequest::shared(std::chrono::seconds(1));
  const auto c = waiter("c");
  queue.push(a);
  queue.push(b);
  queue.push(shared);
  queue.push(c);
  EXPECT_FALSE(queue.promote("s")) << "a shared request is the store's to refuse";
  EXPECT_EQ(queue.begin_attempt(), a);
  EXPECT_TRUE(queue.promote("c"));
  EXPECT_FALSE(queue.promote("c")) << "promoted once";
  EXPECT_FALSE(queue.promote("nobody"));
  queue.end_attempt(a, Attempt::kHeld, nullptr);
  EXPECT_EQ(queue.begin_attempt(), a) << "the head in flight kept its place";
  queue.end_attempt(a, Attempt::kGranted, nullptr);
  EXPECT_EQ(queue.begin_attempt(), c) << "then the holder's own waiter, before b";
  queue.end_attempt(c, Attempt::kGranted, nullptr);
  EXPECT_EQ(queue.begin_attempt(), b);
}

}  // namespace
}  // namespace dlock::core
