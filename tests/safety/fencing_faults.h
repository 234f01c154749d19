#pragma once

// The fixture of the fencing fault scenarios (docs/fencing.md "Proof under faults"), shared by
// the test files of the fencing_fault_test binary: fencing_fault_test.cc (scenarios a-f, l, m)
// and rw_fault_test.cc (n, read-write locks). One PostgreSQL for the whole binary, a fresh
// resource database and dlockd per scenario, the executors as real processes. Every dlockd runs
// with a tokens file (contract C6): the executors and the recorder authenticate as the principal
// `payouts` with `lock:default`, as a deployment would.

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth/crypto.h"
#include "auth/permissions.h"
#include "auth/tokens_file.h"
#include "safety/checker.h"
#include "safety/cluster.h"
#include "safety/history.h"
#include "safety/recorder.h"
#include "support/dlockd_process.h"
#include "support/postgres_server.h"
#ifdef DLOCK_WITH_ETCD
#include "support/etcd_server.h"
#endif

namespace dlock::safety {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline testing::PostgresServer& postgres() {
  static testing::PostgresServer server;
  return server;
}

inline bool long_mode() {
  const char* value = std::getenv("DLOCK_SAFETY_LONG");
  return value != nullptr && std::string(value) == "1";
}

// Fault cycles per scenario: 1 in CI, many in the long mode.
inline int cycles(int short_count, int long_count) {
  return long_mode() ? long_count : short_count;
}

class FencingFaults : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    static std::atomic<int> counter{0};
    const std::string suffix = std::to_string(counter++);
    const std::string resource_db = "pay_" + suffix;
    postgres().ensure_database(resource_db);
    resource_url_ = postgres().url(resource_db);
    dir_ = testing::make_temp_dir("dlock-safety-logs");
    auto config = restartable_dlockd(GetParam());
    enable_auth(config);
    if (GetParam() == "pg") {
      postgres().ensure_database("locks_" + suffix);
      config.pg_url = postgres().url("locks_" + suffix);
    }
#ifdef DLOCK_WITH_ETCD
    if (GetParam() == "etcd") {
      // A fresh cluster per scenario, as pg gets a fresh database: three members for the
      // leader-kill scenario (f), one otherwise.
      etcd_ = std::make_unique<testing::EtcdCluster>(name.rfind("F_", 0) == 0 ? 3 : 1);
      config.etcd_endpoints = etcd_->endpoints();
    }
#endif
    name_ = GetParam() + "/" + name.substr(0, name.find('_'));
    dlockd_ = std::make_unique<testing::DlockdProcess>(config);
    // Authentication is on: a request without a token is refused (C6).
    ASSERT_EQ(testing::http_call(dlockd_->address(), "GET", "/v1/locks").status, 401);
  }

  void TearDown() override {
    dlockd_.reset();
    if (!HasFailure())
      std::filesystem::remove_all(dir_);
    else
      std::cout << "logs kept in " << dir_ << "\n";
  }

  // A tokens file naming one principal, `payouts` with `lock:default` (what the executors
  // need), and the file holding its token for the executors (DLOCK_TOKEN_FILE, mode 0600).
  void enable_auth(testing::DlockdOptions& config) {
    bearer_ = auth::random_token();
    std::ofstream(dir_ + "/tokens")
        << auth::tokens_file_line("payouts", bearer_, auth::parse_permissions("lock:default"))
        << "\n";
    token_file_ = dir_ + "/payouts.token";
    std::ofstream(token_file_) << bearer_ << "\n";
    std::filesystem::permissions(
        token_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    config.extra_args.insert(config.extra_args.end(), {"--auth-tokens-file", dir_ + "/tokens"});
  }

  // A call to the scenario's dlockd as the principal `payouts`.
  testing::HttpResult api(const std::string& method, const std::string& target) {
    return testing::http_call(dlockd_->address(), method, target, "", bearer_headers(bearer_));
  }

  std::unique_ptr<ExecutorProcess> executor(const std::string& name, const std::string& batches,
                                            int hold_ms, bool fencing = true, bool elect = false) {
    auto options = executor_options(name, batches, hold_ms, fencing);
    options.elect = elect;
    return std::make_unique<ExecutorProcess>(dir_, options);
  }

  ExecutorOptions executor_options(const std::string& name, const std::string& batches, int hold_ms,
                                   bool fencing) {
    ExecutorOptions options;
    options.name = name;
    options.server_url = dlockd_->url();
    options.pg_url = resource_url_;
    options.batches = batches;
    options.hold_extra_ms = hold_ms;
    options.fencing = fencing;
    options.give_up_s = long_mode() ? 1800 : 90;
    options.token_file = token_file_;
    return options;
  }

  // A reader (payout-executor --read): reads each of `batches` once under a shared grant.
  std::unique_ptr<ExecutorProcess> reader(const std::string& name, const std::string& batches,
                                          bool fencing = true) {
    auto options = executor_options(name, batches, 0, fencing);
    options.read = true;
    return std::make_unique<ExecutorProcess>(dir_, options);
  }

  // Scenario (n), rw_fault_test.cc: a writer paused past its TTL while readers read.
  Report run_paused_writer_scenario(bool fencing, int cycle_count);

  // Scenario (a): the holder is stopped with SIGSTOP between its validity check and its write,
  // past its TTL; another executor takes the batch over and pays; then SIGCONT. With `elect`
  // (scenario l), the holder is an election's leader: session-bound, so the pause outlives its
  // session (no keepalives while stopped) and the next campaigner leads.
  Report run_pause_scenario(bool fencing, int cycle_count, bool elect = false) {
    History history;
    for (int cycle = 0; cycle < cycle_count; ++cycle) {
      const std::string batch = "pause" + std::to_string(cycle);
      seed_payouts(resource_url_, batch, 5);
      auto slow = executor("slow" + std::to_string(cycle), batch, 1200, fencing, elect);
      // The second pay_begin comes after one committed write: the holder is now in its pause.
      EXPECT_TRUE(testing::wait_for([&] { return slow->events("pay_begin") >= 2; }, seconds(30)))
          << "the slow holder never started its second payment";
      slow->process().signal(SIGSTOP);
      history.note_fault("SIGSTOP " + slow->name());
      std::this_thread::sleep_for(milliseconds(3000));  // past the 2 s lease: the point
      auto fast = executor("fast" + std::to_string(cycle), batch, 0, fencing, elect);
      EXPECT_EQ(fast->process().wait(seconds(60)), 0) << "the new holder did not finish";
      slow->process().signal(SIGCONT);
      EXPECT_EQ(slow->process().wait(seconds(60)), 0) << "the stale holder did not finish";
      history.load_executor_log(slow->log_path(), slow->name());
      history.load_executor_log(fast->log_path(), fast->name());
    }
    const auto ledger = read_ledger(resource_url_);
    return check(name_ + (elect ? "/elect" : "") + (fencing ? "" : "/no-fencing"), history,
                 &ledger);
  }

  // Executors compete for `batches` while `inject` runs `fault_cycles` times, each after at
  // least three more committed payments. Returns the checked report.
  template <typename Inject>
  Report run_competing_scenario(const std::string& batches, int fault_cycles,
                                const std::string& fault_name, Inject inject) {
    History history;
    // Enough payouts for every fault cycle to land mid-run.
    // The long mode pays slower and has more to pay, so that every cycle lands mid-run.
    seed_payouts(resource_url_, batches, long_mode() ? 4 * fault_cycles : 8);
    const int hold_ms = long_mode() ? 300 : 60;
    std::vector<std::unique_ptr<ExecutorProcess>> executors;
    for (const char* name : {"x1", "x2", "x3"}) {
      executors.push_back(executor(name, batches, hold_ms));
    }
    auto writes = [&] {
      int total = 0;
      for (auto& e : executors) total += e->events("write", "ok");
      return total;
    };
    for (int cycle = 0; cycle < fault_cycles; ++cycle) {
      const int before = writes();
      if (!testing::wait_for([&] { return writes() >= before + 3; }, seconds(30))) break;
      inject();
      history.note_fault(fault_name);
    }
    for (auto& e : executors) {
      EXPECT_EQ(e->process().wait(seconds(long_mode() ? 1800 : 120)), 0) << e->name();
    }
    for (auto& e : executors) history.load_executor_log(e->log_path(), e->name());
    const auto ledger = read_ledger(resource_url_);
    return check(name_, history, &ledger);
  }

  std::string resource_url_;
  std::string dir_;
  std::string bearer_;      // the bearer token of the principal `payouts`
  std::string token_file_;  // the file holding it
  std::string name_;
#ifdef DLOCK_WITH_ETCD
  std::unique_ptr<testing::EtcdCluster> etcd_;  // declared first: outlives dlockd_
#endif
  std::unique_ptr<testing::DlockdProcess> dlockd_;
};

}  // namespace dlock::safety
