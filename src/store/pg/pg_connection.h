#pragma once

// RAII over one libpq connection, with the project's error mapping (pg_connection.cc):
//   40001 / 40P01 / 55P03 (serialization, deadlock, lock not available) -> ContentionError
//   cannot connect (refused, timed out)                                 -> UnavailableError
//   connection found broken during a call (libpq cannot tell whether the
//   statement reached the server, so it may have committed)             -> UnknownOutcomeError
//   57014 statement timeout, 57P0x shutdown, 08xxx, 53xxx               -> UnavailableError
//   DLS01 (the session trigger)                                         -> SessionNotFoundError
//   DLS02 (a semaphore's limit disagrees, migrations/004_holder_sets.sql) -> ConflictError("limit")

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace dlock::store::pg {

struct PreparedStatement {
  const char* name;
  const char* sql;
  // The names of its result columns in order (util::SqlColumns::list), compared with the
  // prepared statement's when the connection prepares it; std::nullopt: not compared.
  std::optional<std::span<const std::string_view>> columns = std::nullopt;
};

// A point on the steady clock by which a call is to be answered (PgConnection::execute_pipelined).
using Deadline = std::chrono::steady_clock::time_point;

// One call of a prepared statement, for PgConnection::execute_pipelined.
struct PreparedCall {
  const char* name;
  const std::vector<std::string>* params;
};

// A statement's result, or some of its rows (slice): copies share the one libpq result.
class PgResult {
 public:
  explicit PgResult(pg_result* result);

  // Rows [first, first + count) of this result, as a result of their own (row 0 is `first`).
  PgResult slice(int first, int count) const;

  int rows() const;
  std::string text(int row, int column) const;
  std::int64_t int64(int row, int column) const;
  bool boolean(int row, int column) const;
  bool is_null(int row, int column) const;
  // The names of the result's columns, in order.
  std::vector<std::string> column_names() const;

 private:
  std::shared_ptr<pg_result> result_;
  int first_ = 0;
  int count_ = -1;  // -1: every row
};

class PgConnection {
 public:
  // Connects and prepares `statements`. Throws UnavailableError when the server cannot be
  // reached within `call_timeout`, InternalError when a statement's result columns are not the
  // ones it declares.
  PgConnection(const std::string& url, std::chrono::milliseconds call_timeout,
               const std::vector<PreparedStatement>& statements);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  PgResult execute(const char* statement_name, std::initializer_list<std::string_view> params);
  PgResult execute(const char* statement_name, const std::vector<std::string>& params);
  // Runs `calls` in one transaction in libpq's pipeline mode: BEGIN, every call, COMMIT and one
  // Sync go out together (one round trip, one WAL flush; docs/adr/0019-pg-batched-writes.md).
  // Returns their results once the COMMIT succeeded, or std::nullopt with `*failed` set to the
  // first call that failed (and `*failure`, when given, to that call's own error, as execute()
  // would throw it): then the transaction is rolled back and nothing of it is written.
  // Throws as execute() when the transaction itself fails (BEGIN, COMMIT, the connection;
  // UnknownOutcomeError when the connection broke, since the COMMIT may have happened).
  // `deadline`: when the answers are not in by then, the statement running is cancelled (libpq's
  // cancel request), which ends the transaction as that statement's failure (57014, so
  // UnavailableError), or not at all if its COMMIT came first. statement_timeout bounds each
  // statement, not the transaction, so only this bounds a pipeline of many. The answers are then
  // still waited for (another cancel after each further call timeout): a server that takes no
  // cancel (stopped) is the case of /readyz's wedge check (http_server.h), as for execute().
  std::optional<std::vector<PgResult>> execute_pipelined(const std::vector<PreparedCall>& calls,
                                                         std::size_t* failed,
                                                         Deadline deadline = Deadline::max(),
                                                         std::exception_ptr* failure = nullptr);
  // A simple (unprepared, possibly multi-statement) query, for migrations and admin.
  PgResult run(const std::string& sql);
  // False once the connection is known to be broken; the pool then discards it.
  bool healthy() const;
  // The store's call timeout this connection was opened with (statement_timeout and more).
  std::chrono::milliseconds call_timeout() const { return call_timeout_; }

 private:
  PgResult check(pg_result* result, const char* what);
  [[noreturn]] void throw_broken(const char* what);
  // PQgetResult, waiting for the server's answer no later than `*deadline` before cancelling
  // the statement running; `*deadline` then moves on by one call timeout, for another cancel.
  pg_result* next_result(Deadline* deadline);

  const std::chrono::milliseconds call_timeout_;
  pg_conn* conn_ = nullptr;
  bool broken_ = false;  // a pipeline left in an unknown state: the pool discards the connection
};

}  // namespace dlock::store::pg
