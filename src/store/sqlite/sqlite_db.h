#pragma once

// Thin RAII layer over libsqlite3. Every failure becomes a dlock error (see map_sqlite_error).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

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

class Database {
 public:
  // Opens (creating if needed) the database file at `path`.
  Database(const std::string& path, int busy_timeout_ms);
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

}  // namespace dlock::store::sqlite
