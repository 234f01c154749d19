// The PostgreSQL store reads result columns by name (util/sql_columns.h): each statement of
// src/store/pg/pg_statements.h declares its columns beside its text, and every pooled connection
// compares them with the prepared statement's (PgConnection's constructor). Here every statement
// is prepared on a migrated database, so a SELECT whose columns were reordered fails here by
// name rather than shifting a read in some later test.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "dlock/errors.h"
#include "store/pg/pg_connection.h"
#include "store/pg/pg_statements.h"
#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#include "util/sql_columns.h"

namespace dlock::store::pg {
namespace {

constexpr std::chrono::milliseconds kCallTimeout{5000};

class PgStatementColumnsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new dlock::testing::PostgresServer();
    server_->ensure_database("dlock_columns");
    make_pg_store({url(), 1, kCallTimeout, {}});  // applies the migrations
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static std::string url() { return server_->url("dlock_columns"); }

  static dlock::testing::PostgresServer* server_;
};

dlock::testing::PostgresServer* PgStatementColumnsTest::server_ = nullptr;

TEST_F(PgStatementColumnsTest, EveryStatementReturnsTheColumnsItsReadsName) {
  for (const auto& statement : prepared_statements()) {
    EXPECT_TRUE(statement.columns.has_value()) << statement.name << " declares no columns";
  }
  try {
    PgConnection connection(url(), kCallTimeout, prepared_statements());
  } catch (const InternalError& error) {
    FAIL() << error.what();
  }
}

TEST_F(PgStatementColumnsTest, AStatementWhoseColumnsDisagreeIsRefusedWhenPrepared) {
  static constexpr util::SqlColumns kDeclared{"owner_id", "ttl_ms"};
  const std::vector<PreparedStatement> swapped{
      {"swapped", "SELECT ttl_ms, owner_id FROM lock_session", kDeclared.list()}};
  try {
    PgConnection connection(url(), kCallTimeout, swapped);
    FAIL() << "columns in another order were accepted";
  } catch (const InternalError& error) {
    EXPECT_NE(std::string(error.what()).find("(ttl_ms, owner_id)"), std::string::npos)
        << error.what();
  }
  const std::vector<PreparedStatement> agreeing{
      {"agreeing", "SELECT owner_id, ttl_ms FROM lock_session", kDeclared.list()}};
  EXPECT_NO_THROW(PgConnection(url(), kCallTimeout, agreeing));
}

}  // namespace
}  // namespace dlock::store::pg
