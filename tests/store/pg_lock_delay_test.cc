// Lock-delay on the PostgreSQL store (C2 "Lock-delay (pg, sqlite, etcd)",
// src/store/pg/migrations/007_lock_delay.sql): the pg-only corners the conformance cases do not
// reach. A release, or close_session, of a grant that had already expired does not cancel its
// delay; a zero-delay grant taking over a delayed row's name does not inherit the delay.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "store/pg/pg_connection.h"
#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#include "util/ids.h"

namespace dlock::store::pg {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTtl{200};
constexpr milliseconds kDelay{1500};

class PgLockDelayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new dlock::testing::PostgresServer();
    server_->ensure_database("dlock_lock_delay");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    store_ = make_pg_store({server_->url("dlock_lock_delay"),
                            2,
                            milliseconds(5000),
                            {kTtl, std::chrono::minutes(10)}});
  }

  static std::string key() { return "delay/" + util::random_id(); }
  // Sleeps past `handle`'s expiry, then returns.
  static void outlive(const LockHandle& handle) {
    std::this_thread::sleep_until(handle.server_expiry + milliseconds(100));
  }

  LockHandle expired_grant(const std::string& k, const SessionInfo& alice);

  static dlock::testing::PostgresServer* server_;
  BackendPtr store_;
};

dlock::testing::PostgresServer* PgLockDelayTest::server_ = nullptr;

// A grant of `alice`, a session with kDelay, that has expired (in its delay).
LockHandle PgLockDelayTest::expired_grant(const std::string& k, const SessionInfo& alice) {
  const auto held = store_->try_insert(k, "alice", alice.session_id, kTtl);
  EXPECT_TRUE(held.has_value());
  outlive(*held);
  return *held;
}

TEST_F(PgLockDelayTest, ReleaseOfAnExpiredGrantKeepsItsDelay) {
  const auto k = key();
  const auto alice = store_->open_session("alice", std::chrono::minutes(1), kDelay);
  const auto bob = store_->open_session("bob", std::chrono::minutes(1));
  const auto held = expired_grant(k, alice);
  EXPECT_FALSE(store_->delete_if_owner(k, "alice", alice.session_id, held.fencing_token))
      << "the release of an expired grant reported it live";
  EXPECT_FALSE(store_->try_insert(k, "bob", bob.session_id, kTtl))
      << "the release of an expired grant cancelled its delay";
}

TEST_F(PgLockDelayTest, CloseSessionKeepsTheDelayOfAnExpiredGrant) {
  const auto k = key();
  const auto alice = store_->open_session("alice", std::chrono::minutes(1), kDelay);
  const auto bob = store_->open_session("bob", std::chrono::minutes(1));
  expired_grant(k, alice);
  EXPECT_TRUE(store_->close_session(alice.session_id).empty());
  EXPECT_FALSE(store_->try_insert(k, "bob", bob.session_id, kTtl))
      << "close_session cancelled the delay of a grant that had expired";
}

TEST_F(PgLockDelayTest, AGrantWithoutDelayTakingOverADelayedNameCarriesNone) {
  const auto k = key();
  const auto alice = store_->open_session("alice", std::chrono::minutes(1), milliseconds(300));
  const auto bob = store_->open_session("bob", std::chrono::minutes(1));
  const auto carol = store_->open_session("carol", std::chrono::minutes(1));
  const auto held = store_->try_insert(k, "alice", alice.session_id, kTtl);
  ASSERT_TRUE(held.has_value());
  std::this_thread::sleep_until(held->server_expiry + milliseconds(400));
  const auto next = store_->try_insert(k, "bob", bob.session_id, kTtl);
  ASSERT_TRUE(next.has_value()) << "granted only after a delay longer than alice's";
  outlive(*next);
  EXPECT_TRUE(store_->try_insert(k, "carol", carol.session_id, kTtl))
      << "bob's grant, without a delay, kept alice's";
}

}  // namespace
}  // namespace dlock::store::pg
