#include "safety/cluster.h"

#include <libpq-fe.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dlock::safety {

using std::chrono::seconds;

ExecutorProcess::ExecutorProcess(const std::string& dir, ExecutorOptions options)
    : options_(std::move(options)), log_path_(dir + "/" + options_.name + ".log") {
  testing::SubprocessOptions process;
  process.argv = {DLOCK_PAYOUT_EXECUTOR_PATH,
                  "--server",
                  options_.server_url,
                  "--pg-url",
                  options_.pg_url,
                  "--batches",
                  options_.batches,
                  "--worker-id",
                  options_.name,
                  "--hold-extra-ms",
                  std::to_string(options_.hold_extra_ms),
                  "--ttl-ms",
                  std::to_string(options_.ttl_ms),
                  "--wait-ms",
                  "1000",
                  "--give-up-s",
                  std::to_string(options_.give_up_s)};
  if (!options_.fencing) process.argv.push_back("--no-fencing");
  if (options_.elect) process.argv.push_back("--elect");
  if (options_.read) process.argv.push_back("--read");
  process.argv.insert(process.argv.begin(), options_.wrapper.begin(), options_.wrapper.end());
  if (!options_.token_file.empty())
    process.env.push_back("DLOCK_TOKEN_FILE=" + options_.token_file);
  process.log_path = log_path_;
  process_ = std::make_unique<testing::Subprocess>(process);
}

void seed_payouts(const std::string& pg_url, const std::string& batches, int payouts) {
  testing::SubprocessOptions options;
  options.argv = {DLOCK_PAYOUT_EXECUTOR_PATH,
                  "--init",
                  "--pg-url",
                  pg_url,
                  "--batches",
                  batches,
                  "--seed-payouts",
                  std::to_string(payouts)};
  const int status = testing::run_command(options, seconds(60));
  if (status != 0)
    throw std::runtime_error("payout-executor --init failed: " + std::to_string(status));
}

LedgerSnapshot read_ledger(const std::string& pg_url) {
  PGconn* conn = PQconnectdb(pg_url.c_str());
  LedgerSnapshot snapshot;
  auto query = [&](const char* sql) {
    PGresult* result = PQexec(conn, sql);
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
      const std::string message = PQerrorMessage(conn);
      PQclear(result);
      PQfinish(conn);
      throw std::runtime_error(std::string(sql) + ": " + message);
    }
    return result;
  };
  PGresult* payouts = query("SELECT id FROM payout ORDER BY id");
  for (int i = 0; i < PQntuples(payouts); ++i)
    snapshot.payouts.push_back(PQgetvalue(payouts, i, 0));
  PQclear(payouts);
  PGresult* ledger = query("SELECT payout_id, token FROM ledger ORDER BY seq");
  for (int i = 0; i < PQntuples(ledger); ++i) {
    snapshot.tokens_by_payout[PQgetvalue(ledger, i, 0)].push_back(
        std::stoull(PQgetvalue(ledger, i, 1)));
  }
  PQclear(ledger);
  PQfinish(conn);
  return snapshot;
}

}  // namespace dlock::safety
