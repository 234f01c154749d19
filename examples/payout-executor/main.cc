// payout-executor: see README.md next to this file.

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <sstream>

#include "executor.h"

int main(int argc, char** argv) {
  CLI::App app{"payout-executor: pays batches of payouts exactly once under dlock locks"};
  payout::Config config;
  std::string batches = "b0";
  long long hold_ms = 0, ttl_ms = 30000, wait_ms = 2000, give_up_s = 120;
  bool init = false, no_fencing = false;
  app.add_option("--server", config.server_url, "dlockd URL (default: DLOCK_SERVER)");
  app.add_option("--pg-url", config.pg_url, "libpq URL of the payouts database")->required();
  app.add_option("--batches", batches, "comma-separated batch names");
  app.add_option("--worker-id", config.worker_id, "name in logs and the ledger");
  app.add_option("--hold-extra-ms", hold_ms, "pause before each payment (a slow holder)");
  app.add_option("--ttl-ms", ttl_ms, "session and lock lease");
  app.add_option("--wait-ms", wait_ms, "how long one acquire waits for a held batch");
  app.add_option("--give-up-s", give_up_s, "exit 1 if not all batches are paid by then");
  app.add_flag("--no-fencing", no_fencing,
               "skip the fencing guard (UNSAFE: for the negative control of the safety tests)");
  auto* elect =
      app.add_flag("--elect", config.elect,
                   "lead each batch through an election (session-bound) instead of a TTL lock");
  app.add_flag("--read", config.read,
               "a reader: take each batch's lock in shared mode, admit the token with admit_read, "
               "read what the batch has paid (logged as a read event), once per batch; pays "
               "nothing")
      ->excludes(elect);
  app.add_flag("--init", init, "create the schema and seed the batches, then exit");
  app.add_option("--seed-payouts", config.seed_payouts, "with --init: payouts per batch");
  CLI11_PARSE(app, argc, argv);

  std::stringstream list(batches);
  for (std::string batch; std::getline(list, batch, ',');) {
    if (!batch.empty()) config.batches.push_back(batch);
  }
  if (config.worker_id.empty()) config.worker_id = "worker-" + std::to_string(::getpid());
  config.hold_extra = std::chrono::milliseconds(hold_ms);
  config.ttl = std::chrono::milliseconds(ttl_ms);
  config.wait = std::chrono::milliseconds(wait_ms);
  config.give_up = std::chrono::seconds(give_up_s);
  config.fencing = !no_fencing;
  try {
    return init ? payout::init_database(config) : payout::run_executor(config);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "payout-executor: %s\n", error.what());
    return 1;
  }
}
