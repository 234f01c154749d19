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
#include "support/grant_asks.h"
#include "support/postgres_server.h"
#include "util/ids.h"

using dlock::testing::Ask;
using dlock::testing::shared_ask;

namespace dlock::store::pg {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCallTimeout{5000};
// The call timeout of a connection whose writes are meant to run out of it.
constexpr milliseconds kImpatient{400};

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

// --- heartbeats of one batch in one statement (docs/adr/0027-pg-heartbeats-in-one-statement.md)

PgWrite heartbeat(const std::string& session) {
  return PgWrite{"heartbeat", {session}, std::nullopt, nullptr};
}

std::int64_t session_expiry_us(PgConnection& connection, const std::string& session) {
  return connection
      .run("SELECT " DLOCK_PG_US("expires_at") " FROM lock_session WHERE session_id = '" + session +
           "'")
      .int64(0, 0);
}

TEST(PgTextArray, QuotesEveryValueAndEscapesQuotesAndBackslashes) {
  EXPECT_EQ(text_array({}), "{}");
  EXPECT_EQ(text_array({"a", "b c"}), R"({"a","b c"})");
  EXPECT_EQ(text_array({R"(x"y\z)", ""}), R"({"x\"y\\z",""})");
}

// Each heartbeat of the merged statement gets its own session's answer: its owner, TTL and new
// expiry; a session closed or expired (but not reaped) gets no row and is not renewed; a session
// named twice is answered twice; the acquire sharing the batch is granted.
TEST_F(PgBatchTest, HeartbeatsOfOneBatchEachGetTheirOwnSessionsAnswer) {
  const auto a = store_->open_session("owner-a", milliseconds(30000)).session_id;
  const auto b =
      store_->open_session("owner-b", milliseconds(60000), milliseconds(2000)).session_id;
  const auto closed = dead_session();
  const auto expired = live_session();
  connection_->run(
      "UPDATE lock_session SET expires_at = now() - interval '1 second' "
      "WHERE session_id = '" +
      expired + "'");
  const auto expired_at = session_expiry_us(*connection_, expired);
  const auto k = key("hb");
  PgWrite beat_a = heartbeat(a), beat_closed = heartbeat(closed), beat_b = heartbeat(b),
          beat_expired = heartbeat(expired), beat_a_again = heartbeat(a), grant = acquire(k, a);
  run_batch(*connection_, {&beat_a, &beat_closed, &grant, &beat_b, &beat_expired, &beat_a_again});

  for (auto* write : {&beat_a, &beat_closed, &grant, &beat_b, &beat_expired, &beat_a_again}) {
    ASSERT_FALSE(write->error);
    ASSERT_TRUE(write->result);
  }
  ASSERT_EQ(beat_a.result->rows(), 1);
  ASSERT_EQ(beat_b.result->rows(), 1);
  ASSERT_EQ(beat_a_again.result->rows(), 1);
  EXPECT_EQ(beat_closed.result->rows(), 0);
  EXPECT_EQ(beat_expired.result->rows(), 0);
  // kHeartbeat's columns: owner, TTL, new expiry (µs), lock-delay.
  EXPECT_EQ(beat_a.result->text(0, 0), "owner-a");
  EXPECT_EQ(beat_a.result->int64(0, 1), 30000);
  EXPECT_EQ(beat_a.result->int64(0, 3), 0);
  EXPECT_EQ(beat_b.result->text(0, 0), "owner-b");
  EXPECT_EQ(beat_b.result->int64(0, 1), 60000);
  EXPECT_EQ(beat_b.result->int64(0, 3), 2000);
  EXPECT_EQ(beat_a_again.result->int64(0, 2), beat_a.result->int64(0, 2));
  // One transaction's now(): the two new expiries are 30 s apart, as the two TTLs.
  EXPECT_EQ(beat_b.result->int64(0, 2) - beat_a.result->int64(0, 2), 30'000'000);
  EXPECT_EQ(session_expiry_us(*connection_, a), beat_a.result->int64(0, 2));
  EXPECT_EQ(session_expiry_us(*connection_, b), beat_b.result->int64(0, 2));
  EXPECT_EQ(session_expiry_us(*connection_, expired), expired_at);  // not brought back
  ASSERT_EQ(grant.result->rows(), 1);
  ASSERT_TRUE(store_->read(k));
  EXPECT_EQ(store_->read(k)->session_id, a);
}

// Two session-bound shared holders of one name renewed in one statement: the group row's expiry
// becomes the later of their new expiries, as their heartbeats one by one would leave it.
TEST_F(PgBatchTest, HeartbeatsOfOneBatchRaiseTheirSharedGrantToTheLatestExpiry) {
  const auto shorter = store_->open_session("owner", milliseconds(30000)).session_id;
  const auto longer = store_->open_session("owner", milliseconds(90000)).session_id;
  const auto k = key("shared");
  const Ask shared = shared_ask();
  ASSERT_TRUE(store_->try_grant(k, "owner", longer, shared(LockLease::session())));
  ASSERT_TRUE(store_->try_grant(k, "owner", shorter, shared(LockLease::session())));
  PgWrite first = heartbeat(longer), second = heartbeat(shorter);
  run_batch(*connection_, {&first, &second});
  ASSERT_FALSE(first.error);
  ASSERT_FALSE(second.error);
  ASSERT_EQ(first.result->rows(), 1);
  const auto group =
      connection_->run("SELECT " DLOCK_PG_US("expires_at") " FROM locks WHERE key = '" + k + "'");
  ASSERT_EQ(group.rows(), 1);
  EXPECT_EQ(group.int64(0, 0), first.result->int64(0, 2));
}

// A session row another transaction has locked is skipped by the merged statement, not waited
// for: its batch mate is renewed at once, and its own heartbeat runs again alone, where it waits
// until the call timeout and fails as a timeout (UnavailableError), not as "session not found".
TEST_F(PgBatchTest, HeartbeatOfALockedSessionRowRunsAgainAloneForItsOwnOutcome) {
  const auto blocked = live_session(), free = live_session();
  const auto blocked_expiry = session_expiry_us(*connection_, blocked);
  PgConnection holder(url(), kCallTimeout, {});
  holder.run("BEGIN; SELECT 1 FROM lock_session WHERE session_id = '" + blocked + "' FOR UPDATE");
  PgConnection impatient(url(), kImpatient, prepared_statements());
  PgWrite stuck = heartbeat(blocked), renewed = heartbeat(free);
  const auto started = std::chrono::steady_clock::now();
  run_batch(impatient, {&stuck, &renewed});
  const auto took = std::chrono::steady_clock::now() - started;
  holder.run("ROLLBACK");
  // One call timeout (the second run's); waiting in the merged statement too took two.
  EXPECT_LT(took, kImpatient * 3 / 2);
  ASSERT_TRUE(stuck.error);
  EXPECT_FALSE(stuck.result);
  EXPECT_THROW(std::rethrow_exception(stuck.error), UnavailableError);
  EXPECT_EQ(session_expiry_us(*connection_, blocked), blocked_expiry);  // not renewed
  ASSERT_FALSE(renewed.error);
  ASSERT_TRUE(renewed.result);
  EXPECT_EQ(renewed.result->rows(), 1);
}

// The same, with the other transaction done within the call timeout: the skipped heartbeat's
// second run waits for it and renews the session.
TEST_F(PgBatchTest, HeartbeatOfASessionRowLockedBrieflyIsRenewed) {
  const auto blocked = live_session(), free = live_session();
  PgConnection holder(url(), kCallTimeout, {});
  holder.run("BEGIN; SELECT 1 FROM lock_session WHERE session_id = '" + blocked + "' FOR UPDATE");
  std::thread release([&] {
    // Real time: how long the row stays locked is the case under test.
    std::this_thread::sleep_for(kImpatient / 3);
    holder.run("COMMIT");
  });
  PgConnection impatient(url(), kImpatient, prepared_statements());
  PgWrite waited = heartbeat(blocked), renewed = heartbeat(free);
  run_batch(impatient, {&waited, &renewed});
  release.join();
  for (auto* beat : {&waited, &renewed}) {
    ASSERT_FALSE(beat->error);
    ASSERT_TRUE(beat->result);
    ASSERT_EQ(beat->result->rows(), 1);
  }
  EXPECT_EQ(session_expiry_us(*connection_, blocked), waited.result->int64(0, 2));
}

// The merged statement itself fails on a sound connection (here it is cancelled at the call
// timeout: another transaction holds the group row a session-bound shared grant of one session
// raises): each heartbeat runs again alone and learns its own outcome, so the blocked session's
// failure is not its batch mate's.
TEST_F(PgBatchTest, FailedMergedHeartbeatIsEachHeartbeatsOwnOutcome) {
  const auto blocked = live_session(), free = live_session();
  const auto k = key("raised");
  ASSERT_TRUE(store_->try_grant(k, "owner", blocked, GrantRequest::shared(LockLease::session())));
  PgConnection holder(url(), kCallTimeout, {});
  holder.run("BEGIN; SELECT 1 FROM locks WHERE key = '" + k + "' FOR UPDATE");
  PgConnection impatient(url(), kImpatient, prepared_statements());
  PgWrite renewed = heartbeat(free), stuck = heartbeat(blocked);
  const auto started = std::chrono::steady_clock::now();
  run_batch(impatient, {&renewed, &stuck});
  const auto took = std::chrono::steady_clock::now() - started;
  holder.run("ROLLBACK");
  ASSERT_TRUE(stuck.error);
  EXPECT_THROW(std::rethrow_exception(stuck.error), UnavailableError);
  ASSERT_FALSE(renewed.error);
  ASSERT_TRUE(renewed.result);
  EXPECT_EQ(renewed.result->rows(), 1);
  EXPECT_LT(took, 3 * kImpatient);
}

// --- deadlines (docs/adr/0028-pg-batch-deadlines.md)

// A pipeline whose statements are each within the statement timeout but together are not is
// cancelled at its deadline: the statement running then fails as a timeout (UnavailableError),
// the transaction is rolled back, and the connection stays usable.
TEST_F(PgBatchTest, ThePipelineRunningAtItsDeadlineIsCancelled) {
  const std::vector<PreparedStatement> statements{{"nap", "SELECT pg_sleep($1::float8)"}};
  PgConnection connection(url(), kImpatient, statements);
  const std::vector<std::string> quarter{"0.25"};
  const std::vector<PreparedCall> calls(5, PreparedCall{"nap", &quarter});
  std::size_t failed = 99;
  std::exception_ptr failure;
  const auto started = std::chrono::steady_clock::now();
  const auto results = connection.execute_pipelined(calls, &failed, started + kImpatient, &failure);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(results);
  EXPECT_EQ(failed, 1U);  // the second nap was running at 400 ms
  ASSERT_TRUE(failure);
  EXPECT_THROW(std::rethrow_exception(failure), UnavailableError);
  EXPECT_LT(took, kImpatient * 3 / 2);  // all five naps: 1250 ms
  EXPECT_TRUE(connection.healthy());
  EXPECT_EQ(connection.run("SELECT 1").rows(), 1);
  // No deadline: the same pipeline runs to its end.
  EXPECT_TRUE(connection.execute_pipelined(calls, &failed));
}

// The holder functions judge time at statement_timestamp() (ADR-0037): in a pipelined batch each
// statement has its own, taken when the server reaches it, while now() stays the batch's start.
TEST_F(PgBatchTest, EachStatementOfAPipelinedBatchHasItsOwnStatementTimestamp) {
  const std::vector<PreparedStatement> statements{
      {"stamp",
       "SELECT (extract(epoch FROM statement_timestamp()) * 1000000)::bigint AS statement_us, "
       "(extract(epoch FROM now()) * 1000000)::bigint AS now_us, pg_sleep($1::float8)"}};
  PgConnection connection(url(), std::chrono::seconds(5), statements);
  const std::vector<std::string> nap{"0.05"};
  const std::vector<PreparedCall> calls(3, PreparedCall{"stamp", &nap});
  std::size_t failed = 99;
  const auto results = connection.execute_pipelined(calls, &failed);
  ASSERT_TRUE(results);
  const auto batch_start = (*results)[0].int64(0, 1);
  for (std::size_t i = 1; i < results->size(); ++i) {
    EXPECT_EQ((*results)[i].int64(0, 1), batch_start) << "now() of statement " << i;
    EXPECT_GE((*results)[i].int64(0, 0), (*results)[i - 1].int64(0, 0) + 50'000)
        << "statement " << i << " began before its predecessor's 50 ms nap ended";
  }
}

// Holds the `locks` rows of `keys` (granted to a session of its own) in a transaction of its
// own, so every write to them waits until that transaction ends or the write is cancelled.
class RowHolder {
 public:
  RowHolder(const std::string& url, const std::vector<std::string>& keys)
      : connection_(url, kCallTimeout, {}) {
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "'" : ",'") + k + "'";
    connection_.run("BEGIN; SELECT 1 FROM locks WHERE key IN (" + list + ") FOR UPDATE");
  }
  ~RowHolder() { connection_.run("ROLLBACK"); }

 private:
  PgConnection connection_;
};

// One write blocked for the whole call timeout among free ones: the free ones run again first
// and are granted; the blocked one runs again alone with what is left of the second call timeout
// and fails as a timeout, with nothing of it written. The batch is answered within two call
// timeouts.
TEST_F(PgBatchTest, WritesSharingABatchWithABlockedOneAreGrantedFirst) {
  const auto owner = live_session(), mine = live_session();
  const auto busy = key("busy");
  ASSERT_TRUE(
      store_->try_grant(busy, "owner", owner, GrantRequest::exclusive(LockLease::session())));
  const auto token = store_->read(busy)->fencing_token;
  const auto k1 = key("1"), k2 = key("2");
  PgWrite blocked = acquire(busy, mine), first = acquire(k1, mine), second = acquire(k2, mine);
  const auto started = std::chrono::steady_clock::now();
  {
    RowHolder holder(url(), {busy});
    PgConnection impatient(url(), kImpatient, prepared_statements());
    run_batch(impatient, {&blocked, &first, &second});
  }
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(blocked.error);
  EXPECT_THROW(std::rethrow_exception(blocked.error), UnavailableError);
  ASSERT_EQ(store_->read(busy)->fencing_token, token);
  EXPECT_EQ(store_->read(busy)->session_id, owner);
  for (auto* write : {&first, &second}) {
    ASSERT_FALSE(write->error);
    ASSERT_TRUE(write->result);
    ASSERT_EQ(write->result->rows(), 1);
  }
  EXPECT_EQ(store_->read(k1)->fencing_token, first.result->int64(0, 0));
  EXPECT_EQ(store_->read(k2)->fencing_token, second.result->int64(0, 0));
  EXPECT_LT(took, 3 * kImpatient);
}

// Many writes blocked for the whole call timeout in one batch: it is answered within two call
// timeouts (re-running each of them, one at a time, took two call timeouts per blocked write),
// every write gets an outcome, every blocked one a timeout (UnavailableError) with nothing of it
// written, and a free write is granted or fails the same way, never half-written.
TEST_F(PgBatchTest, ABatchOfBlockedWritesIsAnsweredWithinTwoCallTimeouts) {
  const auto owner = live_session(), mine = live_session();
  std::vector<std::string> busy;
  for (int i = 0; i < 5; ++i) {
    busy.push_back(key("busy" + std::to_string(i)));
    ASSERT_TRUE(store_->try_grant(busy.back(), "owner", owner,
                                  GrantRequest::exclusive(LockLease::session())));
  }
  std::vector<PgWrite> writes;
  for (const auto& k : busy) writes.push_back(acquire(k, mine));
  const auto free = key("free");
  writes.push_back(acquire(free, mine));
  std::vector<PgWrite*> batch;
  for (auto& write : writes) batch.push_back(&write);
  const auto started = std::chrono::steady_clock::now();
  {
    RowHolder holder(url(), busy);
    PgConnection impatient(url(), kImpatient, prepared_statements());
    run_batch(impatient, batch);
  }
  const auto took = std::chrono::steady_clock::now() - started;
  // Two call timeouts (800 ms), the batch's own work and room for a machine running other
  // tests; re-running the five blocked writes one by one takes another call timeout each.
  EXPECT_LT(took, 4 * kImpatient);
  for (std::size_t i = 0; i < busy.size(); ++i) {
    ASSERT_TRUE(writes[i].error) << busy[i];
    EXPECT_THROW(std::rethrow_exception(writes[i].error), UnavailableError);
    EXPECT_EQ(store_->read(busy[i])->session_id, owner);
  }
  auto& last = writes.back();
  ASSERT_NE(!last.error, !last.result);  // one outcome
  if (last.result) {
    ASSERT_EQ(last.result->rows(), 1);
    EXPECT_EQ(store_->read(free)->fencing_token, last.result->int64(0, 0));
  } else {
    EXPECT_THROW(std::rethrow_exception(last.error), UnavailableError);
    EXPECT_FALSE(store_->read(free));
  }
}

// Through the queue: concurrent heartbeats of live and dead sessions, merged whenever they share
// a batch, each answered for its own session.
TEST_F(PgBatchTest, ConcurrentHeartbeatsEachGetTheirOwnSessionsAnswer) {
  PgPool pool(url(), 2, kCallTimeout, prepared_statements());
  PgBatcher batcher(pool);
  constexpr int kThreads = 12, kRounds = 30;
  std::vector<std::string> sessions;
  // TTLs of their own, so an answer given to the wrong heartbeat shows.
  for (int t = 0; t < kThreads; ++t) {
    sessions.push_back(store_->open_session("owner", milliseconds(30000 + 1000 * t)).session_id);
    if (t % 3 == 0) store_->close_session(sessions.back());
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const auto answer = batcher.execute("heartbeat", {sessions[t]});
        const bool alive = t % 3 != 0;
        if (answer.rows() != (alive ? 1 : 0)) ++wrong;
        if (alive && answer.int64(0, 1) != 30000 + 1000 * t) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace dlock::store::pg
