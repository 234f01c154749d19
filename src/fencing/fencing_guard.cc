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

// The whole rule in one statement: insert the resource's first token, or raise the highest
// accepted token only if the new one is not smaller. Zero rows returned = stale.
constexpr const char* kAdmitSql =
    "INSERT INTO fencing_resource (resource, highest_token, holder_key) VALUES ($1, $2, $3) "
    "ON CONFLICT (resource) DO UPDATE SET highest_token = EXCLUDED.highest_token, "
    "holder_key = EXCLUDED.holder_key "
    "WHERE fencing_resource.highest_token <= EXCLUDED.highest_token "
    "RETURNING highest_token";

}  // namespace

void install_schema(pg_conn* conn) {
  Transaction tx(conn);
  // Concurrent CREATE TABLE IF NOT EXISTS can still fail on pg_type's unique index.
  run(conn, "SELECT pg_advisory_xact_lock(7207001)", {});
  run(conn, std::string(schema_sql()), {});
  tx.commit();
}

Admission admit(pg_conn* conn, std::string_view resource, FencingToken token,
                std::string_view holder_key) {
  if (PQtransactionStatus(conn) != PQTRANS_INTRANS) {
    throw FencingError(
        "fencing admit outside a transaction: the check and the write must commit "
        "together");
  }
  if (token > static_cast<FencingToken>(INT64_MAX)) {
    throw FencingError("fencing token does not fit a bigint");
  }
  const auto result =
      run(conn, kAdmitSql, {std::string(resource), std::to_string(token), std::string(holder_key)});
  return PQntuples(result.get()) == 1 ? Admission::kAdmitted : Admission::kStale;
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
