// The fencing guard (src/fencing) against a real PostgreSQL: the admission rule, its
// transaction discipline, and that a rejected admission leaves the caller's write unapplied.

#include "fencing/fencing_guard.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/postgres_server.h"
#include "support/subprocess.h"

namespace dlock::fencing {
namespace {

testing::PostgresServer& server() {
  static testing::PostgresServer instance;
  static const bool created = [] {
    instance.ensure_database("fencing_guard");
    return true;
  }();
  (void)created;
  return instance;
}

struct ConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

ConnPtr connect() {
  ConnPtr conn(PQconnectdb(server().url("fencing_guard").c_str()));
  EXPECT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
  return conn;
}

class FencingGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    conn_ = connect();
    install_schema(conn_.get());
    install_schema(conn_.get());  // idempotent
    exec(conn_.get(), "CREATE TABLE IF NOT EXISTS writes (resource text, token bigint)");
    resource_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // One fenced write: admit + insert, committed together. Returns the admission.
  Admission write(PGconn* conn, FencingToken token, const std::string& lock_key = "key") {
    Transaction tx(conn);
    const auto admission = admit(conn, resource_, token, lock_key);
    if (admission == Admission::kStale) return admission;  // ~Transaction rolls back
    exec(conn, "INSERT INTO writes VALUES ($1, $2)", {resource_, std::to_string(token)});
    tx.commit();
    return admission;
  }

  int writes_with(FencingToken token) {
    return exec(conn_.get(), "SELECT 1 FROM writes WHERE resource = $1 AND token = $2",
                {resource_, std::to_string(token)});
  }

  ConnPtr conn_;
  std::string resource_;
};

TEST_F(FencingGuard, SameTokenWritesRepeatedlyGreaterTakesOverSmallerIsStale) {
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
  EXPECT_EQ(write(conn_.get(), 10), Admission::kAdmitted);
  EXPECT_EQ(write(conn_.get(), 10), Admission::kAdmitted);  // one grant, many writes
  EXPECT_EQ(write(conn_.get(), 12), Admission::kAdmitted);
  EXPECT_EQ(write(conn_.get(), 10), Admission::kStale);  // the old holder, after the takeover
  EXPECT_EQ(write(conn_.get(), 11), Admission::kStale);
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 12u);
  EXPECT_EQ(writes_with(10), 2);  // the stale attempt left no row
  EXPECT_EQ(writes_with(11), 0);
  EXPECT_EQ(writes_with(12), 1);
}

// Read-write locks (ADR-0020): readers present their tokens in any order; a writer whose token
// is below an admitted reader's — it was granted before that reader, so its grant ended before
// the reader's began — is refused, and a reader is refused once a later writer has written.
TEST_F(FencingGuard, ReadersOrderAStaleWriterOut) {
  const auto read = [&](FencingToken token) {
    Transaction tx(conn_.get());
    const auto admission = admit_read(conn_.get(), resource_, token, "key");
    tx.commit();
    return admission;
  };
  EXPECT_EQ(write(conn_.get(), 5), Admission::kAdmitted);
  EXPECT_EQ(read(8), Admission::kAdmitted);
  EXPECT_EQ(read(7), Admission::kAdmitted) << "readers among themselves are not ordered";
  EXPECT_EQ(write(conn_.get(), 6), Admission::kStale) << "a writer granted before the readers";
  EXPECT_EQ(writes_with(6), 0);
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 5u) << "a reader raises no write token";
  EXPECT_EQ(write(conn_.get(), 9), Admission::kAdmitted);
  EXPECT_EQ(read(8), Admission::kStale) << "a reader after a later writer wrote";
  EXPECT_EQ(read(10), Admission::kAdmitted);
  // A reader of another key is refused like a writer of one.
  Transaction tx(conn_.get());
  EXPECT_THROW(admit_read(conn_.get(), resource_, 11, "other-key"), LockKeyMismatchError);
}

TEST_F(FencingGuard, AdmitOutsideATransactionIsRefused) {
  EXPECT_THROW(admit(conn_.get(), resource_, 1, "key"), FencingError);
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
}

TEST_F(FencingGuard, RolledBackAdmissionDoesNotRaiseTheHighest) {
  {
    Transaction tx(conn_.get());
    EXPECT_EQ(admit(conn_.get(), resource_, 50, "key"), Admission::kAdmitted);
  }  // no commit: the write and the raise go together
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
  EXPECT_EQ(write(conn_.get(), 20), Admission::kAdmitted);
}

// The row lock taken by admit serializes writers of one resource: a stale writer that was
// blocked behind the new holder's transaction sees its token once that commits.
TEST_F(FencingGuard, ConcurrentStaleWriterWaitsAndIsRejected) {
  EXPECT_EQ(write(conn_.get(), 5), Admission::kAdmitted);
  Transaction newer(conn_.get());
  ASSERT_EQ(admit(conn_.get(), resource_, 9, "key"), Admission::kAdmitted);
  auto other = connect();
  Admission stale_result = Admission::kAdmitted;
  std::thread stale([&] { stale_result = write(other.get(), 5); });
  // Once it waits for the row lock (a third connection sees it in pg_stat_activity).
  auto observer = connect();
  const auto blocked = [&] {
    PGresult* result = PQexec(observer.get(),
                              "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                              "'Lock' AND datname = current_database()");
    const bool waiting =
        PQresultStatus(result) == PGRES_TUPLES_OK && std::string(PQgetvalue(result, 0, 0)) != "0";
    PQclear(result);
    return waiting;
  };
  EXPECT_TRUE(dlock::testing::wait_for(blocked, std::chrono::milliseconds(10'000)))
      << "the stale writer never waited for the row";
  newer.commit();
  stale.join();
  EXPECT_EQ(stale_result, Admission::kStale);
}

// Tokens are ordered per key: a greater token of another key must not take the resource over
// (it would lock out the real holders, and a stale holder of the other key could write).
TEST_F(FencingGuard, TokenOfAnotherLockKeyIsRefused) {
  EXPECT_EQ(write(conn_.get(), 10, "payouts/a"), Admission::kAdmitted);
  EXPECT_THROW(write(conn_.get(), 1000, "payouts/b"), LockKeyMismatchError);
  EXPECT_THROW(write(conn_.get(), 3, "payouts/b"), LockKeyMismatchError);  // stale and foreign
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 10u);
  EXPECT_EQ(writes_with(1000), 0);
  EXPECT_EQ(bound_key(conn_.get(), resource_), "payouts/a");
  EXPECT_EQ(write(conn_.get(), 11, "payouts/a"), Admission::kAdmitted);  // its holders go on
  try {
    write(conn_.get(), 12, "payouts/b");
    ADD_FAILURE() << "admitted a token of another key";
  } catch (const LockKeyMismatchError& error) {
    EXPECT_NE(std::string(error.what()).find("protected by lock key \"payouts/a\""),
              std::string::npos)
        << error.what();
  }
}

TEST_F(FencingGuard, BindPinsTheKeyBeforeTheFirstWrite) {
  bind_resource(conn_.get(), resource_, "payouts/a");
  bind_resource(conn_.get(), resource_, "payouts/a");  // idempotent
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
  EXPECT_THROW(bind_resource(conn_.get(), resource_, "payouts/b"), LockKeyMismatchError);
  EXPECT_THROW(write(conn_.get(), 7, "payouts/b"), LockKeyMismatchError);  // no first-use bind
  EXPECT_EQ(write(conn_.get(), 5, "payouts/a"), Admission::kAdmitted);
  Transaction tx(conn_.get());
  EXPECT_THROW(admit(conn_.get(), resource_, 6, ""), FencingError);  // the key is required
}

// Rows written before keys were bound (holder_key NULL) are bound by their next writer.
TEST_F(FencingGuard, UnboundRowIsBoundByItsNextWriter) {
  exec(conn_.get(), "INSERT INTO fencing_resource (resource, highest_token) VALUES ($1, 4)",
       {resource_});
  EXPECT_EQ(write(conn_.get(), 3, "payouts/a"), Admission::kStale);
  EXPECT_EQ(bound_key(conn_.get(), resource_), "");  // a stale writer binds nothing
  EXPECT_EQ(write(conn_.get(), 4, "payouts/a"), Admission::kAdmitted);
  EXPECT_EQ(bound_key(conn_.get(), resource_), "payouts/a");
  EXPECT_THROW(write(conn_.get(), 9, "payouts/b"), LockKeyMismatchError);
}

// The rule as SQL functions (fencing_guard.sql), the one thing every language's guard calls:
// t/f answers, and SQLSTATEs a driver can map (DL001 another key, DL002 a bad argument).
TEST_F(FencingGuard, TheRuleIsCallableFromSqlAlone) {
  const auto call = [&](const std::string& sql, std::initializer_list<std::string> params) {
    std::vector<const char*> values;
    for (const auto& param : params) values.push_back(param.c_str());
    std::unique_ptr<PGresult, decltype(&PQclear)> result(
        PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                     values.data(), nullptr, nullptr, 0),
        &PQclear);
    if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
      const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
      return std::string("error ") + (state ? state : "?");
    }
    return std::string(PQgetvalue(result.get(), 0, 0));
  };
  const std::string admit_sql = "SELECT dlock_fence_admit($1, $2, $3)";
  const std::string read_sql = "SELECT dlock_fence_admit_read($1, $2, $3)";
  EXPECT_EQ(call(admit_sql, {resource_, "5", "k"}), "t");
  EXPECT_EQ(call(admit_sql, {resource_, "5", "k"}), "t");  // one grant, many writes
  EXPECT_EQ(call(admit_sql, {resource_, "4", "k"}), "f");
  EXPECT_EQ(call(read_sql, {resource_, "8", "k"}), "t");
  EXPECT_EQ(call(admit_sql, {resource_, "7", "k"}), "f");  // below an admitted reader
  EXPECT_EQ(call(read_sql, {resource_, "6", "k"}), "t");   // readers in any order
  EXPECT_EQ(call(admit_sql, {resource_, "9", "k"}), "t");
  EXPECT_EQ(call(read_sql, {resource_, "8", "k"}), "f");  // a later writer wrote
  EXPECT_EQ(call(admit_sql, {resource_, "10", "other"}), "error DL001");
  EXPECT_EQ(call(read_sql, {resource_, "10", "other"}), "error DL001");
  EXPECT_EQ(call("SELECT dlock_fence_bind($1, $2)", {resource_, "other"}), "error DL001");
  EXPECT_EQ(call("SELECT dlock_fence_bind($1, $2)", {resource_, "k"}), "");
  EXPECT_EQ(call(admit_sql, {resource_, "0", "k"}), "error DL002");
  EXPECT_EQ(call(admit_sql, {resource_, "3", ""}), "error DL002");
  EXPECT_EQ(call(admit_sql, {"", "3", "k"}), "error DL002");
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 9u);
}

}  // namespace
}  // namespace dlock::fencing
