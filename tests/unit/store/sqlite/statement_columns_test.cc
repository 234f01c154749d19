// The SQLite store reads result columns by name (util/sql_columns.h): each statement of
// src/store/sqlite/sqlite_statements.h whose rows it reads declares its columns beside its text.
// Here every such statement is prepared on a migrated database and its declared columns compared
// with SQLite's names for them, so a SELECT whose columns were reordered fails here by name
// rather than shifting a read in some later test.

#include <gtest/gtest.h>

#include <string>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_statements.h"
#include "support/sqlite_store_fixture.h"
#include "util/sql_columns.h"

namespace dlock::store::sqlite {
namespace {

// A name's index, a joined list and a prefix, at compile time (a name not in the list would not
// compile).
constexpr util::SqlColumns kOwnerTtl{"owner_id", "ttl_ms"};
static_assert(kOwnerTtl["ttl_ms"] == 1);
static_assert((kOwnerTtl + util::SqlColumns{"live"})["live"] == 2);
static_assert((kOwnerTtl + util::SqlColumns{"live"}).starts_with(kOwnerTtl));
static_assert(!util::SqlColumns{"ttl_ms", "owner_id"}.starts_with(kOwnerTtl));
static_assert(sql::kCloseColumns.starts_with(sql::kGrantRow));

class SqliteStatementColumnsTest : public testing::SqliteStoreFixture {
 protected:
  SqliteStatementColumnsTest() : SqliteStoreFixture("dlock-sqlite-columns") {}

  // The store's file, migrated by the store, which is closed again (one process per file).
  Database migrated() {
    store_.reset();
    return Database((dir_ / "dlock.db").string(), 1000);
  }
};

TEST_F(SqliteStatementColumnsTest, EveryStatementReturnsTheColumnsItsReadsName) {
  Database db = migrated();
  const auto statements = sql::checked_statements();
  ASSERT_GE(statements.size(), 30u);
  for (const auto& statement : statements) {
    Statement prepared(db.handle(), statement.sql);
    EXPECT_NO_THROW(prepared.check_columns(statement.columns)) << statement.sql;
  }
}

TEST_F(SqliteStatementColumnsTest, AStatementWhoseColumnsDisagreeIsRefusedWhenPrepared) {
  Database db = migrated();
  StatementCache statements(db);
  try {
    statements.get("SELECT ttl_ms, owner_id FROM lock_session", kOwnerTtl.list());
    FAIL() << "columns in another order were accepted";
  } catch (const InternalError& error) {
    EXPECT_NE(std::string(error.what()).find("(ttl_ms, owner_id)"), std::string::npos)
        << error.what();
  }
  EXPECT_NO_THROW(statements.get("SELECT owner_id, ttl_ms FROM lock_session", kOwnerTtl.list()));
}

}  // namespace
}  // namespace dlock::store::sqlite
