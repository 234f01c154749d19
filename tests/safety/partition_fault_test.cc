// Network partitions (docs/fencing.md, scenarios g, h, i): real dlockd, payout-executor and etcd
// processes placed in network namespaces the test creates (tests/support/netns.h; the topologies
// of h and i, shared with the linearizability workload, in tests/support/partitions.h), partitions
// made by taking one end of a veth down (the other side's packets then vanish silently), traffic
// only between this machine's own addresses. Each scenario records a history that the common
// checker (checker.h) must find clean; a partition adds its own rule: no grant, and no answer but
// 503, from a dlockd that cannot reach its backend's majority while the partition lasts.
//
// DLOCK_SAFETY_LONG=1 repeats every partition cycle many times.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "safety/checker.h"
#include "safety/cluster.h"
#include "safety/history.h"
#include "safety/recorder.h"
#include "support/dlockd_process.h"
#include "support/netns.h"
#include "support/partitions.h"
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

// A dlockd that cannot reach its backend must give up on a call within this bound (and answer
// 503); shorter than the 5 s default so that a partition cycle takes seconds, not minutes.
const std::vector<std::string> kBackendTimeout = {"--backend-timeout", "2s"};

// "503 {...}", or "no answer" for a call given up after kAnswerBound.
std::string describe(const testing::HttpResult& answer) {
  return answer.status == 0 ? "no answer" : std::to_string(answer.status) + " " + answer.body;
}

// A dlockd that hangs instead of answering 503 must fail the scenario, not hang it: the call
// runs on a thread of its own and is given up (as unknown) after kAnswerBound. The abandoned
// thread touches nothing but its own shared state.
constexpr auto kAnswerBound = seconds(15);

testing::HttpResult bounded_http_call(const std::string& address, const std::string& method,
                                      const std::string& target, const std::string& body) {
  auto answer = std::make_shared<std::promise<testing::HttpResult>>();
  auto future = answer->get_future();
  std::thread([answer, address, method, target, body] {
    try {
      answer->set_value(testing::http_call(address, method, target, body));
    } catch (...) {
      answer->set_exception(std::current_exception());
    }
  }).detach();
  if (future.wait_for(kAnswerBound) != std::future_status::ready) {
    throw std::runtime_error("no answer within " + std::to_string(kAnswerBound.count()) + " s");
  }
  return future.get();
}

// The partition scenarios' recorder: every call names its dlockd and is bounded
// (bounded_http_call).
class PartitionRecorder : public Recorder {
 public:
  // "503x12 409x1": the statuses of the answers counted by count().
  static std::string histogram(const std::map<int, int>& statuses) {
    std::string text;
    for (const auto& [status, count] : statuses) {
      text += (text.empty() ? "" : " ") + std::to_string(status) + "x" + std::to_string(count);
    }
    return text.empty() ? "none" : text;
  }

  explicit PartitionRecorder(History& history) : Recorder(history, "", bounded_http_call) {}

  // Keeps acquiring (as a client library does) until granted or `within` passes.
  testing::HttpResult acquire_until_granted(const std::string& address, const std::string& process,
                                            const std::string& session, const std::string& key,
                                            int ttl_ms, milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    testing::HttpResult result;
    while (std::chrono::steady_clock::now() < deadline) {
      result = acquire_at(address, process, session, key, ttl_ms, 3000);
      if (result.status == 200) break;
      std::this_thread::sleep_for(milliseconds(100));  // a client's retry pause
    }
    return result;
  }
};

// The partition rule: while [begin, end] a dlockd cut off from its backend grants nothing.
// Every acquire of `process_prefix` acknowledged inside the window is a violation.
void check_no_grant_during(const History& history, const std::string& process_prefix,
                           std::int64_t begin, std::int64_t end, Report& report) {
  for (const auto& op : history.operations()) {
    if (op.kind == "acquire" && op.outcome == Outcome::kOk &&
        op.process.rfind(process_prefix, 0) == 0 && op.end_ns > begin && op.end_ns < end) {
      report.violations.push_back("PARTITION grant while cut off: " + op.process + " " + op.key +
                                  " token " + std::to_string(op.token));
    }
  }
}

class PartitionFaults : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    testing::remove_stale_namespaces();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    static std::atomic<int> counter{0};
    suffix_ = std::to_string(getpid()) + "_" + std::to_string(counter++);
    resource_db_ = "pay_" + suffix_;
    postgres().ensure_database(resource_db_);
    resource_url_ = postgres().url(resource_db_);
    dir_ = testing::make_temp_dir("dlock-partition-logs");
    name_ = GetParam() + "/" + name.substr(0, name.find('_'));
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (!HasFailure())
      std::filesystem::remove_all(dir_);
    else
      std::cout << "logs kept in " << dir_ << "\n";
  }

  // The store part of a dlockd configuration on this machine's loopback: pg gets a fresh
  // database, etcd a fresh single member (kept in etcd_).
  testing::DlockdOptions local_store_config() {
    auto config = restartable_dlockd(GetParam());
    if (GetParam() == "pg") {
      postgres().ensure_database("locks_" + suffix_);
      config.pg_url = postgres().url("locks_" + suffix_);
    }
#ifdef DLOCK_WITH_ETCD
    if (GetParam() == "etcd") {
      etcd_ = std::make_unique<testing::EtcdCluster>(1);
      config.etcd_endpoints = etcd_->endpoints();
    }
#endif
    config.extra_args = kBackendTimeout;
    return config;
  }

  // Scenario (g): the holder runs in its own namespace; it reaches dlockd and (through a relay)
  // the resource database, each over a veth of its own. Once it is inside a payment (validity
  // checked, write not yet sent), its cable to dlockd is cut: it cannot extend, its lease ends,
  // another executor takes the batch over with a greater token and pays. The partition heals; the
  // holder's late write reaches the resource and must be refused by the guard.
  Report run_holder_partition(bool fencing, int cycle_count) {
    testing::NetNamespace holder_ns("holder");
    // Two cables: to dlockd (cut in the partition) and to the resource (never cut).
    const auto control_net = testing::Subnet::next();
    testing::Veth control(nullptr, control_net.cidr(1), &holder_ns, control_net.cidr(2));
    const auto data_net = testing::Subnet::next();
    testing::Veth data(nullptr, data_net.cidr(1), &holder_ns, data_net.cidr(2));
    testing::TcpRelay resource_relay(data_net.host(1), "127.0.0.1", postgres().port());
    auto config = local_store_config();
    config.listen_host = control_net.host(1);  // the taker reaches it locally, cut or not
    testing::DlockdProcess dlockd(config);

    History history;
    for (int cycle = 0; cycle < cycle_count; ++cycle) {
      const std::string batch = "part" + std::to_string(cycle);
      seed_payouts(resource_url_, batch, 5);
      ExecutorOptions options;
      options.server_url = dlockd.url();
      options.batches = batch;
      options.fencing = fencing;
      options.give_up_s = 90;
      options.ttl_ms = 2000;
      // Longer than the TTL: without a partition auto-extend keeps the lock through it.
      options.hold_extra_ms = 5000;
      options.name = "holder" + std::to_string(cycle);
      options.pg_url = "postgresql://dlock@" + resource_relay.address() + "/" + resource_db_;
      options.wrapper = holder_ns.wrap({});
      ExecutorProcess holder(dir_, options);
      EXPECT_TRUE(testing::wait_for([&] { return holder.events("pay_begin") >= 1; }, seconds(30)))
          << "the holder never started a payment";
      control.set_a_up(false);
      history.note_fault("partition holder | dlockd");

      options.name = "taker" + std::to_string(cycle);
      options.hold_extra_ms = 0;
      options.pg_url = resource_url_;
      options.wrapper.clear();
      ExecutorProcess taker(dir_, options);
      EXPECT_TRUE(testing::wait_for([&] { return taker.events("write", "ok") >= 1; }, seconds(30)))
          << "nobody took the batch over while the holder was cut off";
      // The scenario needs the stale write to come after the takeover: it would otherwise prove
      // nothing about the guard.
      EXPECT_EQ(holder.events("write"), 0) << "the holder wrote before the takeover";
      control.set_a_up(true);
      history.note_fault("heal holder | dlockd");
      EXPECT_EQ(taker.process().wait(seconds(60)), 0) << "the taker did not finish";
      EXPECT_EQ(holder.process().wait(seconds(60)), 0) << "the healed holder did not finish";
      history.load_executor_log(holder.log_path(), holder.name());
      history.load_executor_log(taker.log_path(), taker.name());
    }
    const auto ledger = read_ledger(resource_url_);
    return check(name_ + (fencing ? "" : "/no-fencing"), history, &ledger);
  }

  std::string suffix_;
  std::string resource_db_;
  std::string resource_url_;
  std::string dir_;
  std::string name_;
#ifdef DLOCK_WITH_ETCD
  std::unique_ptr<testing::EtcdCluster> etcd_;
#endif
};

TEST_P(PartitionFaults, G_HolderCutOffFromDlockdPastTtlIsFencedOff) {
  const int n = cycles(1, 10);
  const auto report = run_holder_partition(true, n);
  print(std::cout, report);
  EXPECT_EQ(report.faults, static_cast<std::size_t>(2 * n));
  EXPECT_TRUE(report.ok());
  // Each cycle produced a late write of the healed holder, and the guard refused it.
  EXPECT_EQ(report.rejected_writes, static_cast<std::size_t>(n));
}

// THE NEGATIVE CONTROL of (g): the same partition without the guard pays twice.
TEST_P(PartitionFaults, NegativeControl_G_WithoutFencingTheHealedHolderPaysTwice) {
  const auto report = run_holder_partition(false, 1);
  print(std::cout, report);
  EXPECT_TRUE(report.has("I3")) << "expected a double payout";
  EXPECT_TRUE(report.has("I2")) << "expected a stale token accepted";
  EXPECT_EQ(report.rejected_writes, 0u);
}

// Scenario (h): dlockd runs in its own namespace and reaches its backend (PostgreSQL or etcd,
// through a relay on a veth of its own); clients reach dlockd over another veth. The cable to
// the backend is cut for longer than the holder's TTL.
// While it lasts every answer is 503 -- never "held", "free" or a grant; a waiter that keeps
// asking is granted after the heal, with a greater token.
TEST_P(PartitionFaults, H_DlockdCutOffFromItsBackend) {
  if (GetParam() == "sqlite") GTEST_SKIP() << "the embedded store has no network to cut";
  // Two cables: from the clients (never cut) and to the backend (cut in the partition).
  testing::DlockdNetwork network;
  auto config = local_store_config();
  network.place(config);
  testing::DlockdProcess dlockd(config);
  const auto address = dlockd.address();

  History history;
  PartitionRecorder recorder(history);
  std::vector<std::string> violations;
  std::vector<std::pair<std::int64_t, std::int64_t>> windows;
  int probes = 0;
  std::map<int, int> statuses;  // answers of the cut-off dlockd
  for (int cycle = 0; cycle < cycles(2, 20); ++cycle) {
    const std::string key = "h" + std::to_string(cycle);
    const auto holder = open_session(address, 120000);
    const auto waiter = open_session(address, 120000);
    const auto prober = open_session(address, 120000);
    const auto held = recorder.acquire_at(address, "client-holder", holder, key, 2000, 0);
    ASSERT_EQ(held.status, 200) << held.body;
    testing::HttpResult granted;
    std::thread waiting([&] {
      granted =
          recorder.acquire_until_granted(address, "client-waiter", waiter, key, 30000, seconds(60));
    });
    network.cut_backend(true);
    const auto begin = monotonic_ns();
    history.note_fault("partition dlockd | backend");
    // Longer than the holder's TTL, and long enough for several probes.
    const auto until = std::chrono::steady_clock::now() + seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      const std::string free_key = key + "-free" + std::to_string(probes);
      const testing::HttpResult answers[] = {
          recorder.acquire_at(address, "probe", prober, free_key, 2000, 0),
          recorder.acquire_at(address, "probe", prober, key, 2000, 0),
          recorder.call_at(address, "probe", prober, key, "read", "GET", "/v1/locks/" + key)};
      for (const auto& answer : answers) {
        ++probes;
        ++statuses[answer.status];
        if (answer.status != 503) {
          violations.push_back("PARTITION answered " + describe(answer) + " while cut off");
        }
      }
      std::this_thread::sleep_for(milliseconds(50));  // pace the probes, not a wait
    }
    network.cut_backend(false);
    const auto end = monotonic_ns();
    windows.emplace_back(begin, end);
    history.note_fault("heal dlockd | backend");
    waiting.join();
    EXPECT_EQ(granted.status, 200) << "the waiter was not granted after the heal: " << granted.body;
    if (granted.status == 200) {
      EXPECT_GT(token_of(granted), token_of(held));
      EXPECT_EQ(
          recorder.release_at(address, "client-waiter", waiter, key, token_of(granted)).status,
          204);
    }
    // The holder's lease ended during the partition: its late release is refused.
    const auto late = recorder.release_at(address, "client-holder", holder, key, token_of(held));
    if (late.status / 100 == 2) violations.push_back("LATE release of an expired holder accepted");
  }
  auto report = check(name_, history, nullptr);
  for (const auto& [begin, end] : windows) check_no_grant_during(history, "", begin, end, report);
  for (auto& v : violations) report.violations.push_back(v);
  print(std::cout, report);
  std::cout << "PARTITION " << name_ << ": cycles=" << report.faults / 2
            << " operations=" << report.operations << " probes_while_cut_off=" << probes
            << " answers=" << PartitionRecorder::histogram(statuses)
            << " violations=" << report.violations.size() << "\n";
  EXPECT_TRUE(report.ok());
}

// Scenario (i), etcd only: the member dlockd A talks to is cut off from the majority while A's
// client holds a lock. A grants nothing while cut off; dlockd B on the majority side takes the
// lock over once the holder's lease has ended there (every answer of A meanwhile is 503: a
// grant, "held" or "free" would be a claim it cannot prove); after the heal A grants again, with
// tokens greater than every one before.
TEST_P(PartitionFaults, I_EtcdMemberCutOffFromTheMajority) {
#ifdef DLOCK_WITH_ETCD
  if (GetParam() != "etcd") GTEST_SKIP() << "a three-member cluster is an etcd deployment";
  testing::PartitionedEtcd cluster;
  // dlockd A beside member 0; the test reaches it over its own veth, not over the bridge.
  testing::DlockdNetwork a_network(&cluster.member_namespace(0));
  auto a_config = restartable_dlockd("etcd");
  a_config.etcd_endpoints = cluster.endpoint(0);
  a_network.place(a_config);
  a_config.extra_args = kBackendTimeout;
  testing::DlockdProcess a(a_config);
  auto b_config = restartable_dlockd("etcd");
  b_config.etcd_endpoints = cluster.endpoint(1) + "," + cluster.endpoint(2);
  b_config.extra_args = kBackendTimeout;
  testing::DlockdProcess b(b_config);

  History history;
  PartitionRecorder recorder(history);
  std::vector<std::string> violations;
  std::vector<std::pair<std::int64_t, std::int64_t>> windows;
  int probes = 0;
  std::map<int, int> statuses;  // answers of the cut-off dlockd
  for (int cycle = 0; cycle < cycles(2, 20); ++cycle) {
    const std::string key = "i" + std::to_string(cycle);
    const auto holder = open_session(a.address(), 120000);
    const auto prober = open_session(a.address(), 120000);
    const auto taker = open_session(b.address(), 120000);
    const auto held = recorder.acquire_at(a.address(), "A-holder", holder, key, 2000, 0);
    ASSERT_EQ(held.status, 200) << held.body;

    cluster.isolate(0, true);
    const auto begin = monotonic_ns();
    history.note_fault("isolate etcd member 0 (dlockd A) from the majority");
    testing::HttpResult taken;
    std::atomic<bool> taking_done{false};
    std::thread taking([&] {
      taken =
          recorder.acquire_until_granted(b.address(), "B-taker", taker, key, 30000, seconds(30));
      taking_done = true;
    });
    // Probe A for as long as the takeover on the majority side takes, and at least 4 s.
    const auto at_least = std::chrono::steady_clock::now() + seconds(4);
    while (!taking_done || std::chrono::steady_clock::now() < at_least) {
      const std::string free_key = key + "-free" + std::to_string(probes);
      const testing::HttpResult answers[] = {
          recorder.acquire_at(a.address(), "A-probe", prober, free_key, 2000, 0),
          recorder.acquire_at(a.address(), "A-probe", prober, key, 2000, 0),
          recorder.call_at(a.address(), "A-probe", prober, key, "read", "GET", "/v1/locks/" + key)};
      for (const auto& answer : answers) {
        ++probes;
        ++statuses[answer.status];
        // A grant, "held" or "free" would each be a claim the minority cannot prove.
        if (answer.status != 503) {
          violations.push_back("PARTITION minority dlockd answered " + describe(answer));
        }
      }
      std::this_thread::sleep_for(milliseconds(50));  // pace the probes, not a wait
    }
    taking.join();
    EXPECT_EQ(taken.status, 200) << "the majority side never took the lock over: " << taken.body;
    cluster.isolate(0, false);
    const auto end = monotonic_ns();
    windows.emplace_back(begin, end);
    history.note_fault("heal etcd member 0");
    cluster.wait_healthy(seconds(60));
    if (taken.status == 200) {
      EXPECT_GT(token_of(taken), token_of(held));
      EXPECT_EQ(recorder.release_at(b.address(), "B-taker", taker, key, token_of(taken)).status,
                204);
    }
    // After the heal A grants again, with a token above every one before.
    const auto again =
        recorder.acquire_until_granted(a.address(), "A-after", holder, key, 2000, seconds(30));
    ASSERT_EQ(again.status, 200) << "A does not grant after the heal: " << again.body;
    if (taken.status == 200) {
      EXPECT_GT(token_of(again), token_of(taken));
    }
    EXPECT_EQ(recorder.release_at(a.address(), "A-after", holder, key, token_of(again)).status,
              204);
  }
  auto report = check(name_, history, nullptr);
  for (const auto& [begin, end] : windows) check_no_grant_during(history, "A-", begin, end, report);
  for (auto& v : violations) report.violations.push_back(v);
  print(std::cout, report);
  std::cout << "PARTITION " << name_ << ": cycles=" << report.faults / 2
            << " operations=" << report.operations << " minority_probes=" << probes
            << " answers=" << PartitionRecorder::histogram(statuses)
            << " violations=" << report.violations.size() << "\n";
  EXPECT_TRUE(report.ok());
#else
  GTEST_SKIP() << "built without the etcd store";
#endif
}

std::vector<std::string> partition_backends() {
  std::vector<std::string> backends = {"sqlite", "pg"};
#ifdef DLOCK_WITH_ETCD
  backends.push_back("etcd");
#endif
  return backends;
}

INSTANTIATE_TEST_SUITE_P(Backends, PartitionFaults, ::testing::ValuesIn(partition_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::safety
