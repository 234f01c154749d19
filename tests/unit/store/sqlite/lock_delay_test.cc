// Lock-delay on the SQLite store (C2 "Lock-delay", src/store/sqlite/sqlite_delays.h) beyond the
// conformance matrix: the paths that remove the row of a grant that ended without a release --
// a late release, close_session, the reaper -- keep its delay (in `lock_delays`), and a delay
// is kept across a reopen of the file (migration 005, ADR-0013 clock).

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_statements.h"
#include "store/sqlite/sqlite_store.h"
#include "support/grant_asks.h"
#include "support/sqlite_store_fixture.h"
#include "support/subprocess.h"

using dlock::testing::Ask;
using dlock::testing::shared_ask;

namespace dlock::store::sqlite {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kDelay{1500};
constexpr milliseconds kTtl{1000};  // the default TtlLimits::min_ttl
const Ask kShared = shared_ask();

class SqliteLockDelayTest : public testing::SqliteStoreFixture {
 protected:
  SqliteLockDelayTest() : SqliteStoreFixture("dlock-sqlite-lock-delay") {}

  void SetUp() override {
    SqliteStoreFixture::SetUp();
    alice_ = store_->open_session("alice", seconds(60), kDelay);
    bob_ = store_->open_session("bob", seconds(60));
  }
  // Alice's grant of `key` for kTtl, and a wait until its TTL has passed (nothing reaps it).
  LockHandle expired_grant(const std::string& key) {
    const auto held =
        store_->try_grant(key, "alice", alice_.session_id, GrantRequest::exclusive(kTtl));
    EXPECT_TRUE(held.has_value());
    // Real time: the store's clock; the poll interval of waiting for the TTL to pass.
    while (store_->read(key).has_value()) std::this_thread::sleep_for(milliseconds(20));
    return *held;
  }
  // Whether bob is refused `key` in every mode.
  bool refused(const std::string& key) {
    return !store_->try_grant(key, "bob", bob_.session_id, GrantRequest::exclusive(seconds(30))) &&
           !store_->try_grant(key, "bob", bob_.session_id, kShared(seconds(30)));
  }

  SessionInfo alice_, bob_;
};

// A release after the TTL passed is no clean end: the client may have acted after the expiry.
TEST_F(SqliteLockDelayTest, ALateReleaseKeepsTheDelay) {
  const auto held = expired_grant("ns/late");
  EXPECT_FALSE(
      store_->delete_if_owner(GrantRef{"ns/late", "alice", alice_.session_id, held.fencing_token}));
  EXPECT_TRUE(refused("ns/late")) << "a late release ended the lock-delay";
}

// close_session releases live grants cleanly, but not one whose TTL had already passed.
TEST_F(SqliteLockDelayTest, CloseSessionKeepsTheDelayOfAGrantThatHadEnded) {
  expired_grant("ns/closed");
  EXPECT_TRUE(store_->close_session(alice_.session_id).empty());
  EXPECT_TRUE(refused("ns/closed")) << "close_session ended the lock-delay of an expired grant";
}

// The reaper removes the ended row and keeps its delay; a later reap announces its end.
TEST_F(SqliteLockDelayTest, TheReaperKeepsTheDelayAndAnnouncesItsEnd) {
  const auto held = expired_grant("ns/reaped");
  std::atomic<int> announced{0};
  auto subscription = store_->watch_releases("ns/reaped", [&](FencingToken) { ++announced; });
  ASSERT_EQ(store_->reap_expired().expired_locks.size(), 1u);
  EXPECT_TRUE(refused("ns/reaped")) << "the reaper ended the lock-delay";
  // client_deadline was taken before the grant's acquired_at: a margin for the gap.
  std::this_thread::sleep_until(held.client_deadline + kDelay + milliseconds(200));
  const int before = announced;
  store_->reap_expired();
  EXPECT_GT(announced, before) << "the end of the lock-delay was not announced";
  EXPECT_TRUE(
      store_->try_grant("ns/reaped", "bob", bob_.session_id, GrantRequest::exclusive(seconds(30))));
}

// The delay is in the file: a store reopened on it keeps a revoke's delay.
TEST_F(SqliteLockDelayTest, ARevokesDelayIsKeptAcrossAReopen) {
  ASSERT_TRUE(store_->try_grant("ns/revoked", "alice", alice_.session_id,
                                GrantRequest::exclusive(seconds(30))));
  ASSERT_TRUE(store_->revoke("ns/revoked").revoked);
  reopen();
  EXPECT_TRUE(refused("ns/revoked")) << "the reopened store forgot the lock-delay";
  EXPECT_EQ(store_->get_session(alice_.session_id)->lock_delay, kDelay);
}

}  // namespace
}  // namespace dlock::store::sqlite

namespace dlock::store::sqlite {
namespace {

// SQLite reads 'now' once per statement: the reaper's statements (record the delays of ended
// grants, delete the ended grants, delete the expired sessions) would each judge "ended" at a
// different instant, and a grant that ended between two of them would go without its
// lock-delay. ClockVfs::PinnedNow gives the statements of one thread one now.
TEST(ClockVfsPinnedNow, StatementsOfThePinningThreadReadOneInstant) {
  std::atomic<std::int64_t> ticks{1'000'000};
  ClockVfs vfs([&] { return ticks += 1000; });  // a second later at every read
  const auto dir = testing::make_temp_dir("dlock-clock-vfs");
  Database db(dir + "/clock.db", 1000, vfs.name());
  const auto now = [&] {
    Statement read(db.handle(), "SELECT " DLOCK_SQLITE_NOW);
    EXPECT_TRUE(read.step());
    return read.column_int64(0);
  };
  EXPECT_NE(now(), now()) << "the clock is read once per statement";
  {
    const ClockVfs::PinnedNow pinned(42'000);
    EXPECT_EQ(now(), 42'000);
    EXPECT_EQ(now(), 42'000);
    std::int64_t elsewhere = 0;
    std::thread other([&] { elsewhere = now(); });
    other.join();
    EXPECT_NE(elsewhere, 42'000) << "another thread's statements are not pinned";
  }
  EXPECT_GT(now(), 42'000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock::store::sqlite
