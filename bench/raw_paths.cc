#include "raw_paths.h"

#include <sqlite3.h>

#include <memory>
#include <mutex>
#include <stdexcept>

#include "store/sqlite/sqlite_statements.h"  // the SQL text only, as for pg below

#ifdef DLOCK_WITH_PG
#include <libpq-fe.h>

#include "store/pg/pg_statements.h"  // the SQL text only; the store itself is not used here
#endif

namespace dlock::bench {

namespace {
constexpr const char* kTtlMs = "30000";
}

#ifdef DLOCK_WITH_PG
namespace {

struct PgConn {
  explicit PgConn(const std::string& url) : conn(PQconnectdb(url.c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) {
      const std::string message = PQerrorMessage(conn);
      PQfinish(conn);
      throw std::runtime_error("libpq connect: " + message);
    }
  }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  ~PgConn() { PQfinish(conn); }

  void prepare(const char* name, const char* sql, int params) {
    PGresult* r = PQprepare(conn, name, sql, params, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string message = PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) throw std::runtime_error(std::string("prepare ") + name + ": " + message);
  }
  // Executes a prepared statement; returns the number of rows (-1 on error) and the first
  // column of the first row in `first`.
  int exec(const char* name, std::vector<const char*> params, std::string* first = nullptr) {
    PGresult* r = PQexecPrepared(conn, name, static_cast<int>(params.size()), params.data(),
                                 nullptr, nullptr, 0);
    int rows = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK) {
      rows = PQntuples(r);
      if (first != nullptr && rows > 0) *first = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return rows;
  }

  PGconn* conn;
};

std::unique_ptr<PgConn> raw_connection(const std::string& url) {
  auto c = std::make_unique<PgConn>(url);
  c->prepare("acq", dlock::store::pg::sql::kAcquire, 4);
  c->prepare("rel", dlock::store::pg::sql::kDeleteIfOwner, 4);
  return c;
}

}  // namespace

Measurement pg_raw_pairs(const std::string& url, const std::vector<RawSession>& sessions,
                         int clients, std::chrono::milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        auto conn = std::shared_ptr<PgConn>(raw_connection(url));
        const auto& s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        const std::string key = "default/bench-raw-" + std::to_string(i);
        return [conn, s, key](ClientStats& out) {
          std::string token;
          const auto t0 = Clock::now();
          const int got = conn->exec(
              "acq", {key.c_str(), s.owner_id.c_str(), s.session_id.c_str(), kTtlMs}, &token);
          const auto t1 = Clock::now();
          if (got != 1) {
            ++out.errors;
            return;
          }
          const int released = conn->exec(
              "rel", {key.c_str(), s.owner_id.c_str(), s.session_id.c_str(), token.c_str()});
          const auto t2 = Clock::now();
          if (released != 1) ++out.errors;
          ++out.ops;
          out.acquire_ms.push_back(ms_between(t0, t1));
          out.op_ms.push_back(ms_between(t0, t2));
        };
      },
      stats);
  return summarize("pg", "raw", "pairs", clients, seconds, stats);
}

Measurement pg_advisory_pairs(const std::string& url, int clients,
                              std::chrono::milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        auto conn = std::make_shared<PgConn>(url);
        conn->prepare("lock", "SELECT pg_advisory_lock($1::bigint)", 1);
        conn->prepare("unlock", "SELECT pg_advisory_unlock($1::bigint)", 1);
        const std::string id = std::to_string(7000000 + i);
        return [conn, id](ClientStats& out) {
          const auto t0 = Clock::now();
          const int got = conn->exec("lock", {id.c_str()});
          const auto t1 = Clock::now();
          const int released = conn->exec("unlock", {id.c_str()});
          const auto t2 = Clock::now();
          if (got != 1 || released != 1) {
            ++out.errors;
            return;
          }
          ++out.ops;
          out.acquire_ms.push_back(ms_between(t0, t1));
          out.op_ms.push_back(ms_between(t0, t2));
        };
      },
      stats);
  return summarize("pg", "anchor", "pairs", clients, seconds, stats);
}

Measurement pg_advisory_hot(const std::string& url, int clients,
                            std::chrono::milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int) {
        auto conn = std::make_shared<PgConn>(url);
        conn->prepare("lock", "SELECT pg_advisory_lock(6999999)", 0);
        conn->prepare("unlock", "SELECT pg_advisory_unlock(6999999)", 0);
        return [conn](ClientStats& out) {
          const auto t0 = Clock::now();
          ++out.attempts;
          if (conn->exec("lock", {}) != 1) {
            ++out.errors;
            return;
          }
          ++out.ops;
          out.op_ms.push_back(ms_between(t0, Clock::now()));
          if (conn->exec("unlock", {}) != 1) ++out.errors;
        };
      },
      stats);
  return summarize("pg", "anchor", "hot", clients, seconds, stats);
}

Measurement pg_raw_hot(const std::string& url, const std::vector<RawSession>& sessions, int clients,
                       std::chrono::milliseconds duration) {
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        auto conn = std::shared_ptr<PgConn>(raw_connection(url));
        const auto& s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        auto started = std::make_shared<std::optional<Clock::time_point>>();
        return [conn, s, started](ClientStats& out) {
          static const std::string key = "default/bench-raw-hot";
          if (!*started) *started = Clock::now();
          std::string token;
          ++out.attempts;
          const int got = conn->exec(
              "acq", {key.c_str(), s.owner_id.c_str(), s.session_id.c_str(), kTtlMs}, &token);
          if (got < 0) ++out.errors;
          if (got != 1) return;
          ++out.ops;
          out.op_ms.push_back(ms_between(**started, Clock::now()));  // wait for this grant
          conn->exec("rel", {key.c_str(), s.owner_id.c_str(), s.session_id.c_str(), token.c_str()});
          *started = Clock::now();
        };
      },
      stats);
  return summarize("pg", "raw", "hot", clients, seconds, stats);
}

void pg_vacuum(const std::string& url) {
  PgConn conn(url);
  for (const char* sql : {"VACUUM locks", "VACUUM lock_session"}) PQclear(PQexec(conn.conn, sql));
}

long long pg_token_sequence(const std::string& url) {
  PgConn conn(url);
  PGresult* r = PQexec(conn.conn, "SELECT last_value FROM fencing_token_seq");
  long long value = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    value = std::stoll(PQgetvalue(r, 0, 0));
  }
  PQclear(r);
  return value;
}
#endif

// ---- sqlite: one shared connection, serialized like the store (SQLite has one writer) ----

namespace {

class SqliteRaw {
 public:
  explicit SqliteRaw(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      throw std::runtime_error("sqlite open " + path);
    }
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    next_ = prepare(store::sqlite::sql::kNextToken);
    acquire_ = prepare(store::sqlite::sql::kAcquire);
    release_ = prepare(store::sqlite::sql::kDeleteIfOwner);
    begin_ = prepare("BEGIN IMMEDIATE");
    commit_ = prepare("COMMIT");
    rollback_ = prepare("ROLLBACK");
  }
  SqliteRaw(const SqliteRaw&) = delete;
  SqliteRaw& operator=(const SqliteRaw&) = delete;
  ~SqliteRaw() {
    for (auto* s : {next_, acquire_, release_, begin_, commit_, rollback_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  // The store's try_grant: token from the durable counter, then the upsert, one transaction.
  std::optional<std::int64_t> acquire(const std::string& key, const RawSession& s) {
    std::lock_guard lock(mutex_);
    run(begin_);
    sqlite3_step(next_);
    const std::int64_t token = sqlite3_column_int64(next_, 0);
    sqlite3_reset(next_);
    bind_text(acquire_, 1, key);
    bind_text(acquire_, 2, s.owner_id);
    bind_text(acquire_, 3, s.session_id);
    sqlite3_bind_int64(acquire_, 4, token);
    sqlite3_bind_int64(acquire_, 5, 30000);
    const bool granted = sqlite3_step(acquire_) == SQLITE_ROW;
    sqlite3_reset(acquire_);
    run(granted ? commit_ : rollback_);
    if (!granted) return std::nullopt;
    return token;
  }

  bool release(const std::string& key, const RawSession& s, std::int64_t token) {
    std::lock_guard lock(mutex_);
    bind_text(release_, 1, key);
    bind_text(release_, 2, s.owner_id);
    bind_text(release_, 3, s.session_id);
    sqlite3_bind_int64(release_, 4, token);
    const bool released = sqlite3_step(release_) == SQLITE_ROW;
    sqlite3_reset(release_);
    return released;
  }

 private:
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
    }
    return s;
  }
  void exec(const char* sql) { sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }
  static void run(sqlite3_stmt* s) {
    sqlite3_step(s);
    sqlite3_reset(s);
  }
  static void bind_text(sqlite3_stmt* s, int index, const std::string& v) {
    sqlite3_bind_text(s, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }

  std::mutex mutex_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt *next_ = nullptr, *acquire_ = nullptr, *release_ = nullptr;
  sqlite3_stmt *begin_ = nullptr, *commit_ = nullptr, *rollback_ = nullptr;
};

}  // namespace

void sqlite_presize_wal(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("sqlite open " + path);
  }
  for (const char* sql :
       {"PRAGMA journal_mode=WAL", "CREATE TABLE IF NOT EXISTS bench_wal_presize (b BLOB)",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) "
        "INSERT INTO bench_wal_presize SELECT randomblob(4000) FROM n",
        "DROP TABLE bench_wal_presize", "PRAGMA wal_checkpoint(RESTART)"}) {
    sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  }
  sqlite3_close(db);
}

Measurement sqlite_raw_pairs(const std::string& path, const std::vector<RawSession>& sessions,
                             int clients, std::chrono::milliseconds duration) {
  SqliteRaw db(path);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        const auto& s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        const std::string key = "default/bench-raw-" + std::to_string(i);
        return [&db, s, key](ClientStats& out) {
          const auto t0 = Clock::now();
          const auto token = db.acquire(key, s);
          const auto t1 = Clock::now();
          if (!token) {
            ++out.errors;
            return;
          }
          if (!db.release(key, s, *token)) ++out.errors;
          const auto t2 = Clock::now();
          ++out.ops;
          out.acquire_ms.push_back(ms_between(t0, t1));
          out.op_ms.push_back(ms_between(t0, t2));
        };
      },
      stats);
  return summarize("sqlite", "raw", "pairs", clients, seconds, stats);
}

Measurement sqlite_raw_hot(const std::string& path, const std::vector<RawSession>& sessions,
                           int clients, std::chrono::milliseconds duration) {
  SqliteRaw db(path);
  std::vector<ClientStats> stats;
  const double seconds = drive_threads(
      clients, duration,
      [&](int i) {
        const auto& s = sessions[static_cast<std::size_t>(i) % sessions.size()];
        auto started = std::make_shared<std::optional<Clock::time_point>>();
        return [&db, s, started](ClientStats& out) {
          static const std::string key = "default/bench-raw-hot";
          if (!*started) *started = Clock::now();
          ++out.attempts;
          const auto token = db.acquire(key, s);
          if (!token) return;
          ++out.ops;
          out.op_ms.push_back(ms_between(**started, Clock::now()));
          db.release(key, s, *token);
          *started = Clock::now();
        };
      },
      stats);
  return summarize("sqlite", "raw", "hot", clients, seconds, stats);
}

}  // namespace dlock::bench
