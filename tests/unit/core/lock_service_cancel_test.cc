// Unit tests of a waiting acquire tied to its client's connection (ADR-0007 "A wait belongs to
// its connection"; core/cancellation.h): a cancelled waiter leaves its queue at once, frees its
// place under max_waiters, is never granted, and the next waiter moves up; a grant whose answer
// was not delivered is given back and handed to the next waiter. Over the fake store
// (lock_service_fixture.h); the HTTP side is tests/integration/waits_test.cc.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lock_service_fixture.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using PendingAcquire = std::shared_ptr<Pending<std::optional<LockHandle>>>;

// --- the cancellation on its own ------------------------------------------------------------

TEST(CancellationTest, RunsTheArmedActionOnceAndArmsAfterACancelRunAtOnce) {
  int watched = 0;
  int first = 0;
  int second = 0;
  core::Cancellation cancellation([&] { ++watched; });
  cancellation.arm([&] { ++first; });
  EXPECT_EQ(watched, 0) << "arm() does not ask for the connection to be watched";
  cancellation.arm_watched([&] { ++first; });
  cancellation.arm_watched([&] { ++first; });
  EXPECT_EQ(watched, 1) << "the watch is asked for once";
  cancellation.cancel();
  cancellation.cancel();
  EXPECT_EQ(first, 1);
  EXPECT_TRUE(cancellation.cancelled());
  cancellation.arm([&] { ++second; });
  EXPECT_EQ(second, 1) << "armed after the cancel: runs at once";
}

TEST(CancellationTest, NothingRunsAfterSettle) {
  int ran = 0;
  core::Cancellation cancellation;
  cancellation.arm([&] { ++ran; });
  cancellation.settle();
  cancellation.cancel();
  cancellation.arm([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(cancellation.cancelled());
}

// --- the service ----------------------------------------------------------------------------

class LockServiceCancelTest : public LockServiceTest {
 protected:
  core::ServiceOptions options() const override {
    auto options = LockServiceTest::options();
    options.max_waiters = 2;
    return options;
  }

  PendingAcquire acquire_tied(const std::string& session, milliseconds wait,
                              const core::CancellationPtr& cancellation) {
    auto pending = std::make_shared<Pending<std::optional<LockHandle>>>();
    service_->acquire(kKey, session, GrantRequest::exclusive(kLongTtl), wait, pending->callback(),
                      cancellation);
    return pending;
  }

  // Acquires with a long wait, tied to `cancellation`; returns once queued.
  PendingAcquire queue_tied(const std::string& session, const core::CancellationPtr& cancellation) {
    const auto before = observer_.waiters.load();
    auto pending = acquire_tied(session, 30s, cancellation);
    EXPECT_TRUE(wait_until([&] { return observer_.waiters.load() == before + 1; }))
        << "the acquire was not queued";
    return pending;
  }

  LockHandle hold(const std::string& session) {
    const auto outcome = acquire(session, 0ms)->get();
    EXPECT_TRUE(granted(outcome));
    return outcome.value && *outcome.value ? **outcome.value : LockHandle{};
  }
};

TEST_F(LockServiceCancelTest, CancelledWaiterLeavesAtOnceAndIsNeverGranted) {
  const auto holder = open("holder");
  const auto grant = hold(holder);
  std::atomic<int> watched{0};
  const auto cancellation = std::make_shared<core::Cancellation>([&] { ++watched; });
  const auto waiter = queue_tied(open("waiter"), cancellation);
  EXPECT_EQ(watched.load(), 1) << "a queued waiter asks for its connection to be watched";
  cancellation->cancel();
  const auto outcome = waiter->get(1s);  // far before its 30 s wait
  EXPECT_TRUE(held(outcome)) << "answered as at its deadline";
  EXPECT_EQ(observer_.waiters.load(), 0) << "the waiters gauge drops at once";
  ASSERT_TRUE(release(holder, grant.fencing_token).value);
  EXPECT_EQ(faults_.calls("handover"), 0u) << "the cancelled waiter is never granted";
  EXPECT_FALSE(store_.read(kKey)) << "the release freed the key";
}

TEST_F(LockServiceCancelTest, CancelFreesTheWaitersPlaceUnderMaxWaiters) {
  const auto holder = open("holder");
  const auto grant = hold(holder);
  const auto first = std::make_shared<core::Cancellation>();
  const auto b = queue_tied(open("b"), first);
  const auto c = queue(open("c"), 30s);
  const auto refused = acquire(open("d"), 30s)->get();
  EXPECT_EQ(error_code(refused.error), ErrorCode::kResourceExhausted) << "max_waiters is 2";
  first->cancel();
  ASSERT_TRUE(b->answered(1s));
  const auto e = queue(open("e"), 30s);  // fails inside queue() if refused
  EXPECT_FALSE(e->answered());
  EXPECT_EQ(observer_.waiters.load(), 2);
  ASSERT_TRUE(release(holder, grant.fencing_token).value);
  EXPECT_TRUE(granted(c->get()));
}

TEST_F(LockServiceCancelTest, NextWaiterBecomesHeadAndIsHandedTheLock) {
  const auto holder = open("holder");
  const auto grant = hold(holder);
  const auto cancellation = std::make_shared<core::Cancellation>();
  const auto b = queue_tied(open("b"), cancellation);
  const auto c_session = open("c");
  const auto c = queue(c_session, 30s);
  cancellation->cancel();
  ASSERT_TRUE(held(b->get(1s)));
  ASSERT_TRUE(release(holder, grant.fencing_token).value);
  const auto outcome = c->get(1s);
  ASSERT_TRUE(granted(outcome)) << "the waiter behind the cancelled head is handed the lock";
  EXPECT_EQ((*outcome.value)->session_id, c_session);
  EXPECT_EQ(faults_.calls("handover"), 1u);
}

TEST_F(LockServiceCancelTest, CancelWhileTheHeadsAttemptIsInFlightGivesTheGrantBack) {
  const auto cancellation = std::make_shared<core::Cancellation>();
  faults_.inject("try_grant", Fault::kStall, 1);
  const auto b = acquire_tied(open("b"), 30s, cancellation);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  cancellation->cancel();
  EXPECT_TRUE(held(b->get(1s))) << "answered at once, while its attempt is still in flight";
  EXPECT_EQ(observer_.waiters.load(), 0);
  faults_.release_hung();  // the stalled try_grant now grants: an orphan
  EXPECT_TRUE(wait_until([&] { return faults_.calls("delete_if_owner") == 1; }));
  EXPECT_TRUE(wait_until([&] { return !store_.read(kKey); })) << "the orphan grant is given back";
}

TEST_F(LockServiceCancelTest, UndeliveredGrantIsHandedToTheNextWaiterAtOnce) {
  const auto cancellation = std::make_shared<core::Cancellation>();
  const auto a = acquire_tied(open("a"), 0ms, cancellation)->get();
  ASSERT_TRUE(granted(a));
  const auto c_session = open("c");
  const auto c = queue(c_session, 30s);
  cancellation->cancel();           // the server could not write a's answer
  const auto outcome = c->get(1s);  // not at a's 30 s TTL
  ASSERT_TRUE(granted(outcome));
  EXPECT_EQ((*outcome.value)->session_id, c_session);
  EXPECT_GT(token_of(outcome), token_of(a));
}

TEST_F(LockServiceCancelTest, WaitersGrantThatWasNotDeliveredIsGivenBack) {
  const auto holder = open("holder");
  const auto grant = hold(holder);
  const auto cancellation = std::make_shared<core::Cancellation>();
  const auto b = queue_tied(open("b"), cancellation);
  ASSERT_TRUE(release(holder, grant.fencing_token).value);
  ASSERT_TRUE(granted(b->get(1s)));
  cancellation->cancel();  // its connection closed between the grant and the write
  EXPECT_TRUE(wait_until([&] { return !store_.read(kKey); }, 1s)) << "not held until its TTL";
}

TEST_F(LockServiceCancelTest, DeliveredGrantIsKept) {
  const auto cancellation = std::make_shared<core::Cancellation>();
  ASSERT_TRUE(granted(acquire_tied(open("a"), 0ms, cancellation)->get()));
  cancellation->settle();  // the answer was written
  cancellation->cancel();
  EXPECT_FALSE(wait_until([&] { return !store_.read(kKey); }, 100ms));
  EXPECT_EQ(faults_.calls("delete_if_owner"), 0u);
}

// --- a reload of the tokens file: waiters rechecked (LockService::recheck_waiters, C6) ---------

// Refuses the waiters whose owner starts with "bob".
core::LockService::WaiterCheck refuse_bob() {
  return [](std::string_view owner, std::string_view) -> std::exception_ptr {
    if (!owner.starts_with("bob")) return nullptr;
    return std::make_exception_ptr(UnauthenticatedError("bob was removed"));
  };
}

std::vector<std::string> recheck(core::LockService& service, core::LockService::WaiterCheck check) {
  Pending<std::vector<std::string>> pending;
  service.recheck_waiters(std::move(check), pending.callback());
  const auto outcome = pending.get();
  return outcome.value.value_or(std::vector<std::string>{});
}

TEST_F(LockServiceCancelTest, RecheckAnswersTheRefusedWaitersAtOnceAndTheNextMovesUp) {
  const auto holder = open("holder");
  const auto grant = hold(holder);
  const auto bob = queue(open("bob x"), 30s);
  const auto carol_session = open("carol x");
  const auto carol = queue(carol_session, 30s);
  EXPECT_EQ(recheck(*service_, refuse_bob()), std::vector<std::string>{"bob x"});
  const auto refused = bob->get(1s);  // far before its 30 s wait
  EXPECT_EQ(error_code(refused.error), ErrorCode::kUnauthenticated);
  EXPECT_EQ(observer_.waiters.load(), 1);
  EXPECT_FALSE(carol->answered());
  ASSERT_TRUE(release(holder, grant.fencing_token).value);
  const auto outcome = carol->get(1s);
  ASSERT_TRUE(granted(outcome)) << "the waiter behind the refused head is handed the lock";
  EXPECT_EQ((*outcome.value)->session_id, carol_session);
}

TEST_F(LockServiceCancelTest, AfterARecheckEveryNewWaiterIsCheckedAsItQueues) {
  const auto grant = hold(open("holder"));
  EXPECT_TRUE(recheck(*service_, refuse_bob()).empty());
  const auto refused = acquire(open("bob x"), 30s)->get(1s);
  EXPECT_EQ(error_code(refused.error), ErrorCode::kUnauthenticated);
  EXPECT_EQ(observer_.waiters.load(), 0) << "never queued";
  const auto carol = queue(open("carol x"), 30s);
  EXPECT_FALSE(carol->answered());
}

TEST_F(LockServiceCancelTest, RecheckDuringTheRefusedHeadsAttemptGivesItsGrantBack) {
  faults_.inject("try_grant", Fault::kStall, 1);
  const auto bob = acquire(open("bob x"), 30s);
  ASSERT_TRUE(faults_.wait_for_blocked(1, 2s));
  Pending<std::vector<std::string>> rechecked;
  service_->recheck_waiters(refuse_bob(), rechecked.callback());
  EXPECT_EQ(error_code(bob->get(1s).error), ErrorCode::kUnauthenticated)
      << "answered at once, while its attempt is still in flight";
  faults_.release_hung();  // the stalled try_grant now grants: an orphan
  EXPECT_TRUE(wait_until([&] { return faults_.calls("delete_if_owner") == 1; }));
  EXPECT_TRUE(wait_until([&] { return !store_.read(kKey); })) << "the orphan grant is given back";
  EXPECT_TRUE(rechecked.answered(1s));
}

}  // namespace
}  // namespace dlock::testing
