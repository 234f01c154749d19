#pragma once

// What a safety scenario runs: a dlockd on a fixed port (so that it can be killed with -9 and
// restarted on the same address and storage while executors keep their --server), the payout
// executors as real processes, and the resource database (always PostgreSQL).

#include <memory>
#include <string>
#include <vector>

#include "safety/checker.h"
#include "safety/history.h"
#include "support/subprocess.h"

namespace dlock::safety {

struct DlockdConfig {
  std::string backend;         // sqlite | pg | etcd
  std::string pg_url;          // for backend pg
  std::string etcd_endpoints;  // for backend etcd
  // Where it listens, and a command prefix (e.g. "ip netns exec NS") to run it inside a network
  // namespace (tests/support/netns.h).
  std::string listen_host = "127.0.0.1";
  std::vector<std::string> wrapper = {};
  std::vector<std::string> extra_args = {};  // e.g. {"--backend-timeout", "2s"}
};

class RestartableDlockd {
 public:
  explicit RestartableDlockd(DlockdConfig config);
  RestartableDlockd(const RestartableDlockd&) = delete;
  RestartableDlockd& operator=(const RestartableDlockd&) = delete;
  ~RestartableDlockd();

  std::string address() const { return config_.listen_host + ":" + std::to_string(port_); }
  std::string url() const { return "http://" + address(); }
  void kill9();
  // Starts again on the same port and storage; waits until it answers /readyz.
  void start();
  const DlockdConfig& config() const { return config_; }
  // The embedded store's file (backend sqlite), as cluster.cc passes it to dlockd.
  std::string sqlite_path() const { return dir_ + "/dlock.db"; }

 private:
  DlockdConfig config_;
  std::string dir_;
  int port_ = 0;
  int starts_ = 0;
  std::unique_ptr<testing::Subprocess> process_;
};

struct ExecutorOptions {
  std::string name;
  std::string server_url;
  std::string pg_url;
  std::string batches;
  int hold_extra_ms = 0;
  int ttl_ms = 2000;
  bool fencing = true;
  int give_up_s = 90;
  std::vector<std::string> wrapper;  // e.g. "ip netns exec NS": run inside a network namespace
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
