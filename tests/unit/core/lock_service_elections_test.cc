// Unit tests of core::LockService for elections (ADR-0020 "Leader election"): a campaign waits in
// the name's queue and is granted with its value (never by a handover, which would drop it),
// proclaim keeps the token, and the observer (core::Observation) — answered at once when the
// state is already newer, woken by the store's notifications and reading once per wake-up (no
// polling), answered with the state at its deadline, ended by its connection and by shutdown.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "lock_service_fixture.h"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using PendingInfo = Pending<std::optional<LockInfo>>;

class LockServiceElectionsTest : public LockServiceTest {
 protected:
  core::ServiceOptions options() const override {
    auto options = LockServiceTest::options();
    options.max_waiters = 3;  // ObserversCountAgainstTheWaiterCap
    return options;
  }

  std::shared_ptr<Pending<std::optional<LockHandle>>> campaign(const std::string& session,
                                                               const std::string& value,
                                                               milliseconds wait) {
    auto pending = std::make_shared<Pending<std::optional<LockHandle>>>();
    service_->acquire(kKey, session, GrantRequest::leader(value, LockLease::session()), wait,
                      pending->callback(), nullptr);
    return pending;
  }

  // An observer of kKey that wants a leader newer than (token, value).
  std::shared_ptr<PendingInfo> observe(FencingToken token, const std::string& value,
                                       milliseconds wait,
                                       core::CancellationPtr cancellation = nullptr) {
    auto pending = std::make_shared<PendingInfo>();
    service_->observe(
        kKey,
        [token, value](const std::optional<LockInfo>& info) {
          return info && info->value &&
                 (info->fencing_token > token ||
                  (info->fencing_token == token && *info->value != value));
        },
        wait, pending->callback(), std::move(cancellation));
    return pending;
  }

  static std::optional<std::string> value_of(const core::Outcome<std::optional<LockInfo>>& out) {
    if (out.error || !out.value || !out.value->has_value()) return std::nullopt;
    return (*out.value)->value;
  }
};

TEST_F(LockServiceElectionsTest, AWaitingCampaignerIsGrantedWithItsValueNotHandedOver) {
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  EXPECT_TRUE((*first.value)->session_bound);
  const auto before = observer_.waiters.load();
  const auto waiting = campaign(bob, "b", 10s);
  ASSERT_TRUE(wait_until([&] { return observer_.waiters.load() == before + 1; }));
  ASSERT_TRUE(*release(alice, token_of(first)).value);
  const auto second = waiting->get();
  ASSERT_TRUE(granted(second));
  EXPECT_GT(token_of(second), token_of(first));
  const auto info = store_.read(kKey);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->value, std::optional<std::string>("b")) << "the new leader lost its value";
  EXPECT_EQ(faults_.calls("handover"), 0u) << "a campaigner was handed a value-less grant";
}

TEST_F(LockServiceElectionsTest, ProclaimKeepsTheTokenAndAStaleTokenIsLost) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  Pending<LockInfo> proclaimed;
  service_->proclaim(kKey, alice, token_of(first), "a2", proclaimed.callback());
  const auto answer = proclaimed.get();
  ASSERT_FALSE(answer.error);
  EXPECT_EQ(answer.value->fencing_token, token_of(first));
  EXPECT_EQ(answer.value->value, std::optional<std::string>("a2"));
  Pending<LockInfo> stale;
  service_->proclaim(kKey, alice, token_of(first) + 1, "x", stale.callback());
  EXPECT_EQ(error_code(stale.get().error), ErrorCode::kLockLost);
}

TEST_F(LockServiceElectionsTest, AnObserverIsAnsweredAtOnceWhenTheStateIsAlreadyNewer) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  EXPECT_EQ(value_of(observe(0, "", 10s)->get(500ms)), "a");
  EXPECT_EQ(value_of(observe(token_of(first), "old", 10s)->get(500ms)), "a");
}

TEST_F(LockServiceElectionsTest, AnObserverWakesOnAProclaimAndReadsOncePerWakeUp) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto reads_before = faults_.calls("read");
  const auto pending = observe(token_of(first), "a", 10s);
  EXPECT_FALSE(pending->answered(200ms));
  // Waiting costs no polling: the first read only.
  EXPECT_EQ(faults_.calls("read"), reads_before + 1) << "the observer polled the store";
  Pending<LockInfo> proclaimed;
  service_->proclaim(kKey, alice, token_of(first), "b", proclaimed.callback());
  ASSERT_FALSE(proclaimed.get().error);
  EXPECT_EQ(value_of(pending->get(1s)), "b");
}

TEST_F(LockServiceElectionsTest, AReleaseAloneDoesNotAnswerButTheNextLeaderDoes) {
  const auto alice = open("alice");
  const auto bob = open("bob");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto pending = observe(token_of(first), "a", 10s);
  ASSERT_TRUE(*release(alice, token_of(first)).value);
  EXPECT_FALSE(pending->answered(200ms)) << "answered with no newer leader";
  const auto second = campaign(bob, "b", 0ms)->get();
  ASSERT_TRUE(granted(second));
  const auto seen = pending->get(1s);
  ASSERT_TRUE(seen.value && seen.value->has_value());
  EXPECT_EQ((*seen.value)->fencing_token, token_of(second));
}

TEST_F(LockServiceElectionsTest, AtItsDeadlineAnObserverAnswersTheStateThen) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto reads = faults_.calls("read");
  const auto pending = observe(token_of(first), "a", 300ms);
  ASSERT_TRUE(wait_until([&] { return faults_.calls("read") == reads + 1; }));
  advance(299ms);
  EXPECT_FALSE(pending->answered()) << "answered before its deadline";
  advance(1ms);
  EXPECT_EQ(value_of(pending->get()), "a");
  // With no leader at all: answered empty (the server's 404 no_leader).
  ASSERT_TRUE(*release(alice, token_of(first)).value);
  const auto empty = observe(token_of(first), "a", 100ms);
  advance(100ms);
  const auto none = empty->get();
  ASSERT_FALSE(none.error);
  EXPECT_FALSE(none.value->has_value());
}

// On real time: the point is which thread runs the deadline's timer in dlockd (the io_context's).
class LockServiceElectionsRealTimeTest : public LockServiceElectionsTest {
 protected:
  bool real_time() const override { return true; }
};

// The deadline answer comes on time even while every worker is blocked in a store call.
TEST_F(LockServiceElectionsRealTimeTest, TheDeadlineAnswerDoesNotWaitForABlockedStore) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto pending = observe(token_of(first), "a", 300ms);
  EXPECT_FALSE(pending->answered(100ms));
  faults_.inject("read", Fault::kHang);
  for (int i = 0; i < 4; ++i) {  // four workers, all blocked in a read
    service_->read(kKey, [](auto) {});
  }
  ASSERT_TRUE(faults_.wait_for_blocked(4, 2s));
  EXPECT_EQ(value_of(pending->get(1s)), "a");
}

TEST_F(LockServiceElectionsTest, AClosedConnectionEndsTheObserver) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  auto cancellation = std::make_shared<core::Cancellation>();
  const auto reads = faults_.calls("read");
  const auto pending = observe(token_of(first), "a", 10s, cancellation);
  ASSERT_TRUE(wait_until([&] { return faults_.calls("read") == reads + 1; }));
  EXPECT_FALSE(pending->answered());
  cancellation->cancel();
  EXPECT_EQ(error_code(pending->get(500ms).error), ErrorCode::kUnavailable);
}

TEST_F(LockServiceElectionsTest, ShutdownAnswersObservers) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto reads = faults_.calls("read");
  const auto pending = observe(token_of(first), "a", 10s);
  ASSERT_TRUE(wait_until([&] { return faults_.calls("read") == reads + 1; }));
  EXPECT_FALSE(pending->answered());
  service_->shutdown();
  EXPECT_EQ(error_code(pending->get(500ms).error), ErrorCode::kUnavailable);
}

TEST_F(LockServiceElectionsTest, ObserversCountAgainstTheWaiterCap) {
  const auto alice = open("alice");
  const auto first = campaign(alice, "a", 0ms)->get();
  ASSERT_TRUE(granted(first));
  std::vector<std::shared_ptr<PendingInfo>> observers;
  for (std::size_t i = 0; i < 3; ++i) observers.push_back(observe(token_of(first), "a", 10s));
  EXPECT_EQ(error_code(observe(token_of(first), "a", 10s)->get(500ms).error),
            ErrorCode::kResourceExhausted);
  for (const auto& observer : observers) EXPECT_FALSE(observer->answered());
}

}  // namespace
}  // namespace dlock::testing
