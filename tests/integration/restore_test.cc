// Tokens never rewind after a restore (ADR-0010), per backend, end to end with the backend's own
// backup tools: issue tokens, take a backup, issue more (the highest is `before_restore`),
// restore the backup, open the store again, acquire: the token must exceed `before_restore`.
// Negative controls: the mutation rows in scripts/mutations-restore.table (the floor not
// applied) and, for etcd, the same restore without the raise step, which hands out a token
// already issued.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "dlock/errors.h"
#include "dlock/lock_store.h"
#include "store/sqlite/sqlite_store.h"
#include "support/subprocess.h"
#ifdef DLOCK_WITH_PG
#include <libpq-fe.h>

#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#endif

namespace dlock {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace fs = std::filesystem;

// Acquires and releases `count` keys; returns the highest token granted.
FencingToken issue_tokens(Backend& store, int count) {
  const auto session = store.open_session("restore-test", seconds(60));
  FencingToken highest = 0;
  for (int i = 0; i < count; ++i) {
    const std::string key = "restore/key-" + std::to_string(i);
    const auto handle = store.try_grant(key, session.owner_id, session.session_id,
                                        GrantRequest::exclusive(seconds(30)));
    if (!handle) throw std::runtime_error("key " + key + " unexpectedly held");
    EXPECT_GT(handle->fencing_token, highest) << "tokens must increase";
    highest = handle->fencing_token;
    store.delete_if_owner(
        GrantRef{key, session.owner_id, session.session_id, handle->fencing_token});
  }
  store.close_session(session.session_id);
  return highest;
}

FencingToken one_grant(Backend& store) {
  const auto session = store.open_session("restore-test-after", seconds(60));
  const auto handle = store.try_grant("restore/after", session.owner_id, session.session_id,
                                      GrantRequest::exclusive(seconds(30)));
  if (!handle) throw std::runtime_error("restore/after unexpectedly held");
  store.delete_if_owner(handle->ref());
  return handle->fencing_token;
}

// ---------------------------------------------------------------------------------------------
// SQLite: the file copied back (or a `.backup` of it restored) while dlockd is stopped.

class SqliteRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("dlock-restore-sqlite");
    db_ = dir_ + "/dlock.db";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  BackendPtr open() {
    return store::sqlite::make_sqlite_store({db_, TtlLimits{}, milliseconds(5000)});
  }

  // The database files of a closed store, as a file-level backup copies them.
  void copy_files(const std::string& from, const std::string& to) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::error_code ignored;
      fs::remove(to + suffix, ignored);
      if (fs::exists(from + suffix)) fs::copy_file(from + suffix, to + suffix);
    }
  }

  void run_test(bool use_backup_command) {
    const std::string backup = dir_ + "/backup.db";
    {
      auto store = open();
      issue_tokens(*store, 5);
    }
    if (use_backup_command) {
      testing::SubprocessOptions options;
      options.argv = {"/usr/bin/sqlite3", db_, ".backup " + backup};
      ASSERT_EQ(testing::run_command(options, seconds(30)), 0) << "sqlite3 .backup failed";
    } else {
      copy_files(db_, backup);
    }
    FencingToken before_restore = 0;
    {
      auto store = open();
      before_restore = issue_tokens(*store, 5);
    }
    copy_files(backup, db_);  // the restore, while no store has the file open
    for (const char* suffix : {"-wal", "-shm"}) {
      if (!fs::exists(backup + suffix)) fs::remove(db_ + suffix);
    }
    auto store = open();
    const FencingToken after_restore = one_grant(*store);
    EXPECT_GT(after_restore, before_restore)
        << "a token issued before the restore was issued again after it";
  }

  std::string dir_;
  std::string db_;
};

TEST_F(SqliteRestoreTest, FileCopyRestoreNeverReissuesAToken) { run_test(false); }

TEST_F(SqliteRestoreTest, BackupCommandRestoreNeverReissuesAToken) { run_test(true); }

// The floor is raised, never lowered: reopening a store whose counter is ahead of the clock
// keeps the counter.
TEST_F(SqliteRestoreTest, ReopeningNeverLowersTheCounter) {
  FencingToken before = 0;
  {
    auto store = open();
    before = issue_tokens(*store, 3);
  }
  {
    testing::SubprocessOptions options;
    options.argv = {"/usr/bin/sqlite3", db_,
                    "UPDATE fencing_token_seq SET value = 9000000000000000 WHERE id = 1"};
    ASSERT_EQ(testing::run_command(options, seconds(30)), 0);
  }
  auto store = open();
  const auto after = one_grant(*store);
  EXPECT_GT(after, before);
  EXPECT_EQ(after, FencingToken{9000000000000001});
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: pg_dump -Fc, then the database dropped, created again and pg_restore'd.

#ifdef DLOCK_WITH_PG

std::string pg_bin_dir() {
  if (const char* dir = std::getenv("DLOCK_PG_BIN_DIR")) return dir;
  for (const char* version : {"15", "16", "17", "14", "13"}) {
    const std::string dir = std::string("/usr/lib/postgresql/") + version + "/bin";
    if (fs::exists(dir + "/pg_dump")) return dir;
  }
  throw std::runtime_error("pg_dump not found");
}

class PgRestoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new testing::PostgresServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    dir_ = testing::make_temp_dir("dlock-restore-pg");
    database_ = "restore_" + std::to_string(counter_++);
    server_->ensure_database(database_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  BackendPtr open() {
    store::pg::PgStoreOptions options;
    options.url = server_->url(database_);
    options.pool_size = 2;
    return store::pg::make_pg_store(options);
  }

  void run(const std::vector<std::string>& argv) {
    testing::SubprocessOptions options;
    options.argv = argv;
    options.log_path = dir_ + "/tools.log";
    ASSERT_EQ(testing::run_command(options, seconds(120)), 0) << argv.front() << " failed";
  }

  void admin(const std::string& sql) {
    PGconn* conn = PQconnectdb(server_->url().c_str());
    ASSERT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
    PGresult* result = PQexec(conn, sql.c_str());
    const auto status = PQresultStatus(result);
    const std::string message = PQerrorMessage(conn);
    PQclear(result);
    PQfinish(conn);
    ASSERT_EQ(status, PGRES_COMMAND_OK) << sql << ": " << message;
  }

  void dump(const std::string& file) {
    run({pg_bin_dir() + "/pg_dump", "-Fc", "-f", file, server_->url(database_)});
  }

  // Drops the database (breaking any connection to it, as a restore does), creates it again
  // and pg_restores the dump into it.
  void restore(const std::string& file) {
    admin("DROP DATABASE \"" + database_ + "\" WITH (FORCE)");
    admin("CREATE DATABASE \"" + database_ + "\"");
    run({pg_bin_dir() + "/pg_restore", "--exit-on-error", "-d", server_->url(database_), file});
  }

  static testing::PostgresServer* server_;
  static inline int counter_ = 0;
  std::string dir_;
  std::string database_;
};

testing::PostgresServer* PgRestoreTest::server_ = nullptr;

TEST_F(PgRestoreTest, DumpRestoreNeverReissuesAToken) {
  const std::string backup = dir_ + "/backup.dump";
  {
    auto store = open();
    issue_tokens(*store, 5);
  }
  dump(backup);
  FencingToken before_restore = 0;
  {
    auto store = open();
    before_restore = issue_tokens(*store, 5);
  }
  restore(backup);
  auto store = open();
  const FencingToken after_restore = one_grant(*store);
  EXPECT_GT(after_restore, before_restore)
      << "a token issued before the restore was issued again after it";
}

// The restore happens under a running store: its connections are broken by the restore, and
// every new pooled connection raises the floor before its first use.
TEST_F(PgRestoreTest, RestoreUnderARunningStoreNeverReissuesAToken) {
  const std::string backup = dir_ + "/backup.dump";
  auto store = open();
  issue_tokens(*store, 5);
  dump(backup);
  const FencingToken before_restore = issue_tokens(*store, 5);
  restore(backup);
  FencingToken after_restore = 0;
  const bool granted = testing::wait_for(
      [&] {
        try {
          after_restore = one_grant(*store);
          return true;
        } catch (const UnavailableError&) {
          return false;  // a connection the restore broke (also UnknownOutcomeError), dropped
        }
      },
      seconds(30));
  ASSERT_TRUE(granted);
  EXPECT_GT(after_restore, before_restore)
      << "a token issued before the restore was issued again after it";
}

// A base backup (pg_basebackup) restored: the server stops, its data directory is replaced by
// the backup and it starts again, recovering to the end of the backup. The store keeps running
// through it; its broken connections are replaced, and each new one raises the floor.
TEST_F(PgRestoreTest, BaseBackupRestoreUnderARunningStoreNeverReissuesAToken) {
  auto store = open();
  issue_tokens(*store, 5);
  server_->base_backup(dir_ + "/base");
  const FencingToken before_restore = issue_tokens(*store, 5);
  server_->restore_base_backup(dir_ + "/base");
  FencingToken after_restore = 0;
  const bool granted = testing::wait_for(
      [&] {
        try {
          after_restore = one_grant(*store);
          return true;
        } catch (const UnavailableError&) {
          return false;  // a connection the restart broke, dropped by the pool
        }
      },
      seconds(30));
  ASSERT_TRUE(granted);
  EXPECT_GT(after_restore, before_restore)
      << "a token issued before the restore was issued again after it";
}

#endif  // DLOCK_WITH_PG

// The one-shot's argument is checked before anything connects: exit 64 (usage) for a target
// that is not a positive revision.
TEST(DlockdRaiseRevisionFlag, RefusesATargetThatIsNotAPositiveRevision) {
  for (const char* target : {"0", "-5", "12x", ""}) {
    testing::SubprocessOptions options;
    options.argv = {DLOCK_DLOCKD_PATH, "--etcd-raise-revision-to", target};
    options.log_path = "/dev/null";
    EXPECT_EQ(testing::run_command(options, seconds(30)), 64) << "target '" << target << "'";
  }
}

// ---------------------------------------------------------------------------------------------
// etcd: `etcdctl snapshot save`, then `etcdctl snapshot restore` into a new data directory and
// etcd started on it. The revision (the token) goes back; `dlockd --etcd-raise-revision-to N`
// is the documented step that makes every later token greater than N.

#ifdef DLOCK_WITH_ETCD

class EtcdRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("dlock-restore-etcd");
    etcd_ = std::make_unique<testing::EtcdCluster>(1);
  }
  void TearDown() override {
    etcd_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  BackendPtr open() {
    return store::etcd::make_etcd_store({etcd_->endpoints(), milliseconds(2000), TtlLimits{}, {}});
  }

  void snapshot_save(const std::string& file) {
    testing::SubprocessOptions options;
    options.argv = {"/usr/bin/etcdctl", "--endpoints", etcd_->endpoint(0),
                    "snapshot",         "save",        file};
    options.env = {"ETCDCTL_API=3"};
    options.log_path = dir_ + "/etcdctl.log";
    ASSERT_EQ(testing::run_command(options, seconds(60)), 0) << "etcdctl snapshot save failed";
  }

  // Backs up, issues more tokens, restores; returns the highest token issued before the
  // restore.
  FencingToken backup_issue_restore() {
    const std::string snapshot = dir_ + "/snapshot.db";
    {
      auto store = open();
      issue_tokens(*store, 5);
    }
    snapshot_save(snapshot);
    FencingToken before_restore = 0;
    {
      auto store = open();
      before_restore = issue_tokens(*store, 20);
    }
    etcd_->restore_snapshot(snapshot);
    return before_restore;
  }

  int raise_revision_to(FencingToken target) {
    testing::SubprocessOptions options;
    options.argv = {DLOCK_DLOCKD_PATH, "--etcd-endpoints", etcd_->endpoints(),
                    "--etcd-raise-revision-to", std::to_string(target)};
    options.log_path = dir_ + "/raise.log";
    return testing::run_command(options, seconds(120));
  }

  std::string dir_;
  std::unique_ptr<testing::EtcdCluster> etcd_;
};

// Negative control for the procedure: the restore alone rewinds the token.
TEST_F(EtcdRestoreTest, RestoreWithoutTheRaiseStepReissuesATokenNegativeControl) {
  const FencingToken before_restore = backup_issue_restore();
  auto store = open();
  EXPECT_LE(one_grant(*store), before_restore)
      << "etcd's snapshot restore no longer rewinds the revision: revisit ADR-0010";
}

TEST_F(EtcdRestoreTest, RaiseRevisionAfterRestoreNeverReissuesAToken) {
  const FencingToken before_restore = backup_issue_restore();
  ASSERT_LT(static_cast<FencingToken>(etcd_->raw().current_revision()), before_restore)
      << "the restore did not rewind the revision: the test proves nothing";
  ASSERT_EQ(raise_revision_to(before_restore), 0) << "see " << dir_ << "/raise.log";
  EXPECT_GE(static_cast<FencingToken>(etcd_->raw().current_revision()), before_restore);
  auto store = open();
  EXPECT_GT(one_grant(*store), before_restore)
      << "a token issued before the restore was issued again after it";
  // Idempotent: a second run at the same target writes nothing.
  const auto revision = etcd_->raw().current_revision();
  ASSERT_EQ(raise_revision_to(before_restore), 0);
  EXPECT_EQ(etcd_->raw().current_revision(), revision);
}

#endif  // DLOCK_WITH_ETCD

}  // namespace
}  // namespace dlock
