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
    throw FencingError(sql.substr(0, 60) + ": " + PQerrorMessage(conn));
  }
  return result;
}

// holder_key is the lock key bound to the resource; NULL or '' (rows written before keys were
// bound) means not bound yet, and the first key to write binds it.
#define DLOCK_FENCING_SAME_KEY \
  "COALESCE(NULLIF(fencing_resource.holder_key, ''), EXCLUDED.holder_key) = EXCLUDED.holder_key"

// The whole rule in one statement: insert the resource's first token, or raise the highest
// accepted token only if the new one is not smaller and comes from the bound key. Zero rows
// returned = stale or another key; the conflicting row is locked either way, so the follow-up
// read of its key in the same transaction tells the two apart.
constexpr const char* kAdmitSql =
    "INSERT INTO fencing_resource (resource, highest_token, holder_key) VALUES ($1, $2, $3) "
    "ON CONFLICT (resource) DO UPDATE SET highest_token = EXCLUDED.highest_token, "
    "holder_key = EXCLUDED.holder_key "
    "WHERE fencing_resource.highest_token <= EXCLUDED.highest_token "
    "AND fencing_resource.highest_read_token <= EXCLUDED.highest_token "
    "AND " DLOCK_FENCING_SAME_KEY " RETURNING highest_token";

// A reader: admitted unless a writer with a greater token has written; raises the greatest
// reader token, never lowers it (readers come in any order).
constexpr const char* kAdmitReadSql =
    "INSERT INTO fencing_resource (resource, highest_token, holder_key, highest_read_token) "
    "VALUES ($1, 0, $3, $2) ON CONFLICT (resource) DO UPDATE SET "
    "highest_read_token = greatest(fencing_resource.highest_read_token, "
    "EXCLUDED.highest_read_token), holder_key = EXCLUDED.holder_key "
    "WHERE fencing_resource.highest_token <= EXCLUDED.highest_read_token "
    "AND " DLOCK_FENCING_SAME_KEY " RETURNING 1";

constexpr const char* kBindSql =
    "INSERT INTO fencing_resource (resource, highest_token, holder_key) VALUES ($1, 0, $2) "
    "ON CONFLICT (resource) DO UPDATE SET holder_key = EXCLUDED.holder_key "
    "WHERE " DLOCK_FENCING_SAME_KEY " RETURNING 1";

[[noreturn]] void key_mismatch(std::string_view resource, const std::string& bound,
                               std::string_view presented) {
  throw LockKeyMismatchError("fencing: resource \"" + std::string(resource) +
                             "\" is protected by lock key \"" + bound +
                             "\"; a token of lock key \"" + std::string(presented) +
                             "\" is refused (tokens of different keys are not comparable)");
}

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
  run(conn, std::string(schema_sql()), {});
  tx.commit();
}

void bind_resource(pg_conn* conn, std::string_view resource, std::string_view lock_key) {
  check_lock_key(lock_key);
  const auto result = run(conn, kBindSql, {std::string(resource), std::string(lock_key)});
  if (PQntuples(result.get()) == 0) key_mismatch(resource, bound_key(conn, resource), lock_key);
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
  if (PQntuples(result.get()) == 1) return Admission::kAdmitted;
  if (const std::string bound = bound_key(conn, resource); !bound.empty() && bound != lock_key) {
    key_mismatch(resource, bound, lock_key);
  }
  return Admission::kStale;
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
