#pragma once

// Thin RAII layer over libsqlite3. Every failure becomes a dlock error (see map_sqlite_error).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;
struct sqlite3_vfs;

namespace dlock::store::sqlite {

// Throws the dlock error for SQLite result code `rc` on `db`, with `what` as context.
[[noreturn]] void throw_sqlite_error(sqlite3* db, int rc, std::string_view what);

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameters by 1-based index.
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, std::int64_t value);

  // Advances; true when a row is available.
  bool step();
  std::int64_t column_int64(int index) const;
  std::string column_text(int index) const;
  // std::nullopt for SQL NULL.
  std::optional<std::string> column_optional_text(int index) const;
  // The names of the result columns, in order.
  std::vector<std::string> column_names() const;
  // Throws InternalError unless the result columns are named `columns`, in that order.
  void check_columns(std::span<const std::string_view> columns) const;
  // Resets for reuse and clears bindings (also on error paths, via ResetGuard).
  void reset() noexcept;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a cached statement when the scope ends, whatever happened.
class ResetGuard {
 public:
  explicit ResetGuard(Statement& statement) : statement_(statement) {}
  ResetGuard(const ResetGuard&) = delete;
  ResetGuard& operator=(const ResetGuard&) = delete;
  ~ResetGuard() { statement_.reset(); }

 private:
  Statement& statement_;
};

// A copy of SQLite's default VFS whose clock -- what 'now' means in SQL, read once per statement
// -- is `unix_ms` (milliseconds since the Unix epoch) instead of the host's wall clock. Registered
// under a name of its own while it lives; `unix_ms` must outlive it and every database opened
// with it.
class ClockVfs {
 public:
  explicit ClockVfs(std::function<std::int64_t()> unix_ms);
  ClockVfs(const ClockVfs&) = delete;
  ClockVfs& operator=(const ClockVfs&) = delete;
  ~ClockVfs();
  const char* name() const { return name_.c_str(); }
  struct Registered;  // the VFS SQLite calls, then a pointer back to unix_ms_

  // While one lives, every statement its thread runs through any ClockVfs reads 'now' as
  // `unix_ms`: one instant for several statements of one transaction (SQLite reads 'now' once
  // per statement, so statements that each judge "ended by now" could otherwise disagree).
  class PinnedNow {
   public:
    explicit PinnedNow(std::int64_t unix_ms);
    PinnedNow(const PinnedNow&) = delete;
    PinnedNow& operator=(const PinnedNow&) = delete;
    ~PinnedNow();
  };

 private:
  std::function<std::int64_t()> unix_ms_;
  std::string name_;
  std::unique_ptr<Registered> vfs_;
};

class Database {
 public:
  // Opens (creating if needed) the database file at `path`, through the VFS named `vfs` (null:
  // SQLite's default).
  Database(const std::string& path, int busy_timeout_ms, const char* vfs = nullptr);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  sqlite3* handle() const { return db_; }
  // Runs one or more statements that return no rows.
  void exec(std::string_view sql);

 private:
  sqlite3* db_ = nullptr;
};

// A write transaction: BEGIN IMMEDIATE on construction, ROLLBACK unless commit() was called.
class WriteTransaction {
 public:
  explicit WriteTransaction(Database& db);
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  ~WriteTransaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

// Prepared statements kept for reuse, one per SQL text (preparing costs more than running the
// small statements dlock uses). Not thread-safe: used under the store's mutex.
class StatementCache {
 public:
  explicit StatementCache(Database& db) : db_(db) {}
  // The statement for `sql`, reset and unbound, prepared on first use; then its result columns are
  // checked against `columns` (Statement::check_columns) when given.
  Statement& get(const std::string& sql,
                 std::optional<std::span<const std::string_view>> columns = std::nullopt);

 private:
  Database& db_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> statements_;
};

// Group commit. Writers that arrive while a write transaction is in progress queue up; the
// first of them then runs the whole queue in one transaction (each write under a savepoint of
// its own) and one COMMIT, i.e. one fsync for the group, and every writer returns only after
// that COMMIT. A write that asks for it (returns false) or throws is rolled back to its
// savepoint alone; a failed BEGIN or COMMIT fails every write of the group, none of which is
// then durable or reported as done.
class GroupCommit {
 public:
  // `db_mutex` guards `db` (readers take it too, so they never see uncommitted writes).
  GroupCommit(Database& db, std::mutex& db_mutex);

  // Runs `work` inside a write transaction; true from `work` keeps its changes, false rolls them
  // back. Returns once they are committed; rethrows what `work` threw.
  void write(const std::function<bool()>& work);

 private:
  struct Writer;
  void run_group(const std::vector<Writer*>& group);

  Database& db_;
  std::mutex& db_mutex_;
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<Writer*> queue_;
};

}  // namespace dlock::store::sqlite
