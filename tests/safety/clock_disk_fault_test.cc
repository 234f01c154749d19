// Clock and disk faults (docs/fencing.md, scenarios j and k): real dlockd and payout-executor
// processes, the wall clock stepped by libfaketime (the monotonic clock left alone, as an NTP or
// operator step leaves it), and the embedded store on a small tmpfs that fills up. Each scenario
// records a history that the common checker (checker.h) must find clean, plus the scenario's own
// properties (no early takeover, no lock outliving its TTL by a clock step, a clear 503 on a full
// disk, no acknowledged grant lost).
//
// DLOCK_SAFETY_LONG=1 repeats every fault cycle many times.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "safety/checker.h"
#include "safety/cluster.h"
#include "safety/history.h"
#include "safety/recorder.h"
#include "support/dlockd_process.h"
#include "support/fault_env.h"
#include "support/postgres_server.h"
#ifdef DLOCK_WITH_ETCD
#include "support/etcd_server.h"
#endif

namespace dlock::safety {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace json = boost::json;

testing::PostgresServer& postgres() {
  static testing::PostgresServer server;
  return server;
}

bool long_mode() {
  const char* value = std::getenv("DLOCK_SAFETY_LONG");
  return value != nullptr && std::string(value) == "1";
}

int cycles(int short_count, int long_count) { return long_mode() ? long_count : short_count; }

// A restartable dlockd with extra environment (the stepped clock, the fsync shim), its log in
// `dir` and (backend sqlite) its database at `sqlite_path`.
testing::DlockdOptions fault_dlockd(testing::DlockdOptions options, std::string sqlite_path,
                                    std::vector<std::string> env, std::string dir) {
  if (options.backend == "sqlite") options.sqlite_path = std::move(sqlite_path);
  options.env = std::move(env);
  options.dir = std::move(dir);
  return options;
}

std::string sanitized_test_name() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (auto& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

class ClockFaults : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!testing::SteppedClock::available()) GTEST_SKIP() << "libfaketime is not installed";
    static std::atomic<int> counter{0};
    const std::string suffix = std::to_string(counter++);
    config_ = restartable_dlockd(GetParam());
    if (GetParam() == "pg") {
      postgres().ensure_database("clock_locks_" + suffix);
      config_.pg_url = postgres().url("clock_locks_" + suffix);
    }
#ifdef DLOCK_WITH_ETCD
    if (GetParam() == "etcd") {
      etcd_ = std::make_unique<testing::EtcdCluster>(1);
      config_.etcd_endpoints = etcd_->endpoints();
    }
#endif
    dir_ = testing::make_temp_dir("dlock-clock-logs");
    name_ = GetParam() + "/" + sanitized_test_name().substr(0, sanitized_test_name().find('_'));
  }

  void TearDown() override {
    dlockd_.reset();
    if (!HasFailure())
      std::filesystem::remove_all(dir_);
    else
      std::cout << "logs kept in " << dir_ << "\n";
  }

  void start_dlockd(std::vector<std::string> env) {
    dlockd_ = std::make_unique<testing::DlockdProcess>(
        fault_dlockd(config_, dir_ + "/dlock.db", std::move(env), dir_));
  }

  testing::DlockdOptions config_;
  std::string dir_;
  std::string name_;
#ifdef DLOCK_WITH_ETCD
  std::unique_ptr<testing::EtcdCluster> etcd_;  // outlives dlockd_
#endif
  std::unique_ptr<testing::DlockdProcess> dlockd_;
};

// The wall-clock steps of one cycle: +1 h, back, -1 h, back (each of them a step).
const std::vector<seconds> kSteps = {seconds(3600), seconds(0), seconds(-3600), seconds(0)};

constexpr int kTtlMs = 3000;
// How long after the TTL a free key may take to be granted to a polling contender.
constexpr int kGraceMs = 2500;

// One fault under a held lock: a holder takes a fresh key for kTtlMs, `fault` runs (`label`
// names it), then a contender that arrives after it polls the key. The contender must not be
// granted before kTtlMs has passed in real time since the holder asked (no early takeover), and
// must be granted soon after (the fault must not make the lock outlive its TTL).
void hold_through(const std::string& address, Recorder& recorder, const std::string& key,
                  const std::string& label, const std::function<void()>& fault,
                  std::vector<std::string>& violations) {
  const auto holder = open_session(address, 60000);
  const auto held = recorder.acquire("client-holder", holder, key, kTtlMs, 0);
  ASSERT_EQ(held.status, 200) << held.body;
  const Operation grant = recorder.last();
  fault();
  // A client that arrives after the fault (its session is opened on the stepped clock).
  const auto contender = open_session(address, 60000);
  const std::int64_t ttl_ends = grant.start_ns + std::int64_t{kTtlMs} * 1000000;
  const std::int64_t give_up = grant.end_ns + std::int64_t{kTtlMs + kGraceMs} * 1000000;
  bool taken = false;
  while (!taken && monotonic_ns() < give_up) {
    const auto attempt = recorder.acquire("client-contender", contender, key, kTtlMs, 0);
    if (attempt.status == 200) {
      taken = true;
      const Operation& took = recorder.last();
      if (took.end_ns < ttl_ends) {
        violations.push_back("J early takeover after " + label + ": granted " +
                             std::to_string((ttl_ends - took.end_ns) / 1000000) +
                             " ms before the holder's TTL ended");
      }
      recorder.release("client-contender", contender, key, token_of(attempt));
    } else if (attempt.status != 409) {
      // E.g. 404: the fault ended the contender's live session (the same bug, seen on the
      // session instead of the lock).
      violations.push_back("J unexpected answer " + std::to_string(attempt.status) + " after " +
                           label + ": " + attempt.body);
      break;
    } else {
      std::this_thread::sleep_for(milliseconds(100));  // a client's retry pause
    }
  }
  if (!taken && monotonic_ns() >= give_up) {
    violations.push_back("J lock outlived its TTL after " + label + ": not free " +
                         std::to_string(kTtlMs + kGraceMs) + " ms after its grant");
  }
  testing::http_call(address, "DELETE", "/v1/sessions/" + holder);
  testing::http_call(address, "DELETE", "/v1/sessions/" + contender);
}

// Scenario (j), dlockd's clock stepped while it runs: +1 h, back, -1 h, back, each under a held
// lock.
TEST_P(ClockFaults, J_WallClockStepsOnDlockd) {
  testing::SteppedClock clock;
  start_dlockd(clock.env());
  History history;
  Recorder recorder(history, dlockd_->address());
  std::vector<std::string> violations;
  int step_index = 0;
  for (int cycle = 0; cycle < cycles(1, 10); ++cycle) {
    for (const auto offset : kSteps) {
      const std::string label = "a step to real " + std::to_string(offset.count()) + " s";
      hold_through(
          dlockd_->address(), recorder, "clock-" + std::to_string(step_index++), label,
          [&] {
            clock.set_offset(offset);
            history.note_fault("dlockd wall clock: " + label);
          },
          violations);
    }
  }
  auto report = check(name_ + "-dlockd-clock", history, nullptr);
  for (auto& v : violations) report.violations.push_back(v);
  print(std::cout, report);
  EXPECT_EQ(report.faults, kSteps.size() * static_cast<std::size_t>(cycles(1, 10)));
  EXPECT_TRUE(report.ok());
}

// Scenario (j), dlockd's clock stepped while it is down: kill -9 under a held lock, the clock
// steps, dlockd restarts on the same storage. A lease persisted by the earlier run must keep the
// rest of its lifetime (the restarted process cannot tell a step from time that passed).
TEST_P(ClockFaults, J_WallClockStepsWhileDlockdIsDown) {
  testing::SteppedClock clock;
  start_dlockd(clock.env());
  History history;
  Recorder recorder(history, dlockd_->address());
  std::vector<std::string> violations;
  int step_index = 0;
  for (int cycle = 0; cycle < cycles(1, 10); ++cycle) {
    for (const auto offset : kSteps) {
      const std::string label =
          "kill -9, a step to real " + std::to_string(offset.count()) + " s, restart";
      hold_through(
          dlockd_->address(), recorder, "down-" + std::to_string(step_index++), label,
          [&] {
            dlockd_->kill9();
            clock.set_offset(offset);
            dlockd_->start();
            history.note_fault(label);
          },
          violations);
    }
  }
  auto report = check(name_ + "-dlockd-clock-down", history, nullptr);
  for (auto& v : violations) report.violations.push_back(v);
  print(std::cout, report);
  EXPECT_EQ(report.faults, kSteps.size() * static_cast<std::size_t>(cycles(1, 10)));
  EXPECT_TRUE(report.ok());
}

// Scenario (j), the clients' clock: payout executors compete for batches while their wall clock
// steps by +-1 h. The client library measures its deadline on the monotonic clock, so no executor
// may write under a lock it lost (the guard would refuse the write: a rejected write here is a
// client that trusted a dead lock), and the common invariants hold.
TEST_P(ClockFaults, J_WallClockStepsOnClients) {
  start_dlockd({});
  testing::SteppedClock clock;
  static std::atomic<int> counter{0};
  const std::string resource_db = "clock_pay_" + std::to_string(counter++);
  postgres().ensure_database(resource_db);
  const std::string resource_url = postgres().url(resource_db);
  const int step_count = static_cast<int>(kSteps.size()) * cycles(1, 10);
  const std::string batches = "j0,j1,j2,j3";
  seed_payouts(resource_url, batches, long_mode() ? 4 * step_count : 8);
  const int hold_ms = long_mode() ? 300 : 60;
  std::vector<std::unique_ptr<testing::Subprocess>> executors;
  std::vector<std::string> names = {"x1", "x2", "x3"};
  for (const auto& name : names) {
    testing::SubprocessOptions process;
    process.argv = {DLOCK_PAYOUT_EXECUTOR_PATH,
                    "--server",
                    dlockd_->url(),
                    "--pg-url",
                    resource_url,
                    "--batches",
                    batches,
                    "--worker-id",
                    name,
                    "--hold-extra-ms",
                    std::to_string(hold_ms),
                    "--ttl-ms",
                    "2000",
                    "--wait-ms",
                    "1000",
                    "--give-up-s",
                    long_mode() ? "1800" : "90"};
    process.env = clock.env();
    process.log_path = dir_ + "/" + name + ".log";
    executors.push_back(std::make_unique<testing::Subprocess>(process));
  }
  auto writes = [&] {
    int total = 0;
    for (const auto& name : names) total += count_events(dir_ + "/" + name + ".log", "write", "ok");
    return total;
  };
  History history;
  for (int step = 0; step < step_count; ++step) {
    const int before = writes();
    if (!testing::wait_for([&] { return writes() >= before + 3; }, seconds(30))) break;
    const auto offset = kSteps[static_cast<std::size_t>(step) % kSteps.size()];
    clock.set_offset(offset);
    history.note_fault("client wall clock set to real " + std::to_string(offset.count()) + " s");
  }
  for (std::size_t i = 0; i < executors.size(); ++i) {
    EXPECT_EQ(executors[i]->wait(seconds(long_mode() ? 1800 : 120)), 0) << names[i];
  }
  for (const auto& name : names) history.load_executor_log(dir_ + "/" + name + ".log", name);
  const auto ledger = read_ledger(resource_url);
  auto report = check(name_ + "-client-clock", history, &ledger);
  if (report.rejected_writes > 0) {
    report.violations.push_back("J a client wrote under a lock it had lost (" +
                                std::to_string(report.rejected_writes) + " refused by the guard)");
  }
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(step_count));
  EXPECT_TRUE(report.ok());
}

std::vector<std::string> safety_backends() {
  std::vector<std::string> backends = {"sqlite", "pg"};
#ifdef DLOCK_WITH_ETCD
  backends.push_back("etcd");
#endif
  return backends;
}

INSTANTIATE_TEST_SUITE_P(Backends, ClockFaults, ::testing::ValuesIn(safety_backends()),
                         [](const auto& info) { return info.param; });

// A storage fault of the embedded store, injected and cleared while one client acquires fresh
// keys (long names, so that the store grows) and releases every other one. Every answer must be a
// grant or a clear 503 `unavailable` (never `held` for a free key, never a 500); once the fault
// is cleared grants resume with larger tokens; after a kill -9 and a restart every acknowledged
// grant not released is still there with its token, and no token was acknowledged twice.
struct StoreFault {
  std::string name;              // for the report, e.g. "sqlite/K-disk-full"
  std::string db_path;           // where the store lives
  std::vector<std::string> env;  // of dlockd
  std::function<void()> inject;
  std::function<void()> clear;
};

void run_store_fault(const StoreFault& fault) {
  const std::string logs = testing::make_temp_dir("dlock-disk-logs");
  History history;
  std::vector<std::string> violations;
  std::size_t unavailable = 0, fault_cycles = 0;
  testing::DlockdProcess dlockd(
      fault_dlockd(restartable_dlockd("sqlite"), fault.db_path, fault.env, logs));
  Recorder recorder(history, dlockd.address());
  std::map<std::string, std::uint64_t> held;  // keys whose last acknowledged op is a grant
  std::uint64_t max_token = 0;
  const std::string session = open_session(dlockd.address(), 600000);
  int key_index = 0;
  auto one_grant = [&]() {
    const std::string key = "disk-" + std::to_string(key_index++) + "-" + std::string(200, 'k');
    const auto granted = recorder.acquire("client", session, key, 600000, 0);
    if (granted.status == 200) {
      const auto token = token_of(granted);
      if (token <= max_token) {
        violations.push_back("K token " + std::to_string(token) + " not above " +
                             std::to_string(max_token));
      }
      max_token = std::max(max_token, token);
      held[key] = token;
      if (key_index % 2 == 0 && recorder.release("client", session, key, token).status == 204) {
        held.erase(key);
      }
    } else if (granted.status == 503) {
      ++unavailable;
      if (granted.error_code() != "unavailable") {
        violations.push_back("K a 503 without `unavailable`: " + granted.body);
      }
    } else {
      violations.push_back("K a free key answered " + std::to_string(granted.status) + ": " +
                           granted.body);
    }
    return granted.status;
  };
  for (int i = 0; i < 20; ++i) one_grant();
  for (int cycle = 0; cycle < cycles(1, 10); ++cycle) {
    fault.inject();
    history.note_fault(fault.name + " injected");
    // Grants may go on while the store needs no new space; from then on the answer is 503.
    int refused_in_a_row = 0;
    for (int i = 0; i < 5000 && refused_in_a_row < 20; ++i) {
      refused_in_a_row = one_grant() == 503 ? refused_in_a_row + 1 : 0;
    }
    if (refused_in_a_row < 20) violations.push_back("K the fault never refused a grant");
    fault.clear();
    // The fault is gone: grants resume (the first attempts may still find the store recovering).
    const bool resumed =
        testing::wait_for([&] { return one_grant() == 200; }, seconds(30), milliseconds(100));
    if (!resumed) violations.push_back("K grants did not resume once the fault was cleared");
    for (int i = 0; i < 10; ++i) one_grant();
    ++fault_cycles;
  }
  // Every acknowledged grant must survive a crash of dlockd.
  dlockd.kill9();
  history.note_fault("kill -9 dlockd");
  dlockd.start();
  for (const auto& [key, token] : held) {
    const auto read = testing::http_call(dlockd.address(), "GET", "/v1/locks/" + key);
    if (read.status != 200 || token_of(read) != token) {
      violations.push_back("K acknowledged grant lost after restart: " + key.substr(0, 12) +
                           " token " + std::to_string(token) + ": " + std::to_string(read.status) +
                           " " + read.error_code());
    }
  }
  // Whatever survived (acknowledged or not), no two live grants share a token.
  const auto live =
      testing::http_call(dlockd.address(), "GET", "/v1/locks?prefix=disk-&limit=1000");
  std::map<std::uint64_t, int> live_tokens;
  if (live.status == 200) {
    for (const auto& lock : live.json.at("locks").as_array()) {
      if (++live_tokens[lock.at("fencing_token").to_number<std::uint64_t>()] == 2) {
        violations.push_back("K two live grants with token " +
                             std::to_string(lock.at("fencing_token").to_number<std::uint64_t>()));
      }
    }
  }
  if (one_grant() != 200) violations.push_back("K no grant after the restart");
  // Tokens of every acknowledged grant, across keys, are unique (the checker's per-key I1
  // cannot see a token reissued to another key).
  std::map<std::uint64_t, int> tokens;
  for (const auto& op : history.operations()) {
    if (op.kind == "acquire" && op.outcome == Outcome::kOk && ++tokens[op.token] == 2) {
      violations.push_back("K token issued twice: " + std::to_string(op.token));
    }
  }
  auto report = check(fault.name, history, nullptr);
  // A broken store breaks every grant after the fault the same way: the first few say it.
  constexpr std::size_t kShown = 20;
  for (std::size_t i = 0; i < violations.size() && i < kShown; ++i)
    report.violations.push_back(violations[i]);
  if (violations.size() > kShown) {
    report.violations.push_back("K ... and " + std::to_string(violations.size() - kShown) +
                                " more");
  }
  print(std::cout, report);
  std::cout << "  fault cycles=" << fault_cycles << " refused_with_503=" << unavailable
            << " live grants checked after restart=" << held.size()
            << " highest token=" << max_token << "\n";
  EXPECT_EQ(fault_cycles, static_cast<std::size_t>(cycles(1, 10)));
  EXPECT_GT(unavailable, 0u);
  EXPECT_TRUE(report.ok());
  if (!::testing::Test::HasFailure()) {
    std::filesystem::remove_all(logs);
  } else {
    std::cout << "logs kept in " << logs << "\n";
  }
}

// Scenario (k): the store's file system (a 16 MiB tmpfs) fills up, then the space returns. Not
// smaller: SQLite checkpoints its WAL from 1000 pages (4 MiB) on, and a disk that the WAL alone
// can fill before its first checkpoint wedges the store (every commit fails, and so would the
// checkpoint that could shrink it).
TEST(DiskFaults, K_FullDiskOfTheEmbeddedStore) {
  if (!testing::SmallFilesystem::available()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
  }
  testing::SmallFilesystem fs(16 * 1024 * 1024);
  run_store_fault(StoreFault{.name = "sqlite/K-disk-full",
                             .db_path = fs.path() + "/dlock.db",
                             .env = {},
                             .inject = [&] { fs.fill(); },
                             .clear = [&] { fs.free_space(); }});
}

// Scenario (k): fsync and fdatasync of dlockd fail with EIO, then succeed again. Device-mapper
// (dm-error, dm-flakey) would fail the device itself; where the kernel offers none to the test,
// a preloaded shim (support/fail_fsync.cc) fails the calls: what SQLite and dlockd see is the
// same error, though the kernel still writes the data (a dm device could lose it).
TEST(DiskFaults, K_FailingFsyncOfTheEmbeddedStore) {
  const std::string dir = testing::make_temp_dir("dlock-fsync");
  const std::string trigger = dir + "/fail-fsync";
  run_store_fault(StoreFault{.name = "sqlite/K-fsync-fails",
                             .db_path = dir + "/dlock.db",
                             .env = {std::string("LD_PRELOAD=") + DLOCK_FAIL_FSYNC_PATH,
                                     "DLOCK_FAIL_FSYNC_WHEN=" + trigger},
                             .inject = [&] { std::ofstream(trigger) << "EIO\n"; },
                             .clear = [&] { std::filesystem::remove(trigger); }});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlock::safety
