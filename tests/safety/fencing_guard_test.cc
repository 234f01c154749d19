// The fencing guard (src/fencing) against a real PostgreSQL: the admission rule, its
// transaction discipline, and that a rejected admission leaves the caller's write unapplied.

#include "fencing/fencing_guard.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <thread>

#include "support/postgres_server.h"

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
  Admission write(PGconn* conn, FencingToken token) {
    Transaction tx(conn);
    const auto admission = admit(conn, resource_, token, "key");
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

TEST_F(FencingGuard, AdmitOutsideATransactionIsRefused) {
  EXPECT_THROW(admit(conn_.get(), resource_, 1), FencingError);
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
}

TEST_F(FencingGuard, RolledBackAdmissionDoesNotRaiseTheHighest) {
  {
    Transaction tx(conn_.get());
    EXPECT_EQ(admit(conn_.get(), resource_, 50), Admission::kAdmitted);
  }  // no commit: the write and the raise go together
  EXPECT_EQ(highest_accepted(conn_.get(), resource_), 0u);
  EXPECT_EQ(write(conn_.get(), 20), Admission::kAdmitted);
}

// The row lock taken by admit serializes writers of one resource: a stale writer that was
// blocked behind the new holder's transaction sees its token once that commits.
TEST_F(FencingGuard, ConcurrentStaleWriterWaitsAndIsRejected) {
  EXPECT_EQ(write(conn_.get(), 5), Admission::kAdmitted);
  Transaction newer(conn_.get());
  ASSERT_EQ(admit(conn_.get(), resource_, 9), Admission::kAdmitted);
  auto other = connect();
  Admission stale_result = Admission::kAdmitted;
  std::thread stale([&] { stale_result = write(other.get(), 5); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it block on the row
  newer.commit();
  stale.join();
  EXPECT_EQ(stale_result, Admission::kStale);
}

}  // namespace
}  // namespace dlock::fencing
