// Fencing under real faults (docs/fencing.md): real dlockd and payout-executor
// processes, a real PostgreSQL resource, faults injected with signals. Each scenario records a
// history and the checker (checker.h) must find no violation -- and the negative control, the
// pause scenario without the guard, must make the checker find one.
//
// DLOCK_SAFETY_LONG=1 repeats every fault cycle many times (minutes per scenario).

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <map>

#include "safety/fencing_faults.h"
#include "safety/recorder.h"

namespace dlock::safety {
namespace {

TEST_P(FencingFaults, A_PausedHolderPastTtlIsFencedOff) {
  const auto report = run_pause_scenario(true, cycles(1, 15));
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  // The scenario really produced a stale write, and the guard refused it (once per cycle).
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycles(1, 15)));
}

// THE NEGATIVE CONTROL: the same pause without the guard must be caught by the checker.
TEST_P(FencingFaults, NegativeControl_WithoutFencingTheCheckerFindsDoublePayout) {
  const auto report = run_pause_scenario(false, 1);
  print(std::cout, report);
  EXPECT_FALSE(report.ok()) << "the checker missed the stale holder's write";
  EXPECT_TRUE(report.has("I3")) << "expected a double payout";
  EXPECT_TRUE(report.has("I2")) << "expected a stale token accepted";
  EXPECT_EQ(report.rejected_writes, 0u);
}

// Scenario (l): the same pause for an election's leader (C3 "Elections", docs/fencing.md "A
// leader's token"): a leader stopped past its session's end wakes after the next leader paid,
// and its writes are refused by the token the next leader's grant outranks.
TEST_P(FencingFaults, L_PausedLeaderPastItsSessionIsFencedOff) {
  const auto report = run_pause_scenario(true, cycles(1, 10), /*elect=*/true);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(cycles(1, 10)));
}

// Its negative control: the paused leader without the guard pays twice, and the checker says so.
TEST_P(FencingFaults, NegativeControl_WithoutFencingAPausedLeaderPaysTwice) {
  const auto report = run_pause_scenario(false, 1, /*elect=*/true);
  print(std::cout, report);
  EXPECT_FALSE(report.ok()) << "the checker missed the stale leader's write";
  EXPECT_TRUE(report.has("I3")) << "expected a double payout";
  EXPECT_TRUE(report.has("I2")) << "expected a stale token accepted";
  EXPECT_EQ(report.rejected_writes, 0u);
}

// Scenario (b): dlockd is killed with -9 while executors compete, and restarted on the same
// storage and address: at once on even cycles, after the 2 s leases passed on odd ones (then
// every grant of the old run is expired when it comes back and the executors must re-acquire).
TEST_P(FencingFaults, B_Kill9OfDlockdAndRestart) {
  const int kill_cycles = cycles(2, 40);
  int cycle = 0;
  const auto report = run_competing_scenario("k0,k1,k2,k3", kill_cycles, "kill -9 dlockd", [&] {
    dlockd_->kill9();
    if (cycle++ % 2 == 1) std::this_thread::sleep_for(milliseconds(2500));  // the lease passes
    dlockd_->start();
  });
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(kill_cycles));
  EXPECT_TRUE(report.ok());
}

// Scenario (f), etcd only: the leader of a three-member etcd cluster is killed with -9 while
// executors compete; the cluster elects a new leader, dlockd fails over to a live member, and the
// killed member comes back as a follower.
TEST_P(FencingFaults, F_Kill9OfTheEtcdLeader) {
#ifdef DLOCK_WITH_ETCD
  if (GetParam() != "etcd") GTEST_SKIP() << "a three-member cluster is an etcd deployment";
  const int kill_cycles = cycles(2, 20);
  const auto report =
      run_competing_scenario("f0,f1,f2,f3", kill_cycles, "kill -9 etcd leader", [&] {
        const auto leader = etcd_->leader();
        ASSERT_TRUE(leader.has_value()) << "no etcd leader before the fault";
        etcd_->kill(*leader);
        etcd_->wait_ready(seconds(30));
        etcd_->start(*leader);
      });
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(kill_cycles));
  EXPECT_TRUE(report.ok());
#else
  GTEST_SKIP() << "built without the etcd store";
#endif
}

// Scenario (e): PostgreSQL -- the resource, and with the pg backend also dlockd's store -- is
// killed (immediate shutdown, no checkpoint) and restarted at once while executors compete.
TEST_P(FencingFaults, E_CrashOfPostgresAndRestart) {
  const int crash_cycles = cycles(2, 20);
  const auto report = run_competing_scenario("e0,e1,e2,e3", crash_cycles, "crash PostgreSQL", [&] {
    postgres().crash();
    postgres().start();
  });
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(crash_cycles));
  EXPECT_TRUE(report.ok());
}

// Scenario (c): an expired holder's late extend and release are refused (409 lock_lost) and
// leave the new holder alone. Control: the same calls before expiry succeed.
TEST_P(FencingFaults, C_LateExtendAndReleaseFromExpiredHolderAreRefused) {
  History history;
  Recorder recorder(history, dlockd_->address(), {}, bearer_);
  std::vector<std::string> violations;
  for (int cycle = 0; cycle < cycles(2, 60); ++cycle) {
    const std::string key = "late-" + std::to_string(cycle);
    // Odd cycles: the old holder's whole session expired; even: only its lock did.
    const bool session_dies = cycle % 2 == 1;
    const auto old_session = open_session(dlockd_->address(), session_dies ? 1000 : 60000, bearer_);
    const auto new_session = open_session(dlockd_->address(), 60000, bearer_);
    const auto first = recorder.acquire("client-old", old_session, key, 1000, 0);
    ASSERT_EQ(first.status, 200) << first.body;
    const auto old_token = token_of(first);
    // Control: while the grant lives, extend succeeds with the same token.
    const auto live_extend = recorder.extend("client-old", old_session, key, old_token);
    ASSERT_EQ(live_extend.status, 200) << "control: a live extend must succeed";
    std::this_thread::sleep_for(milliseconds(1500));  // let the lease pass: the point
    history.note_fault(session_dies ? "session expiry" : "lock expiry");
    const auto taken = recorder.acquire("client-new", new_session, key, 30000, 5000);
    ASSERT_EQ(taken.status, 200) << taken.body;
    const auto new_token = token_of(taken);
    const auto late_extend = recorder.extend("client-old", old_session, key, old_token);
    const auto late_release = recorder.release("client-old", old_session, key, old_token);
    for (const auto* late : {&late_extend, &late_release}) {
      if (late->status / 100 == 2) violations.push_back("late call of an expired holder accepted");
      if (!session_dies) {
        EXPECT_EQ(late->status, 409) << late->body;
        EXPECT_EQ(late->error_code(), "lock_lost");
      } else {
        EXPECT_TRUE(late->error_code() == "lock_lost" || late->error_code() == "session_not_found")
            << late->body;
      }
    }
    const auto read = api("GET", "/v1/locks/" + key);
    if (read.status != 200 || token_of(read) != new_token ||
        read.json.at("session_id").as_string() != new_session) {
      violations.push_back("the new holder was disturbed: " + read.body);
    }
    EXPECT_EQ(recorder.release("client-new", new_session, key, new_token).status, 204);
  }
  auto report = check(name_, history, nullptr);
  for (auto& v : violations) report.violations.push_back("LATE " + v);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
}

// Scenario (d): a waiter whose session dies while it waits is not granted (etcd-io/etcd#11456).
// Control: a waiter whose session lives is granted on the same hand-over.
TEST_P(FencingFaults, D_WaiterWhoseSessionDiesIsNotGranted) {
  History history;
  Recorder recorder(history, dlockd_->address(), {}, bearer_);
  std::vector<std::string> violations;
  for (int cycle = 0; cycle < cycles(1, 60); ++cycle) {
    for (const bool kill_waiter : {false, true}) {
      const std::string key = "waiter-" + std::to_string(cycle) + (kill_waiter ? "-dead" : "-live");
      const auto holder = open_session(dlockd_->address(), 60000, bearer_);
      const auto waiter = open_session(dlockd_->address(), 60000, bearer_);
      const auto held = recorder.acquire("client-holder", holder, key, 30000, 0);
      ASSERT_EQ(held.status, 200) << held.body;
      testing::HttpResult waited;
      std::thread waiting(
          [&] { waited = recorder.acquire("client-waiter", waiter, key, 30000, 8000); });
      const std::string waiting_line = "dlock_waiters{backend=\"" + GetParam() + "\"} 1\n";
      const bool queued = testing::wait_for(
          [&] {
            return testing::http_call(dlockd_->address(), "GET", "/metrics")
                       .body.find(waiting_line) != std::string::npos;
          },
          seconds(10));
      EXPECT_TRUE(queued) << "the waiter never queued";
      if (kill_waiter) {
        EXPECT_EQ(api("DELETE", "/v1/sessions/" + waiter).status, 204);
        history.note_fault("waiter session closed while waiting");
      }
      EXPECT_EQ(recorder.release("client-holder", holder, key, token_of(held)).status, 204);
      waiting.join();
      const auto read = api("GET", "/v1/locks/" + key);
      if (kill_waiter) {
        if (waited.status == 200) violations.push_back("dead waiter granted: " + waited.body);
        if (read.status == 200) violations.push_back("dead waiter holds the key: " + read.body);
      } else {
        EXPECT_EQ(waited.status, 200) << "control: a live waiter must be granted: " << waited.body;
        EXPECT_EQ(read.status, 200);
      }
    }
  }
  auto report = check(name_, history, nullptr);
  for (auto& v : violations) report.violations.push_back("WAIT " + v);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
}

// Scenario (m): a holder extends its lock for longer than it first asked, and a waiter queues
// for the key. I5: the waiter is not granted the key inside the lifetime the holder was told.
// (An etcd lease renews only for its first TTL; dlockd once answered the asked ttl_ms, and the
// waiter got the key seconds early: ADR-0011.)
TEST_P(FencingFaults, M_ExtendBeyondTheFirstTtlIsKeptAsAnswered) {
  History history;
  Recorder recorder(history, dlockd_->address(), {}, bearer_);
  for (int cycle = 0; cycle < cycles(1, 10); ++cycle) {
    const std::string key = "longer-" + std::to_string(cycle);
    const auto holder = open_session(dlockd_->address(), 60000, bearer_);
    const auto waiter = open_session(dlockd_->address(), 60000, bearer_);
    const auto held = recorder.acquire("client-holder", holder, key, 1000, 0);
    ASSERT_EQ(held.status, 200) << held.body;
    const auto extended = recorder.extend("client-holder", holder, key, token_of(held), 4000);
    ASSERT_EQ(extended.status, 200) << extended.body;
    history.note_fault("extend beyond the first TTL");
    const auto taken = recorder.acquire("client-waiter", waiter, key, 30000, 10000);
    ASSERT_EQ(taken.status, 200) << "the extended lock never ended: " << taken.body;
    EXPECT_EQ(recorder.release("client-waiter", waiter, key, token_of(taken)).status, 204);
  }
  const auto report = check(name_, history, nullptr);
  print(std::cout, report);
  EXPECT_TRUE(report.ok());
}

// --- Scenario (l): restores of the store (ADR-0010) ---

std::string pg_tool(const std::string& name) {
  if (const char* dir = std::getenv("DLOCK_PG_BIN_DIR")) return std::string(dir) + "/" + name;
  for (const char* version : {"15", "16", "17", "14", "13"}) {
    const std::string path = std::string("/usr/lib/postgresql/") + version + "/bin/" + name;
    if (std::filesystem::exists(path)) return path;
  }
  throw std::runtime_error(name + " not found");
}

void run_tool(std::vector<std::string> argv, const std::string& log_path,
              std::vector<std::string> env = {}) {
  testing::SubprocessOptions options;
  options.argv = std::move(argv);
  options.env = std::move(env);
  options.log_path = log_path;
  const auto tool = options.argv.front();
  if (testing::run_command(options, seconds(120)) != 0) {
    throw std::runtime_error(tool + " failed; see " + log_path);
  }
}

void admin_sql(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* result = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  const std::string message = PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  if (!ok) throw std::runtime_error(sql + ": " + message);
}

// Scenario (l): while executors compete, dlockd is stopped (kill -9) and its store is backed
// up (even cycles) or restored from the last backup (odd cycles), then dlockd starts again.
// Each backend with its own tools: sqlite, the database file copied; pg, pg_dump -Fc and,
// to restore, the database dropped, created again and pg_restore'd; etcd, `etcdctl snapshot
// save` / `snapshot restore` into a new data directory, followed by the documented step
// `dlockd --etcd-raise-revision-to N` with N the revision read after dlockd stopped.
// The checker's I1 (tokens of a key increase in real time) fails if a restore rewinds tokens;
// a rewound token granted for another key is caught by the global uniqueness check below.
// Negative controls: the mutation rows sqlite-no-restore-floor-safety and
// pg-no-restore-floor-safety run it with the floor removed.
TEST_P(FencingFaults, L_RestoreOfTheStoreFromAnEarlierBackup) {
  const int restore_cycles = cycles(2, 20);
  const std::string backup = dir_ + "/store-backup";
  const std::string tools_log = dir_ + "/restore-tools.log";
  const auto& config = dlockd_->options();
  auto back_up = [&] {
    if (GetParam() == "sqlite") {
      for (const char* suffix : {"", "-wal"}) {
        std::error_code ignored;
        std::filesystem::remove(backup + suffix, ignored);
        if (std::filesystem::exists(dlockd_->sqlite_path() + suffix)) {
          std::filesystem::copy_file(dlockd_->sqlite_path() + suffix, backup + suffix);
        }
      }
    } else if (GetParam() == "pg") {
      run_tool({pg_tool("pg_dump"), "-Fc", "-f", backup, config.pg_url}, tools_log);
    } else {
#ifdef DLOCK_WITH_ETCD
      std::filesystem::remove(backup);
      run_tool({"/usr/bin/etcdctl", "--endpoints", etcd_->endpoint(0), "snapshot", "save", backup},
               tools_log, {"ETCDCTL_API=3"});
#endif
    }
  };
  auto restore = [&] {
    if (GetParam() == "sqlite") {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::error_code ignored;
        std::filesystem::remove(dlockd_->sqlite_path() + suffix, ignored);
        if (std::filesystem::exists(backup + suffix)) {
          std::filesystem::copy_file(backup + suffix, dlockd_->sqlite_path() + suffix);
        }
      }
    } else if (GetParam() == "pg") {
      const std::string database = config.pg_url.substr(config.pg_url.rfind('/') + 1);
      admin_sql(postgres().url(), "DROP DATABASE \"" + database + "\" WITH (FORCE)");
      admin_sql(postgres().url(), "CREATE DATABASE \"" + database + "\"");
      run_tool({pg_tool("pg_restore"), "--exit-on-error", "-d", config.pg_url, backup}, tools_log);
    } else {
#ifdef DLOCK_WITH_ETCD
      // The operator's N: the cluster's revision once every dlockd has stopped.
      const auto highest = etcd_->raw().current_revision();
      etcd_->restore_snapshot(backup);
      run_tool({DLOCK_DLOCKD_PATH, "--etcd-endpoints", etcd_->endpoints(),
                "--etcd-raise-revision-to", std::to_string(highest)},
               tools_log);
#endif
    }
  };
  int cycle = 0;
  auto back_up_or_restore = [&] {
    dlockd_->kill9();
    if (cycle++ % 2 == 0) {
      back_up();
    } else {
      restore();
    }
    // The 2 s leases pass while dlockd is down. After a backup, the executors then take new
    // grants (new tokens) after it: the tokens a restore could hand out again. After a restore,
    // it is the documented procedure (docs/fencing.md): a restored store has forgotten the
    // grants made since the backup, whose holders may believe in them until their deadline, so
    // it must not serve before the longest lock TTL has passed since the old dlockd stopped.
    // Real time: the leases must pass while dlockd is down (the point).
    std::this_thread::sleep_for(milliseconds(2500));
    dlockd_->start();
  };
  const auto report = run_competing_scenario(
      "l0,l1,l2,l3", restore_cycles, "kill -9 dlockd, back up or restore", back_up_or_restore);
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(restore_cycles));
  EXPECT_TRUE(report.ok());
  // I1 is per key; a restore that rewinds the one global token source (C1) may hand out an old
  // token for another key, which I1 does not see. So no token repeats across keys either, except
  // on etcd for grants applied in one batched Txn (concurrent calls; reissued_tokens).
  History grants;
  for (const char* name : {"x1", "x2", "x3"}) {
    grants.load_executor_log(dir_ + "/" + name + ".log", name);
  }
  for (const auto& finding : reissued_tokens(grants.operations(), GetParam() == "etcd")) {
    ADD_FAILURE() << finding;
  }
}

std::vector<std::string> safety_backends() {
  std::vector<std::string> backends = {"sqlite", "pg"};
#ifdef DLOCK_WITH_ETCD
  backends.push_back("etcd");
#endif
  return backends;
}

INSTANTIATE_TEST_SUITE_P(Backends, FencingFaults, ::testing::ValuesIn(safety_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::safety
