#include "fencing/fencing_guard.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

namespace dlock::fencing {
namespace {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

ResultPtr run(pg_conn* conn, const std::string& sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& param : params) values.push_back(param.c_str());
  // Without parameters: the simple protocol, which also runs multi-statement scripts.
  ResultPtr result(values.empty() ? PQexec(conn, sql.c_str())
                                  : PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()),
                                                 nullptr, values.data(), nullptr, nullptr, 0));
  const auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    const char* primary =
        result ? PQresultErrorField(result.get(), PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    const std::string_view sqlstate = state ? state : "";
    // The guard functions' own codes (fencing_guard.sql): their message is the whole story.
    if (sqlstate == "DL001")
      throw LockKeyMismatchError(primary ? primary : "fencing: lock key mismatch");
    if (sqlstate == "DL002") {
      throw FencingError(primary ? primary : "fencing: bad argument", ErrorCode::kInvalidArgument);
    }
    throw FencingError(sql.substr(0, 60) + ": " + PQerrorMessage(conn));
  }
  return result;
}

// The rule itself lives in src/fencing/fencing_guard.sql as functions (dlock_fence_admit, …),
// so that a program in any language calls the same thing; this library is one such caller.
constexpr const char* kAdmitSql = "SELECT dlock_fence_admit($1, $2, $3)";
constexpr const char* kAdmitReadSql = "SELECT dlock_fence_admit_read($1, $2, $3)";
constexpr const char* kBindSql = "SELECT dlock_fence_bind($1, $2)";

void check_lock_key(std::string_view lock_key) {
  if (lock_key.empty()) {
    throw FencingError("fencing: the lock key the token belongs to is required",
                       ErrorCode::kInvalidArgument);
  }
}

}  // namespace

void install_schema(pg_conn* conn) {
  Transaction tx(conn);
  // Concurrent CREATE TABLE IF NOT EXISTS can still fail on pg_type's unique index.
  run(conn, "SELECT pg_advisory_xact_lock(7207001)", {});
  run(conn, "SET LOCAL client_min_messages = warning", {});  // no "already exists" notices
  run(conn, std::string(schema_sql()), {});
  tx.commit();
}

void bind_resource(pg_conn* conn, std::string_view resource, std::string_view lock_key) {
  check_lock_key(lock_key);
  run(conn, kBindSql, {std::string(resource), std::string(lock_key)});
}

std::string bound_key(pg_conn* conn, std::string_view resource) {
  const auto result = run(conn, "SELECT holder_key FROM fencing_resource WHERE resource = $1",
                          {std::string(resource)});
  if (PQntuples(result.get()) == 0 || PQgetisnull(result.get(), 0, 0)) return {};
  return PQgetvalue(result.get(), 0, 0);
}

namespace {

Admission admit_with(const char* sql, pg_conn* conn, std::string_view resource, FencingToken token,
                     std::string_view lock_key) {
  check_lock_key(lock_key);
  if (PQtransactionStatus(conn) != PQTRANS_INTRANS) {
    throw FencingError(
        "fencing admit outside a transaction: the check and the write must commit "
        "together",
        ErrorCode::kInvalidArgument);
  }
  if (token > static_cast<FencingToken>(INT64_MAX)) {
    throw FencingError("fencing token does not fit a bigint", ErrorCode::kInvalidArgument);
  }
  const auto result =
      run(conn, sql, {std::string(resource), std::to_string(token), std::string(lock_key)});
  return std::string_view(PQgetvalue(result.get(), 0, 0)) == "t" ? Admission::kAdmitted
                                                                 : Admission::kStale;
}

}  // namespace

Admission admit(pg_conn* conn, std::string_view resource, FencingToken token,
                std::string_view lock_key) {
  return admit_with(kAdmitSql, conn, resource, token, lock_key);
}

Admission admit_read(pg_conn* conn, std::string_view resource, FencingToken token,
                     std::string_view lock_key) {
  return admit_with(kAdmitReadSql, conn, resource, token, lock_key);
}

FencingToken highest_accepted(pg_conn* conn, std::string_view resource) {
  const auto result = run(conn, "SELECT highest_token FROM fencing_resource WHERE resource = $1",
                          {std::string(resource)});
  if (PQntuples(result.get()) == 0) return 0;
  return std::strtoull(PQgetvalue(result.get(), 0, 0), nullptr, 10);
}

Transaction::Transaction(pg_conn* conn) : conn_(conn) { run(conn_, "BEGIN", {}); }

Transaction::~Transaction() {
  if (!open_) return;
  // Best effort: on a broken connection the server rolls back by itself.
  PQclear(PQexec(conn_, "ROLLBACK"));
}

void Transaction::commit() {
  open_ = false;
  const auto result = run(conn_, "COMMIT", {});
  // COMMIT of a transaction that already failed "succeeds" with the tag ROLLBACK.
  if (std::string_view(PQcmdStatus(result.get())) != "COMMIT") {
    throw FencingError("transaction was rolled back at COMMIT");
  }
}

int exec(pg_conn* conn, const std::string& sql, std::initializer_list<std::string> params) {
  const auto result = run(conn, sql, std::vector<std::string>(params));
  if (PQresultStatus(result.get()) == PGRES_TUPLES_OK) return PQntuples(result.get());
  return std::atoi(PQcmdTuples(result.get()));
}

}  // namespace dlock::fencing
