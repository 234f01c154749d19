// Unit tests of core::LockService with shared holders and permits (ADR-0020): one first come,
// first served queue per key across modes — a queued writer is not overtaken by later readers —,
// shared waiters granted together, a reader's release with a queued writer, and a semaphore's
// limit conflict answered rather than retried.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "lock_service_fixture.h"
#include "support/grant_asks.h"

using dlock::testing::Ask;
using dlock::testing::exclusive_ask;
using dlock::testing::permit_ask;
using dlock::testing::shared_ask;

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using PendingGrant = std::shared_ptr<Pending<std::optional<LockHandle>>>;

const Ask kExclusive = exclusive_ask();
const Ask kShared = shared_ask();

class LockServiceModesTest : public LockServiceTest {
 protected:
  PendingGrant acquire_as(const std::string& session, const Ask& request, milliseconds wait) {
    auto pending = std::make_shared<Pending<std::optional<LockHandle>>>();
    service_->acquire(kKey, session, request(kLongTtl), wait, pending->callback(), nullptr);
    return pending;
  }

  // Acquires with a wait and returns once the service has queued the request.
  PendingGrant queue_as(const std::string& session, const Ask& request) {
    const auto before = observer_.waiters.load();
    auto pending = acquire_as(session, request, 10s);
    EXPECT_TRUE(wait_until([&] { return observer_.waiters.load() == before + 1; }))
        << "the acquire was not queued";
    return pending;
  }
};

TEST_F(LockServiceModesTest, QueuedWriterIsNotOvertakenByLaterReaders) {
  const auto reader = open("reader");
  const auto writer = open("writer");
  const auto late = open("late-reader");
  const auto first = acquire_as(reader, kShared, 0ms)->get();
  ASSERT_TRUE(granted(first));
  const auto waiting_writer = queue_as(writer, kExclusive);
  // Another reader could hold beside the first, but a writer is queued: it waits its turn.
  EXPECT_TRUE(held(acquire_as(late, kShared, 0ms)->get()));
  const auto waiting_reader = queue_as(late, kShared);
  EXPECT_FALSE(waiting_reader->answered(100ms)) << "a later reader overtook a queued writer";
  // The first reader's release is a plain release (not lock_lost), and the writer is next.
  const auto released = release(reader, token_of(first));
  ASSERT_TRUE(released.value && *released.value) << "a reader's release failed";
  const auto written = waiting_writer->get();
  ASSERT_TRUE(granted(written));
  EXPECT_EQ((*written.value)->mode, HoldMode::kExclusive);
  EXPECT_GT(token_of(written), token_of(first)) << "a writer's token follows the readers'";
  EXPECT_FALSE(waiting_reader->answered(50ms));
  ASSERT_TRUE(*release(writer, token_of(written)).value);
  const auto read = waiting_reader->get();
  ASSERT_TRUE(granted(read));
  EXPECT_GT(token_of(read), token_of(written));
}

TEST_F(LockServiceModesTest, SharedWaitersAreGrantedTogether) {
  const auto writer = open("writer");
  const auto a = open("a");
  const auto b = open("b");
  const auto held_by_writer = acquire_as(writer, kExclusive, 0ms)->get();
  ASSERT_TRUE(granted(held_by_writer));
  const auto reader_a = queue_as(a, kShared);
  const auto reader_b = queue_as(b, kShared);
  ASSERT_TRUE(*release(writer, token_of(held_by_writer)).value);
  // Both readers hold at once: the second does not wait for the first to finish.
  const auto granted_a = reader_a->get();
  const auto granted_b = reader_b->get();
  ASSERT_TRUE(granted(granted_a));
  ASSERT_TRUE(granted(granted_b));
  EXPECT_EQ(store_.read_holders(kKey).size(), 2u);
}

TEST_F(LockServiceModesTest, PermitWaiterIsGrantedWhenAPermitFrees) {
  const auto a = open("a");
  const auto b = open("b");
  const auto c = open("c");
  const Ask two = permit_ask(2);
  const auto first = acquire_as(a, two, 0ms)->get();
  ASSERT_TRUE(granted(first));
  ASSERT_TRUE(granted(acquire_as(b, two, 0ms)->get()));
  const auto waiting = queue_as(c, two);
  EXPECT_FALSE(waiting->answered(50ms));
  ASSERT_TRUE(*release(a, token_of(first)).value);
  const auto third = waiting->get();
  ASSERT_TRUE(granted(third));
  EXPECT_EQ((*third.value)->mode, HoldMode::kPermit);
}

TEST_F(LockServiceModesTest, ConflictingLimitIsAnsweredAtOnceNotRetried) {
  const auto a = open("a");
  const auto b = open("b");
  ASSERT_TRUE(granted(acquire_as(a, permit_ask(1), 0ms)->get()));
  const auto started = SteadyClock::now();
  const auto outcome = acquire_as(b, permit_ask(3), 5s)->get();
  EXPECT_EQ(error_code(outcome.error), ErrorCode::kConflict);
  EXPECT_LT(SteadyClock::now() - started, 2s) << "a conflict must not wait out wait_ms";
  EXPECT_EQ(observer_.waiters.load(), 0);
}

}  // namespace
}  // namespace dlock::testing
