#pragma once

// What a safety scenario runs: a restartable dlockd, the payout executors as real processes, and
// the resource database (always PostgreSQL).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "safety/checker.h"
#include "safety/history.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock::safety {

// The dlockd of a scenario (tests/support/dlockd_process.h) on a fixed port, so that it can be
// killed with -9 and restarted on the same address and storage while executors keep their
// --server.
inline testing::DlockdOptions restartable_dlockd(std::string backend) {
  testing::DlockdOptions options;
  options.backend = std::move(backend);
  options.fixed_port = true;
  return options;
}

struct ExecutorOptions {
  std::string name;
  std::string server_url;
  std::string pg_url;
  std::string batches;
  int hold_extra_ms = 0;
  int ttl_ms = 2000;
  bool fencing = true;
  bool elect = false;  // --elect: lead each batch through an election (C3 "Elections")
  bool read = false;   // --read: read each batch once under a shared grant (a reader)
  int give_up_s = 90;
  std::vector<std::string> wrapper;  // e.g. "ip netns exec NS": run inside a network namespace
  // A dlockd with a tokens file (C6): the file holding the executor's bearer token, handed over
  // as DLOCK_TOKEN_FILE (the client library reads it), never as a flag. Empty: no token.
  std::string token_file;
};

// One payout-executor process; its JSON log is a file in `dir`.
class ExecutorProcess {
 public:
  ExecutorProcess(const std::string& dir, ExecutorOptions options);
  const std::string& name() const { return options_.name; }
  const std::string& log_path() const { return log_path_; }
  testing::Subprocess& process() { return *process_; }
  int events(const std::string& event, const std::string& outcome = "") const {
    return count_events(log_path_, event, outcome);
  }

 private:
  ExecutorOptions options_;
  std::string log_path_;
  std::unique_ptr<testing::Subprocess> process_;
};

// payout-executor --init: schema plus `payouts` payouts in each of `batches`.
void seed_payouts(const std::string& pg_url, const std::string& batches, int payouts);

// Every payout id and its ledger rows' tokens.
LedgerSnapshot read_ledger(const std::string& pg_url);

}  // namespace dlock::safety
