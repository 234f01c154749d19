#include "store/pg/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <string_view>

#include "dlock/errors.h"
#include "util/sql_columns.h"

namespace dlock::store::pg {
namespace {

bool starts_with(const char* value, std::string_view prefix) {
  return value != nullptr && std::string_view(value).substr(0, prefix.size()) == prefix;
}

// `primary`: the error's primary message, when there is one.
[[noreturn]] void throw_for_state(const char* sqlstate, const std::string& message,
                                  const char* primary = nullptr) {
  const std::string_view state = sqlstate == nullptr ? "" : sqlstate;
  if (state == "DLS01") throw SessionNotFoundError("session not found or expired");
  if (state == "DLS02") throw ConflictError("limit", primary != nullptr ? primary : message);
  if (state == "40001" || state == "40P01" || state == "55P03") throw ContentionError(message);
  if (state == "57014" || starts_with(sqlstate, "57P") || starts_with(sqlstate, "08") ||
      starts_with(sqlstate, "53")) {
    throw UnavailableError(message);
  }
  throw InternalError(message);
}

std::exception_ptr error_for_state(const char* sqlstate, const std::string& message,
                                   const char* primary) {
  try {
    throw_for_state(sqlstate, message, primary);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

PgResult::PgResult(pg_result* result) : result_(result, PQclear) {}

PgResult PgResult::slice(int first, int count) const {
  PgResult part = *this;
  part.first_ = first_ + first;
  part.count_ = count;
  return part;
}

int PgResult::rows() const { return count_ >= 0 ? count_ : PQntuples(result_.get()); }

std::string PgResult::text(int row, int column) const {
  row += first_;
  return std::string(PQgetvalue(result_.get(), row, column),
                     static_cast<std::size_t>(PQgetlength(result_.get(), row, column)));
}

std::int64_t PgResult::int64(int row, int column) const {
  row += first_;
  const char* value = PQgetvalue(result_.get(), row, column);
  const char* end = value + PQgetlength(result_.get(), row, column);
  std::int64_t parsed = 0;
  const auto [ptr, ec] = std::from_chars(value, end, parsed);
  if (ec != std::errc() || ptr != end) {
    throw InternalError("pg: column " + std::to_string(column) +
                        " is not an integer: " + std::string(value, end));
  }
  return parsed;
}

bool PgResult::boolean(int row, int column) const {
  return PQgetvalue(result_.get(), row + first_, column)[0] == 't';
}

bool PgResult::is_null(int row, int column) const {
  return PQgetisnull(result_.get(), row + first_, column) != 0;
}

std::vector<std::string> PgResult::column_names() const {
  std::vector<std::string> names;
  const int count = PQnfields(result_.get());
  names.reserve(static_cast<std::size_t>(count));
  for (int column = 0; column < count; ++column) names.emplace_back(PQfname(result_.get(), column));
  return names;
}

PgConnection::PgConnection(const std::string& url, std::chrono::milliseconds call_timeout,
                           const std::vector<PreparedStatement>& statements)
    : call_timeout_(call_timeout) {
  const auto timeout_ms = std::to_string(call_timeout.count());
  const auto connect_seconds = std::to_string(std::max<long long>(1, call_timeout.count() / 1000));
  // Later keywords override the URL's. synchronous_commit=on: a token is durable before the
  // grant returns, whatever the server default. statement_timeout and tcp_user_timeout bound
  // every call by the store's call timeout, also when the server vanishes mid-call.
  const std::string options =
      "-c synchronous_commit=on -c client_min_messages=warning -c statement_timeout=" + timeout_ms +
      " -c TimeZone=UTC";
  const char* keywords[] = {"dbname",           "connect_timeout",  "options",
                            "tcp_user_timeout", "application_name", nullptr};
  const char* values[] = {
      url.c_str(), connect_seconds.c_str(), options.c_str(), timeout_ms.c_str(), "dlock", nullptr};
  conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    std::string message = "pg: cannot connect: ";
    message += conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory";
    PQfinish(conn_);
    conn_ = nullptr;
    throw UnavailableError(message);
  }
  for (const auto& statement : statements) {
    check(PQprepare(conn_, statement.name, statement.sql, 0, nullptr), statement.name);
    if (!statement.columns) continue;
    const auto described = check(PQdescribePrepared(conn_, statement.name), statement.name);
    const auto mismatch = util::column_mismatch(*statement.columns, described.column_names());
    if (!mismatch.empty()) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw InternalError(std::string("pg: statement ") + statement.name + ": " + mismatch);
    }
  }
}

PgConnection::~PgConnection() { PQfinish(conn_); }

bool PgConnection::healthy() const {
  return !broken_ && conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK;
}

PgResult PgConnection::execute(const char* statement_name,
                               std::initializer_list<std::string_view> params) {
  return execute(statement_name, std::vector<std::string>(params.begin(), params.end()));
}

PgResult PgConnection::execute(const char* statement_name, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& value : params) values.push_back(value.c_str());
  return check(PQexecPrepared(conn_, statement_name, static_cast<int>(values.size()), values.data(),
                              nullptr, nullptr, 0),
               statement_name);
}

void PgConnection::throw_broken(const char* what) {
  broken_ = true;
  throw UnknownOutcomeError(std::string("pg: ") + what + ": " + PQerrorMessage(conn_));
}

pg_result* PgConnection::next_result(Deadline* deadline) {
  while (PQisBusy(conn_) == 1) {
    int wait_ms = -1;
    if (*deadline != Deadline::max()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= *deadline) {
        // Out of time: ask the server to cancel the statement running; its error (or the
        // results, if it was done) still comes back on this connection. A cancel that arrives
        // while the server reads the pipeline's next message is dropped, so it is sent again
        // after another call timeout without an answer.
        if (PGcancel* cancel = PQgetCancel(conn_)) {
          char error[256];
          PQcancel(cancel, error, sizeof error);
          PQfreeCancel(cancel);
        }
        *deadline = std::chrono::steady_clock::now() + call_timeout_;
        continue;
      }
      wait_ms =
          static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count());
    }
    pollfd socket{PQsocket(conn_), POLLIN, 0};
    const int ready = ::poll(&socket, 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;  // PQgetResult reports the broken connection
    if (ready > 0 && PQconsumeInput(conn_) != 1) break;
  }
  return PQgetResult(conn_);
}

std::optional<std::vector<PgResult>> PgConnection::execute_pipelined(
    const std::vector<PreparedCall>& calls, std::size_t* failed, Deadline deadline,
    std::exception_ptr* failure) {
  if (PQenterPipelineMode(conn_) != 1) throw_broken("pipeline");
  const auto send_simple = [&](const char* sql) {
    return PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  };
  bool sent = send_simple("BEGIN");
  std::vector<const char*> values;
  for (const auto& call : calls) {
    if (!sent) break;
    values.clear();
    for (const auto& value : *call.params) values.push_back(value.c_str());
    sent = PQsendQueryPrepared(conn_, call.name, static_cast<int>(values.size()), values.data(),
                               nullptr, nullptr, 0) == 1;
  }
  // Nothing is on the wire before the Sync flushes it, so a failed send committed nothing; the
  // connection is discarded all the same.
  if (!(sent && send_simple("COMMIT") && PQpipelineSync(conn_) == 1)) throw_broken("pipeline");

  // One result per query (BEGIN, the calls, COMMIT), each ended by a null one, then the Sync's.
  // The first failure is kept; the queries after it come back PGRES_PIPELINE_ABORTED.
  std::vector<PgResult> results;
  results.reserve(calls.size() + 2);
  std::optional<std::size_t> first_failure;
  std::string sqlstate;
  std::string message;
  std::string primary;
  bool committed = false;
  for (std::size_t query = 0; query < calls.size() + 2; ++query) {
    pg_result* raw = next_result(&deadline);
    if (raw == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      PQclear(raw);
      throw_broken("pipeline");
    }
    const ExecStatusType status = PQresultStatus(raw);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && !first_failure) {
      first_failure = query;
      const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
      sqlstate = state == nullptr ? "" : state;
      message = PQresultErrorMessage(raw);
      const char* primary_message = PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY);
      primary = primary_message == nullptr ? "" : primary_message;
    }
    if (query == calls.size() + 1) committed = std::string_view(PQcmdStatus(raw)) == "COMMIT";
    results.emplace_back(raw);
    while (pg_result* rest = next_result(&deadline)) PQclear(rest);
  }
  pg_result* sync = next_result(&deadline);
  const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  PQclear(sync);
  if (!synced || PQexitPipelineMode(conn_) != 1) throw_broken("pipeline");

  if (!first_failure && committed) {
    std::vector<PgResult> answers;
    answers.reserve(calls.size());
    for (std::size_t i = 1; i <= calls.size(); ++i) answers.push_back(std::move(results[i]));
    return answers;
  }
  // An error aborted the transaction; the session stays in it until a ROLLBACK.
  if (PQtransactionStatus(conn_) != PQTRANS_IDLE) run("ROLLBACK");
  if (first_failure && *first_failure >= 1 && *first_failure <= calls.size()) {
    *failed = *first_failure - 1;
    if (failure != nullptr) {
      *failure = error_for_state(sqlstate.empty() ? nullptr : sqlstate.c_str(),
                                 std::string("pg: ") + calls[*failed].name + ": " + message,
                                 primary.empty() ? nullptr : primary.c_str());
    }
    return std::nullopt;
  }
  throw_for_state(sqlstate.empty() ? nullptr : sqlstate.c_str(),
                  "pg: pipelined transaction: " + message);
}

PgResult PgConnection::run(const std::string& sql) {
  return check(PQexec(conn_, sql.c_str()), "query");
}

PgResult PgConnection::check(pg_result* raw, const char* what) {
  PgResult result(raw);
  const ExecStatusType status = raw == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(raw);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  const std::string message = std::string("pg: ") + what + ": " + PQerrorMessage(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    // The connection broke under the call: the server may or may not have applied it.
    throw UnknownOutcomeError(message);
  }
  throw_for_state(raw == nullptr ? nullptr : PQresultErrorField(raw, PG_DIAG_SQLSTATE), message,
                  raw == nullptr ? nullptr : PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY));
}

}  // namespace dlock::store::pg
