// The PostgreSQL store's batched writes (docs/adr/0019-pg-batched-writes.md): writes that share
// one pipelined transaction each keep their own outcome.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/errors.h"
#include "store/pg/pg_batch.h"
#include "store/pg/pg_statements.h"
#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#include "util/ids.h"

namespace dlock::store::pg {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCallTimeout{5000};

class PgBatchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new dlock::testing::PostgresServer();
    server_->ensure_database("dlock_batch");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    store_ = make_pg_store({url(), 4, kCallTimeout, {}});  // applies the migrations
    connection_ = std::make_unique<PgConnection>(url(), kCallTimeout, prepared_statements());
  }

  static std::string url() { return server_->url("dlock_batch"); }
  static std::string key(const std::string& name) { return "batch/" + util::random_id() + name; }

  std::string live_session() {
    return store_->open_session("owner", milliseconds(30000)).session_id;
  }
  std::string dead_session() {
    const auto id = live_session();
    store_->close_session(id);
    return id;
  }

  static PgWrite acquire(const std::string& key, const std::string& session) {
    return PgWrite{"acquire", {key, "owner", session, "30000"}, std::nullopt, nullptr};
  }

  static dlock::testing::PostgresServer* server_;
  BackendPtr store_;
  std::unique_ptr<PgConnection> connection_;
};

dlock::testing::PostgresServer* PgBatchTest::server_ = nullptr;

// A dead session's acquire fails inside a batch of live ones: it alone gets SessionNotFoundError,
// the others are granted and committed.
TEST_F(PgBatchTest, DeadSessionsAcquireFailsAloneAmongLiveOnes) {
  const auto live = live_session();
  const auto k1 = key("1"), k2 = key("2"), k3 = key("3");
  PgWrite first = acquire(k1, live);
  PgWrite dead = acquire(k2, dead_session());
  PgWrite third = acquire(k3, live);
  PgWrite beat{"heartbeat", {live}, std::nullopt, nullptr};
  PgWrite stale{"delete_if_owner", {key("4"), "owner", live, "1"}, std::nullopt, nullptr};
  run_batch(*connection_, {&first, &dead, &third, &beat, &stale});

  for (auto* granted : {&first, &third, &beat}) {
    ASSERT_FALSE(granted->error);
    ASSERT_TRUE(granted->result);
    EXPECT_EQ(granted->result->rows(), 1);
  }
  ASSERT_TRUE(dead.error);
  EXPECT_FALSE(dead.result);
  EXPECT_THROW(std::rethrow_exception(dead.error), SessionNotFoundError);
  ASSERT_FALSE(stale.error);
  EXPECT_EQ(stale.result->rows(), 0);  // nothing to release: false, not an error

  ASSERT_TRUE(store_->read(k1));
  EXPECT_EQ(store_->read(k1)->fencing_token, first.result->int64(0, 0));
  EXPECT_FALSE(store_->read(k2));
  ASSERT_TRUE(store_->read(k3));
  EXPECT_EQ(store_->read(k3)->fencing_token, third.result->int64(0, 0));
}

// Writes to one key in one batch are decided in order, in one transaction (one now()): grant,
// held for another session, re-entrant grant with a greater token, release of the first grant
// refused (superseded), release of the current grant.
TEST_F(PgBatchTest, DuplicateKeysInOneBatchAreDecidedInOrder) {
  const auto mine = live_session(), other = live_session();
  const auto k = key("dup");
  PgWrite grant = acquire(k, mine);
  PgWrite held = acquire(k, other);
  PgWrite again = acquire(k, mine);
  run_batch(*connection_, {&grant, &held, &again});
  for (auto* write : {&grant, &held, &again}) ASSERT_FALSE(write->error);
  ASSERT_EQ(grant.result->rows(), 1);
  EXPECT_EQ(held.result->rows(), 0);
  ASSERT_EQ(again.result->rows(), 1);
  EXPECT_GT(again.result->int64(0, 0), grant.result->int64(0, 0));
  EXPECT_EQ(again.result->int64(0, 3), grant.result->int64(0, 3));  // one transaction's now()

  const auto token = [](const PgWrite& write) { return std::to_string(write.result->int64(0, 0)); };
  PgWrite superseded{"delete_if_owner", {k, "owner", mine, token(grant)}, std::nullopt, nullptr};
  PgWrite current{"delete_if_owner", {k, "owner", mine, token(again)}, std::nullopt, nullptr};
  PgWrite taken = acquire(k, other);
  run_batch(*connection_, {&superseded, &current, &taken});
  for (auto* write : {&superseded, &current, &taken}) ASSERT_FALSE(write->error);
  EXPECT_EQ(superseded.result->rows(), 0);
  ASSERT_EQ(current.result->rows(), 1);
  EXPECT_TRUE(current.result->boolean(0, 0));
  ASSERT_EQ(taken.result->rows(), 1);
  EXPECT_GT(taken.result->int64(0, 0), again.result->int64(0, 0));
  ASSERT_TRUE(store_->read(k));
  EXPECT_EQ(store_->read(k)->session_id, other);
}

// Through the queue: concurrent writers, some with dead sessions, each get their own outcome.
TEST_F(PgBatchTest, ConcurrentWritersEachGetTheirOwnOutcome) {
  PgPool pool(url(), 2, kCallTimeout, prepared_statements());
  PgBatcher batcher(pool);
  const auto live = live_session(), dead = dead_session();
  constexpr int kThreads = 12, kRounds = 20;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const bool doomed = t % 4 == 0;
      for (int round = 0; round < kRounds; ++round) {
        const auto k = key(std::to_string(t));
        try {
          const auto granted =
              batcher.execute("acquire", {k, "owner", doomed ? dead : live, "30000"});
          if (doomed || granted.rows() != 1) ++wrong;
          const auto released = batcher.execute(
              "delete_if_owner", {k, "owner", live, std::to_string(granted.int64(0, 0))});
          if (released.rows() != 1 || !released.boolean(0, 0)) ++wrong;
        } catch (const SessionNotFoundError&) {
          if (!doomed) ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace dlock::store::pg
