// The explicit table of conformance harnesses, one per backend this binary was built with.

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include "store/sqlite/sqlite_store.h"
#include "support/backend_harness.h"
#include "support/subprocess.h"
#ifdef DLOCK_WITH_PG
#include <libpq-fe.h>

#include "store/pg/pg_store.h"
#include "support/postgres_server.h"
#endif
#ifdef DLOCK_WITH_ETCD
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_store.h"
#include "support/etcd_server.h"
#endif

namespace dlock::testing {
namespace {

// The embedded store over one file. An outage is another process holding the write lock.
class SqliteHarness final : public BackendHarness {
 public:
  SqliteHarness() : dir_(make_temp_dir("dlock-sqlite")), path_(dir_ + "/dlock.db") {}
  ~SqliteHarness() override {
    end_outage();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  BackendPtr make_backend(const TtlLimits& limits) override {
    // A short busy timeout keeps the outage test quick; production uses the call timeout.
    return store::sqlite::make_sqlite_store({path_, limits, std::chrono::milliseconds(300)});
  }

  void begin_outage() override {
    sqlite3_open(path_.c_str(), &blocker_);
    if (sqlite3_exec(blocker_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) != SQLITE_OK) {
      throw std::runtime_error("could not take the sqlite write lock");
    }
  }

  void end_outage() override {
    if (blocker_ == nullptr) return;
    sqlite3_exec(blocker_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(blocker_);
    blocker_ = nullptr;
  }

  void raw_delete(std::string_view key) override {
    sqlite3* db = nullptr;
    sqlite3_open(path_.c_str(), &db);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "DELETE FROM locks WHERE key = ?1", -1, &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    if (rc != SQLITE_DONE) throw std::runtime_error("raw delete failed");
  }

 private:
  std::string dir_;
  std::string path_;
  sqlite3* blocker_ = nullptr;
};

#ifdef DLOCK_WITH_PG
// A real PostgreSQL process for the whole binary. An outage is an immediate shutdown.
class PgHarness final : public BackendHarness {
 public:
  PgHarness() { server_.ensure_database("dlock_conformance"); }

  BackendPtr make_backend(const TtlLimits& limits) override {
    return store::pg::make_pg_store(
        {server_.url("dlock_conformance"), 8, std::chrono::milliseconds(3000), limits});
  }

  void begin_outage() override { server_.crash(); }
  void end_outage() override {
    if (!server_.running()) server_.start();
  }

  void raw_delete(std::string_view key) override {
    PGconn* conn = PQconnectdb(server_.url("dlock_conformance").c_str());
    const std::string text(key);
    const char* params[] = {text.c_str()};
    PGresult* result = PQexecParams(conn, "DELETE FROM locks WHERE key = $1", 1, nullptr, params,
                                    nullptr, nullptr, 0);
    const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    PQclear(result);
    PQfinish(conn);
    if (!ok) throw std::runtime_error("raw delete failed");
  }

  PostgresServer& server() { return server_; }

 private:
  PostgresServer server_;
};
#endif

#ifdef DLOCK_WITH_ETCD
// A real single-member etcd for the whole binary. An outage is kill -9 of the member.
class EtcdHarness final : public BackendHarness {
 public:
  BackendPtr make_backend(const TtlLimits& limits) override {
    return store::etcd::make_etcd_store(
        {cluster_.endpoints(), std::chrono::milliseconds(3000), limits, {}});
  }

  void begin_outage() override { cluster_.kill(0); }
  void end_outage() override {
    if (!cluster_.running(0)) cluster_.start(0);
  }

  void raw_delete(std::string_view key) override {
    cluster_.raw().remove(store::etcd::format_lock_key(key));
  }

 private:
  EtcdCluster cluster_{1};
};
#endif

std::unique_ptr<BackendHarness> make_harness(std::string_view backend) {
  if (backend == "sqlite") return std::make_unique<SqliteHarness>();
#ifdef DLOCK_WITH_PG
  if (backend == "pg") return std::make_unique<PgHarness>();
#endif
#ifdef DLOCK_WITH_ETCD
  if (backend == "etcd") return std::make_unique<EtcdHarness>();
#endif
  throw std::invalid_argument("no conformance harness for backend " + std::string(backend));
}

}  // namespace

std::vector<std::string> conformance_backends() {
  std::vector<std::string> backends = {"sqlite"};
#ifdef DLOCK_WITH_PG
  backends.push_back("pg");
#endif
#ifdef DLOCK_WITH_ETCD
  backends.push_back("etcd");
#endif
  return backends;
}

BackendHarness& harness_for(std::string_view backend) {
  // One harness (and database process) per backend for the whole binary, torn down at exit.
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<BackendHarness>, std::less<>> harnesses;
  std::lock_guard lock(mutex);
  auto found = harnesses.find(backend);
  if (found == harnesses.end()) {
    found = harnesses.emplace(std::string(backend), make_harness(backend)).first;
  }
  return *found->second;
}

}  // namespace dlock::testing
