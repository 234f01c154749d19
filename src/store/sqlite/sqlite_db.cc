#include "store/sqlite/sqlite_db.h"

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "dlock/errors.h"
#include "util/sql_columns.h"

namespace dlock::store::sqlite {

void throw_sqlite_error(sqlite3* db, int rc, std::string_view what) {
  const std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string message = "sqlite: " + std::string(what) + ": " + detail;
  // The session trigger (migrations/001_initial.sql) refuses grants to dead sessions.
  if ((rc & 0xFF) == SQLITE_CONSTRAINT &&
      detail.find("dlock_session_not_found") != std::string::npos) {
    throw SessionNotFoundError("session not found or expired");
  }
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      // busy_timeout already waited: another process holds the database.
      throw UnavailableError(message + " (database locked by another connection)");
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
      throw UnavailableError(message);
    default:
      throw InternalError(message);
  }
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite_error(db_, rc, "prepare");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                                   SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) throw_sqlite_error(db_, rc, "bind");
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) throw_sqlite_error(db_, rc, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite_error(db_, rc, "step");
}

std::int64_t Statement::column_int64(int index) const { return sqlite3_column_int64(stmt_, index); }

std::string Statement::column_text(int index) const {
  const auto* text = sqlite3_column_text(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
}

std::vector<std::string> Statement::column_names() const {
  std::vector<std::string> names;
  const int count = sqlite3_column_count(stmt_);
  names.reserve(static_cast<std::size_t>(count));
  for (int index = 0; index < count; ++index) names.emplace_back(sqlite3_column_name(stmt_, index));
  return names;
}

void Statement::check_columns(std::span<const std::string_view> columns) const {
  const auto mismatch = util::column_mismatch(columns, column_names());
  if (!mismatch.empty()) throw InternalError("sqlite: " + mismatch + ": " + sqlite3_sql(stmt_));
}

std::optional<std::string> Statement::column_optional_text(int index) const {
  if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nullopt;
  return column_text(index);
}

void Statement::reset() noexcept {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

namespace {

// The Unix epoch as a Julian day number in milliseconds (xCurrentTimeInt64's unit).
constexpr std::int64_t kUnixEpochJulianMs = 210866760000000;

}  // namespace

// The VFS first, so that the sqlite3_vfs* SQLite passes back is also this. The copied VFS keeps
// the default's pAppData, which the default's own methods read.
struct ClockVfs::Registered {
  sqlite3_vfs vfs;
  const std::function<std::int64_t()>* unix_ms;
};

namespace {

// ClockVfs::PinnedNow's instant on this thread, if one lives.
thread_local std::optional<std::int64_t> t_pinned_unix_ms;

int clock_vfs_now_int64(sqlite3_vfs* vfs, sqlite3_int64* now) {
  const auto* self = reinterpret_cast<const ClockVfs::Registered*>(vfs);
  *now = kUnixEpochJulianMs + (t_pinned_unix_ms ? *t_pinned_unix_ms : (*self->unix_ms)());
  return SQLITE_OK;
}

int clock_vfs_now(sqlite3_vfs* vfs, double* now) {
  sqlite3_int64 ms = 0;
  clock_vfs_now_int64(vfs, &ms);
  *now = static_cast<double>(ms) / 86400000.0;
  return SQLITE_OK;
}

}  // namespace

ClockVfs::ClockVfs(std::function<std::int64_t()> unix_ms) : unix_ms_(std::move(unix_ms)) {
  sqlite3_initialize();
  const sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  if (base == nullptr) throw InternalError("sqlite: no default VFS");
  vfs_ = std::make_unique<Registered>(Registered{*base, &unix_ms_});
  name_ = "dlock-clock-" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
  vfs_->vfs.zName = name_.c_str();
  vfs_->vfs.xCurrentTime = clock_vfs_now;
  if (vfs_->vfs.iVersion >= 2) vfs_->vfs.xCurrentTimeInt64 = clock_vfs_now_int64;
  const int rc = sqlite3_vfs_register(&vfs_->vfs, 0);
  if (rc != SQLITE_OK) throw_sqlite_error(nullptr, rc, "register the store clock");
}

ClockVfs::~ClockVfs() { sqlite3_vfs_unregister(&vfs_->vfs); }

ClockVfs::PinnedNow::PinnedNow(std::int64_t unix_ms) { t_pinned_unix_ms = unix_ms; }

ClockVfs::PinnedNow::~PinnedNow() { t_pinned_unix_ms.reset(); }

Database::Database(const std::string& path, int busy_timeout_ms, const char* vfs) {
  const int rc = sqlite3_open_v2(
      path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    const std::string message = "sqlite: cannot open " + path + ": " +
                                (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_close(db_);
    db_ = nullptr;
    throw UnavailableError(message);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

Database::~Database() { sqlite3_close(db_); }

void Database::exec(std::string_view sql) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite_error(db_, rc, "exec");
}

WriteTransaction::WriteTransaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

WriteTransaction::~WriteTransaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTransaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

Statement& StatementCache::get(const std::string& sql,
                               std::optional<std::span<const std::string_view>> columns) {
  auto& slot = statements_[sql];
  if (!slot) {
    auto prepared = std::make_unique<Statement>(db_.handle(), sql);
    if (columns) prepared->check_columns(*columns);
    slot = std::move(prepared);
  }
  slot->reset();
  return *slot;
}

namespace {

// Bound on the writes of one group, so one transaction (and the wait of its last writer) stays
// short.
constexpr std::size_t kMaxGroup = 256;

void exec_quietly(sqlite3* db, const char* sql) {
  sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
}

}  // namespace

struct GroupCommit::Writer {
  const std::function<bool()>* work;
  std::exception_ptr error;
  bool done = false;
};

GroupCommit::GroupCommit(Database& db, std::mutex& db_mutex) : db_(db), db_mutex_(db_mutex) {}

void GroupCommit::write(const std::function<bool()>& work) {
  Writer self{&work, nullptr, false};
  std::unique_lock lock(queue_mutex_);
  queue_.push_back(&self);
  queue_changed_.wait(lock, [&] { return self.done || queue_.front() == &self; });
  if (!self.done) {
    // At the front: this writer runs the group, itself first.
    std::vector<Writer*> group;
    for (auto* writer : queue_) {
      group.push_back(writer);
      if (group.size() == kMaxGroup) break;
    }
    lock.unlock();
    run_group(group);
    lock.lock();
    for (std::size_t i = 0; i < group.size(); ++i) {
      queue_.front()->done = true;
      queue_.pop_front();
    }
    queue_changed_.notify_all();
  }
  if (self.error) std::rethrow_exception(self.error);
}

void GroupCommit::run_group(const std::vector<Writer*>& group) {
  std::lock_guard db_lock(db_mutex_);
  sqlite3* db = db_.handle();
  auto fail_all = [&](std::exception_ptr error) {
    for (auto* writer : group) writer->error = error;
  };
  try {
    db_.exec("BEGIN IMMEDIATE");
  } catch (...) {
    fail_all(std::current_exception());
    return;
  }
  const bool alone = group.size() == 1;
  for (auto* writer : group) {
    bool keep = false;
    try {
      if (!alone) db_.exec("SAVEPOINT dlock_write");
      keep = (*writer->work)();
    } catch (...) {
      writer->error = std::current_exception();
    }
    if (sqlite3_get_autocommit(db) != 0) {
      // SQLite ended the whole transaction on an error (I/O, full disk): nothing of the group
      // was written. This writer keeps its own error; the others get a retryable one.
      const auto own = writer->error;
      fail_all(std::make_exception_ptr(
          UnavailableError("sqlite: a shared write transaction was rolled back; retry")));
      if (own) writer->error = own;
      return;
    }
    if (alone) {
      if (keep && !writer->error) break;
      exec_quietly(db, "ROLLBACK");
      return;
    }
    try {
      if (!keep || writer->error) db_.exec("ROLLBACK TO dlock_write");
      db_.exec("RELEASE dlock_write");
    } catch (...) {
      exec_quietly(db, "ROLLBACK");
      fail_all(std::current_exception());
      return;
    }
  }
  try {
    db_.exec("COMMIT");
  } catch (...) {
    exec_quietly(db, "ROLLBACK");
    fail_all(std::current_exception());
  }
}

}  // namespace dlock::store::sqlite
