// `dlock run` as a user runs it: the real dlock binary against a fake dlockd. Covers exit
// status propagation, the environment given to CMD, SIGTERM -> SIGKILL escalation when the
// lock is lost, the stop timeline before the lock's deadline (ADR-0014), CMD's whole process
// group being stopped, signal forwarding and the sysexits codes.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/child_process.h"
#include "cli/exit_codes.h"
#include "fake_lock_api.h"
#include "wait_until.h"

namespace dlock::client {
namespace {

using cli::ChildProcess;
using std::chrono::milliseconds;
using testing::FakeLockApi;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::wait_until;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

class DlockRunTest : public ::testing::Test {
 protected:
  DlockRunTest() : server_([this](const FakeRequest& request) { return this->handle(request); }) {
    char pattern[] = "/tmp/dlock-run-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  ~DlockRunTest() override {
    // A process a failing test left behind (dlock's grandchild, not ours to reap).
    for (pid_t pid : leftovers_) ::kill(pid, SIGKILL);
    std::filesystem::remove_all(dir_);
  }

  // Answers as FakeLockApi does (a grant is session-bound when the acquire asked for one, as
  // dlockd answers), noting when the last successful extend and keepalive arrived and running
  // the test's hook first.
  FakeResponse handle(const FakeRequest& request) {
    if (on_request_) on_request_(request);
    const bool is_post = request.method == "POST";
    if (is_post && request.target.find("/acquire") != std::string::npos) {
      api_.session_bound = request.body.find(R"("lease":"session")") != std::string::npos;
    }
    FakeResponse response = api_.handle(request);
    if (is_post && response.status == 200) {
      std::lock_guard lock(mutex_);
      if (request.target.find("/extend") != std::string::npos) {
        last_extend_ok_ = std::chrono::steady_clock::now();
      } else if (request.target.find("/keepalive") != std::string::npos) {
        last_keepalive_ok_ = std::chrono::steady_clock::now();
      }
    }
    return response;
  }

  std::chrono::steady_clock::time_point last_extend_ok() const {
    std::lock_guard lock(mutex_);
    return last_extend_ok_;
  }
  std::chrono::steady_clock::time_point last_keepalive_ok() const {
    std::lock_guard lock(mutex_);
    return last_keepalive_ok_;
  }

  // The body of the last acquire request received.
  std::string acquire_body() const {
    std::string body;
    for (const FakeRequest& request : server_.requests()) {
      if (request.target.find("/acquire") != std::string::npos) body = request.body;
    }
    return body;
  }

  // The pid CMD wrote to $DIR/<name>, waiting for it; -1 when it never came.
  pid_t pid_from(const char* name) {
    const auto path = dir_ / name;
    if (!wait_until([&] { return read_file(path).find('\n') != std::string::npos; },
                    milliseconds(10'000))) {
      return -1;
    }
    const pid_t pid = std::stoi(read_file(path));
    leftovers_.push_back(pid);
    return pid;
  }

  static bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

  // Starts `dlock --server <fake> run KEY <flags> -- sh -c SCRIPT`.
  std::unique_ptr<ChildProcess> start(const std::string& script,
                                      std::vector<std::string> flags = {},
                                      const std::string& key = "jobs/nightly run") {
    std::vector<std::string> argv = {DLOCK_BINARY, "--server", server_.url(), "--timeout", "1s",
                                     "run",        key};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "sh", "-c", script});
    sigset_t none;
    sigemptyset(&none);
    return std::make_unique<ChildProcess>(argv, std::vector<std::string>{"DIR=" + dir_.string()},
                                          none);
  }

  static std::optional<int> wait_exit(ChildProcess& process, milliseconds timeout) {
    wait_until([&] { return process.try_wait().has_value(); }, timeout);
    return process.status();
  }

  bool file_exists(const char* name) const { return std::filesystem::exists(dir_ / name); }

  // The stop timeline (ADR-0014) when renewals fail: TTL (lock TTL, or session TTL for a
  // session-bound lock) 3 s, renewed every 1 s, the lease's deadline at most last_ok() + 3 s
  // once `failing` is set. SIGTERM at deadline - 1 s, SIGKILL 300 ms later, i.e. 700 ms before
  // the deadline. `lease_flag`: "--ttl" (then a TTL lock) or "--lease=session".
  void expect_stopped_before_the_deadline(
      const std::string& lease_flag, const char* renewal, std::atomic<bool>& failing,
      const std::function<std::chrono::steady_clock::time_point()>& last_ok) {
    api_.lock_ttl_ms = 3000;
    api_.session_ttl_ms = 3000;
    std::vector<std::string> flags = {"--ttl", "3s",           "--stop-margin",
                                      "1s",    "--kill-grace", "300ms"};
    flags.insert(flags.begin(), {"--lease", lease_flag == "--ttl" ? "ttl" : "session"});
    auto dlock = start(R"(trap 'echo term >> "$DIR/term"' TERM; echo $$ > "$DIR/pid";
                          while :; do sleep 0.05; done)",
                       flags);
    const pid_t command = pid_from("pid");
    ASSERT_GT(command, 0);
    ASSERT_TRUE(server_.wait_for_requests(
        [renewal](const FakeRequest& r) { return r.target.find(renewal) != std::string::npos; }, 1,
        milliseconds(10'000)));
    failing = true;
    const auto failing_from = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait_until([&] { return gone(command); }, milliseconds(10'000)));
    const auto died = std::chrono::steady_clock::now();
    const auto deadline_bound = last_ok() + milliseconds(3000);
    EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
    EXPECT_TRUE(file_exists("term")) << "SIGKILL without SIGTERM first";
    // Dead at about deadline - 700 ms; 300 ms of that allowed for scheduling. Stopping at the
    // deadline would kill it at about deadline_bound.
    const auto before = std::chrono::duration_cast<milliseconds>(deadline_bound - died).count();
    std::cout << "[ measured ] " << renewal << " failing: CMD died " << before
              << " ms before the latest possible deadline\n";
    EXPECT_LT(died, deadline_bound - milliseconds(400))
        << "died " << before << " ms before the latest possible deadline";
    // Not stopped while the lock was still far from its deadline.
    EXPECT_GT(died, failing_from + milliseconds(500));
    EXPECT_GT(died, deadline_bound - milliseconds(1500));
  }

  FakeLockApi api_;
  std::function<void(const FakeRequest&)> on_request_;  // set before start()
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point last_extend_ok_;
  std::chrono::steady_clock::time_point last_keepalive_ok_;
  std::vector<pid_t> leftovers_;
  FakeServer server_;
  std::filesystem::path dir_;
};

TEST_F(DlockRunTest, PassesKeyAndTokenAndExitsWithTheCommandsStatus) {
  auto dlock =
      start(R"(echo "$DLOCK_KEY|$DLOCK_FENCING_TOKEN|$DLOCK_SESSION_ID" > "$DIR/env"; exit 3)");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 3);
  EXPECT_EQ(read_file(dir_ / "env"), "jobs/nightly run|42|s-1\n");
  // Released and closed afterwards; the key travelled percent-encoded.
  EXPECT_TRUE(server_.wait_for_requests(
      [](const FakeRequest& r) {
        return r.method == "DELETE" &&
               r.target == "/v1/locks/jobs%2Fnightly%20run?session_id=s-1&fencing_token=42";
      },
      1, milliseconds(0)));
  EXPECT_TRUE(server_.wait_for_requests(
      [](const FakeRequest& r) { return r.method == "DELETE" && r.target == "/v1/sessions/s-1"; },
      1, milliseconds(0)));
}

// A stopped CMD (kill -STOP, or SIGTTIN/SIGTTOU from the terminal) kept its lock alive forever.
// ADR-0014: after one TTL stopped (1 s here) dlock stops the group (SIGTERM with SIGCONT),
// releases the lock and exits 76.
TEST_F(DlockRunTest, CommandStoppedForATtlIsStoppedAndItsLockReleased) {
  for (const char* signal : {"STOP", "TTOU"}) {
    SCOPED_TRACE(signal);
    const std::size_t releases = server_.requests_to("DELETE", "/v1/locks/").size();
    const auto started = std::chrono::steady_clock::now();
    auto dlock = start(std::string("kill -") + signal + " $$; touch \"$DIR/continued\"");
    EXPECT_EQ(wait_exit(*dlock, milliseconds(20'000)), cli::kExitLockLost);
    const auto took = std::chrono::steady_clock::now() - started;
    std::cout << "[ measured ] SIG" << signal << ": dlock exited after "
              << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
    // Not before the bound: a short stop is allowed.
    EXPECT_GE(took, milliseconds(900));
    // SIGTERM came with SIGCONT: the shell ended on SIGTERM without running another command.
    EXPECT_FALSE(file_exists("continued"));
    EXPECT_EQ(server_.requests_to("DELETE", "/v1/locks/").size(), releases + 1)
        << "the lock was not released";
  }
}

TEST_F(DlockRunTest, CommandKilledBySignalExits128PlusSignal) {
  auto dlock = start("kill -KILL $$");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 128 + SIGKILL);
}

TEST_F(DlockRunTest, HeldAfterWaitExits75WithoutRunningTheCommand) {
  api_.held = true;
  auto dlock = start(R"(touch "$DIR/ran")", {"--wait", "100ms"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 75);
  EXPECT_FALSE(file_exists("ran"));
}

TEST_F(DlockRunTest, UnavailableServerExits69NotHeld) {
  api_.acquire_unavailable = true;
  auto dlock = start(R"(touch "$DIR/ran")");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 69);
  EXPECT_FALSE(file_exists("ran"));
}

TEST_F(DlockRunTest, LostLockTerminatesTheCommandThenKillsItAndExits76) {
  // The command ignores SIGTERM, so only the SIGKILL after --kill-grace stops it.
  auto dlock = start(R"(trap "" TERM; echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)",
                     {"--ttl", "1s", "--kill-grace", "300ms"});
  ASSERT_TRUE(wait_until([&] { return !read_file(dir_ / "pid").empty(); }, milliseconds(10'000)));
  const pid_t command_pid = std::stoi(read_file(dir_ / "pid"));
  api_.lock_lost = true;  // the next extend (ttl/3) answers lock_lost
  const auto lost_at = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  EXPECT_GE(std::chrono::steady_clock::now() - lost_at, milliseconds(300));
  EXPECT_EQ(::kill(command_pid, 0), -1);  // killed and reaped
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(DlockRunTest, LockLostWhenNoExtendSucceedsBeforeTheDeadline) {
  auto dlock = start(R"(echo go > "$DIR/started"; while :; do sleep 0.05; done)",
                     {"--lease", "ttl", "--ttl", "1s", "--kill-grace", "5s"});
  ASSERT_TRUE(wait_until([&] { return file_exists("started"); }, milliseconds(10'000)));
  api_.extend_unavailable = true;
  // sh exits on SIGTERM: no SIGKILL needed, and dlock still reports the loss.
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
}

TEST_F(DlockRunTest, LostLockStopsEveryProcessOfTheCommandsGroup) {
  // The shell waits on a background child: SIGTERM to the shell alone would leave `sleep`
  // running without the lock.
  auto dlock = start(R"(sleep 1000 & echo $! > "$DIR/pid"; wait)", {"--ttl", "1s"});
  const pid_t grandchild = pid_from("pid");
  ASSERT_GT(grandchild, 0);
  api_.lock_lost = true;
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  // dlock exits only once its group is empty, and reaps the orphans it adopted.
  EXPECT_TRUE(gone(grandchild)) << "the background child of CMD survived the lost lock";
}

TEST_F(DlockRunTest, StopsTheGroupSoThatSigkillLandsBeforeTheDeadlineWhenExtendsFail) {
  // TTL 3 s: extends every 1 s. From the moment extends fail the lock is valid until
  // (send time of the last successful extend) + 3 s <= last_extend_ok + 3 s.
  expect_stopped_before_the_deadline("--ttl", "/extend", api_.extend_unavailable,
                                     [this] { return last_extend_ok(); });
}

TEST_F(DlockRunTest, AnExtendThatShortensTheDeadlineIsNoticed) {
  // Acquired for 3 s; the first extend answers only 1.2 s (a server telling the truth about a
  // shorter lease), every later one fails. dlock must stop CMD by the new, earlier deadline,
  // not by the one it computed before the extend.
  api_.lock_ttl_ms = 3000;
  api_.session_ttl_ms = 3000;
  std::atomic<int> extends{0};
  on_request_ = [&](const FakeRequest& r) {
    if (r.target.find("/extend") == std::string::npos) return;
    if (extends++ == 0) {
      api_.lock_ttl_ms = 1200;
    } else {
      api_.extend_unavailable = true;
    }
  };
  auto dlock =
      start(R"(trap "" TERM; echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)",
            {"--lease", "ttl", "--ttl", "3s", "--stop-margin", "1s", "--kill-grace", "300ms"});
  const pid_t command = pid_from("pid");
  ASSERT_GT(command, 0);
  ASSERT_TRUE(wait_until([&] { return gone(command); }, milliseconds(10'000)));
  const auto died = std::chrono::steady_clock::now();
  const auto deadline_bound = last_extend_ok() + milliseconds(1200);
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  // Due by about deadline - 500 ms (SIGKILL at deadline - margin / 2 at the latest).
  EXPECT_LT(died, deadline_bound - milliseconds(300))
      << "died " << std::chrono::duration_cast<milliseconds>(deadline_bound - died).count()
      << " ms before the shortened deadline";
}

TEST_F(DlockRunTest, TheLockIsSessionBoundByDefaultAndATtlLockOnRequest) {
  api_.lock_ttl_ms = 5000;  // the server grants what --ttl asks
  api_.session_ttl_ms = 5000;
  auto session_bound = start("exit 0", {"--ttl", "5s"});
  EXPECT_EQ(wait_exit(*session_bound, milliseconds(10'000)), 0);
  const std::string body = acquire_body();
  EXPECT_NE(body.find(R"("lease":"session")"), std::string::npos) << body;
  EXPECT_EQ(body.find("ttl_ms"), std::string::npos) << body;  // the session's TTL is the lock's
  auto ttl_lock = start("exit 0", {"--lease", "ttl", "--ttl", "5s"});
  EXPECT_EQ(wait_exit(*ttl_lock, milliseconds(10'000)), 0);
  EXPECT_EQ(acquire_body().find(R"("lease":"session")"), std::string::npos) << acquire_body();
  EXPECT_NE(acquire_body().find(R"("ttl_ms":5000)"), std::string::npos) << acquire_body();
}

// --lock-delay (C2 "Lock-delay") is asked for when the session is opened, and only then.
TEST_F(DlockRunTest, LockDelayIsAskedForWithTheSession) {
  auto dlock = start("exit 0", {"--lock-delay", "1500ms"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 0);
  const auto opened = server_.requests_to("POST", "/v1/sessions");  // the open comes first
  ASSERT_GE(opened.size(), 1u);
  EXPECT_NE(opened[0].body.find(R"("lock_delay_ms":1500)"), std::string::npos) << opened[0].body;
}

TEST_F(DlockRunTest, UnknownLeaseIsAUsageError) {
  auto dlock = start(R"(touch "$DIR/ran")", {"--lease", "forever"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 64);
  EXPECT_FALSE(file_exists("ran"));
}

TEST_F(DlockRunTest, ARevokedSessionBoundLockIsNoticedAndItsGroupStopped) {
  // Nothing renews a session-bound grant, so dlock checks it every TTL/3 (a no-op extend).
  auto dlock = start(R"(sleep 1000 & echo $! > "$DIR/pid"; wait)", {"--ttl", "1s"});
  const pid_t grandchild = pid_from("pid");
  ASSERT_GT(grandchild, 0);
  ASSERT_NE(acquire_body().find(R"("lease":"session")"), std::string::npos);
  api_.lock_lost = true;
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  EXPECT_TRUE(gone(grandchild));
}

TEST_F(DlockRunTest, ASessionBoundLockStopsTheGroupWhenTheSessionIsGone) {
  auto dlock = start(R"(echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)", {"--ttl", "1s"});
  const pid_t command = pid_from("pid");
  ASSERT_GT(command, 0);
  api_.session_gone = true;  // the next keepalive answers session_not_found
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  EXPECT_TRUE(gone(command));
}

TEST_F(DlockRunTest, ASessionBoundLockStopsTheGroupBeforeTheSessionsDeadlineWhenKeepalivesFail) {
  // The same timeline with the deadline the session's: (send time of the last successful
  // keepalive) + 3 s. The grant checks still succeed, and must not move that deadline.
  expect_stopped_before_the_deadline("--lease=session", "/keepalive", api_.keepalive_unavailable,
                                     [this] { return last_keepalive_ok(); });
  EXPECT_NE(acquire_body().find(R"("lease":"session")"), std::string::npos);
}

TEST_F(DlockRunTest, ProcessesLeftByACommandThatExitedAreStoppedBeforeTheRelease) {
  std::atomic<bool> released_while_alive{false};
  on_request_ = [&](const FakeRequest& r) {
    if (r.method != "DELETE" || r.target.rfind("/v1/locks/", 0) != 0) return;
    const std::string text = read_file(dir_ / "pid");
    if (!text.empty() && !gone(std::stoi(text))) released_while_alive = true;
  };
  auto dlock = start(R"(sleep 1000 & echo $! > "$DIR/pid"; exit 3)");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 3);
  const pid_t grandchild = pid_from("pid");
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(gone(grandchild));
  EXPECT_TRUE(server_.wait_for_requests(
      [](const FakeRequest& r) { return r.method == "DELETE" && r.target.find("/v1/locks/") == 0; },
      1, milliseconds(0)));
  EXPECT_FALSE(released_while_alive) << "the lock was released while CMD's group still ran";
}

TEST_F(DlockRunTest, ForwardedSignalReachesTheWholeGroup) {
  // The shell survives SIGTERM (its trap) and waits for its background child, which only the
  // group signal stops.
  auto dlock = start(R"(trap 'echo term >> "$DIR/term"' TERM; sleep 1000 & echo $! > "$DIR/pid";
                        wait; wait; exit 7)");
  const pid_t grandchild = pid_from("pid");
  ASSERT_GT(grandchild, 0);
  // Until it execs, the forked child still has the shell's trap and would survive SIGTERM.
  ASSERT_TRUE(wait_until(
      [&] { return read_file("/proc/" + std::to_string(grandchild) + "/comm") == "sleep\n"; },
      milliseconds(10'000)));
  dlock->signal(SIGTERM);
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 7);
  EXPECT_TRUE(gone(grandchild));
}

TEST_F(DlockRunTest, ACommandStoppedBySigtstpIsContinued) {
  // What Ctrl-Z does to a terminal's foreground group; a lock holder must not sit suspended.
  auto dlock = start(R"(kill -TSTP $$; echo resumed > "$DIR/resumed"; exit 5)");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 5);
  EXPECT_TRUE(file_exists("resumed"));
}

TEST_F(DlockRunTest, StopMarginOfHalfTheTtlIsAUsageError) {
  auto dlock = start(R"(touch "$DIR/ran")", {"--ttl", "1s", "--stop-margin", "500ms"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 64);
  EXPECT_FALSE(file_exists("ran"));
}

TEST_F(DlockRunTest, ClockDriftIsAFlagAndOutsideItsRangeAUsageError) {
  auto accepted = start(R"(touch "$DIR/ran")", {"--clock-drift", "2%"});
  EXPECT_EQ(wait_exit(*accepted, milliseconds(10'000)), 0);
  EXPECT_TRUE(file_exists("ran"));
  std::filesystem::remove(dir_ / "ran");
  auto refused = start(R"(touch "$DIR/ran")", {"--clock-drift", "60%"});
  EXPECT_EQ(wait_exit(*refused, milliseconds(10'000)), 64);
  EXPECT_FALSE(file_exists("ran"));
}

TEST_F(DlockRunTest, ForwardsSigtermToTheCommand) {
  auto dlock = start(R"(trap 'echo got-term > "$DIR/term"; exit 7' TERM;
                        echo ready > "$DIR/ready"; while :; do sleep 0.05; done)");
  ASSERT_TRUE(wait_until([&] { return file_exists("ready"); }, milliseconds(10'000)));
  dlock->signal(SIGTERM);
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 7);
  EXPECT_EQ(read_file(dir_ / "term"), "got-term\n");
}

TEST_F(DlockRunTest, MissingCommandExits127) {
  sigset_t none;
  sigemptyset(&none);
  ChildProcess dlock(
      {DLOCK_BINARY, "--server", server_.url(), "run", "k", "--", "/nonexistent/command"}, {},
      none);
  EXPECT_EQ(wait_exit(dlock, milliseconds(10'000)), 127);
}

TEST_F(DlockRunTest, BadDurationIsAUsageError) {
  sigset_t none;
  sigemptyset(&none);
  ChildProcess dlock(
      {DLOCK_BINARY, "--server", server_.url(), "run", "k", "--ttl", "soon", "--", "true"}, {},
      none);
  EXPECT_EQ(wait_exit(dlock, milliseconds(10'000)), 64);
  EXPECT_TRUE(server_.requests().empty());
}

// Read locks and semaphores (ADR-0020): what `run --shared` and `run --semaphore N` ask for,
// which routes they use, and DLOCK_LOCK_MODE.
TEST_F(DlockRunTest, RunSharedHoldsAReadLockAndExportsItsMode) {
  auto dlock = start(R"(echo "$DLOCK_LOCK_MODE|$DLOCK_FENCING_TOKEN" > "$DIR/env")", {"--shared"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 0);
  EXPECT_EQ(read_file(dir_ / "env"), "shared|42\n");
  EXPECT_NE(acquire_body().find(R"("mode":"shared")"), std::string::npos) << acquire_body();
  EXPECT_TRUE(server_.wait_for_requests(
      [](const FakeRequest& r) {
        return r.method == "DELETE" && r.target.rfind("/v1/locks/jobs%2Fnightly%20run?", 0) == 0;
      },
      1, milliseconds(0)));
  auto exclusive = start(R"(echo "$DLOCK_LOCK_MODE" > "$DIR/env")");
  EXPECT_EQ(wait_exit(*exclusive, milliseconds(10'000)), 0);
  EXPECT_EQ(read_file(dir_ / "env"), "exclusive\n");
  EXPECT_EQ(acquire_body().find("mode"), std::string::npos) << acquire_body();
}

TEST_F(DlockRunTest, RunSemaphoreHoldsOnePermitThroughTheSemaphoreRoutes) {
  api_.session_ttl_ms = 600;  // the grant is checked every 200 ms while CMD runs
  auto dlock = start(R"(echo "$DLOCK_LOCK_MODE|$DLOCK_FENCING_TOKEN" > "$DIR/env"; sleep 0.5)",
                     {"--semaphore", "3"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 0);
  EXPECT_EQ(read_file(dir_ / "env"), "permit|42\n");
  const auto to = [](const char* method, const char* prefix) {
    return
        [=](const FakeRequest& r) { return r.method == method && r.target.rfind(prefix, 0) == 0; };
  };
  EXPECT_TRUE(server_.wait_for_requests(to("POST", "/v1/semaphores/jobs%2Fnightly%20run/acquire"),
                                        1, milliseconds(0)));
  EXPECT_NE(acquire_body().find(R"("limit":3)"), std::string::npos) << acquire_body();
  EXPECT_TRUE(server_.wait_for_requests(to("POST", "/v1/semaphores/jobs%2Fnightly%20run/extend"), 1,
                                        milliseconds(0)));
  EXPECT_TRUE(server_.wait_for_requests(
      to("DELETE", "/v1/semaphores/jobs%2Fnightly%20run?session_id=s-1&fencing_token=42"), 1,
      milliseconds(0)));
  for (const FakeRequest& request : server_.requests()) {
    EXPECT_NE(request.target.rfind("/v1/locks", 0), 0u) << request.method << " " << request.target;
  }
}

TEST_F(DlockRunTest, AllPermitsTakenExits75AndSharedWithSemaphoreIsAUsageError) {
  api_.held = true;
  auto held = start(R"(touch "$DIR/ran")", {"--semaphore", "2", "--wait", "100ms"});
  EXPECT_EQ(wait_exit(*held, milliseconds(10'000)), 75);
  auto both = start(R"(touch "$DIR/ran")", {"--semaphore", "2", "--shared"});
  EXPECT_EQ(wait_exit(*both, milliseconds(10'000)), 64);
  auto zero = start(R"(touch "$DIR/ran")", {"--semaphore", "0"});
  EXPECT_EQ(wait_exit(*zero, milliseconds(10'000)), 64);
  EXPECT_FALSE(file_exists("ran"));
}

}  // namespace
}  // namespace dlock::client
