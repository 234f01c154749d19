#pragma once

// RAII over one libpq connection, with the project's error mapping (pg_connection.cc):
//   40001 / 40P01 / 55P03 (serialization, deadlock, lock not available) -> ContentionError
//   cannot connect (refused, timed out)                                 -> UnavailableError
//   connection found broken during a call (libpq cannot tell whether the
//   statement reached the server, so it may have committed)             -> UnknownOutcomeError
//   57014 statement timeout, 57P0x shutdown, 08xxx, 53xxx               -> UnavailableError
//   DLS01 (the session trigger)                                         -> SessionNotFoundError

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace dlock::store::pg {

struct PreparedStatement {
  const char* name;
  const char* sql;
};

class PgResult {
 public:
  explicit PgResult(pg_result* result) : result_(result) {}
  PgResult(PgResult&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  PgResult& operator=(PgResult&&) = delete;
  PgResult(const PgResult&) = delete;
  ~PgResult();

  int rows() const;
  std::string text(int row, int column) const;
  std::int64_t int64(int row, int column) const;
  bool boolean(int row, int column) const;

 private:
  pg_result* result_;
};

class PgConnection {
 public:
  // Connects and prepares `statements`. Throws UnavailableError when the server cannot be
  // reached within `call_timeout`.
  PgConnection(const std::string& url, std::chrono::milliseconds call_timeout,
               const std::vector<PreparedStatement>& statements);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  PgResult execute(const char* statement_name, std::initializer_list<std::string_view> params);
  // A simple (unprepared, possibly multi-statement) query, for migrations and admin.
  PgResult run(const std::string& sql);
  // False once the connection is known to be broken; the pool then discards it.
  bool healthy() const;

 private:
  PgResult check(pg_result* result, const char* what);

  pg_conn* conn_ = nullptr;
};

}  // namespace dlock::store::pg
