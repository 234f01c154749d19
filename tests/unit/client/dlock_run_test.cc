// `dlock run` as a user runs it: the real dlock binary against a fake dlockd. Covers exit
// status propagation, the environment given to CMD, SIGTERM -> SIGKILL escalation when the
// lock is lost, signal forwarding and the sysexits codes.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/child_process.h"
#include "fake_lock_api.h"
#include "wait_until.h"

namespace dlock::client {
namespace {

using cli::ChildProcess;
using std::chrono::milliseconds;
using testing::FakeLockApi;
using testing::FakeRequest;
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
  DlockRunTest() : server_([this](const FakeRequest& request) { return api_.handle(request); }) {
    char pattern[] = "/tmp/dlock-run-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  ~DlockRunTest() override { std::filesystem::remove_all(dir_); }

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

  FakeLockApi api_;
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
                     {"--ttl", "1s", "--kill-grace", "5s"});
  ASSERT_TRUE(wait_until([&] { return file_exists("started"); }, milliseconds(10'000)));
  api_.extend_unavailable = true;
  // sh exits on SIGTERM: no SIGKILL needed, and dlock still reports the loss.
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
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

}  // namespace
}  // namespace dlock::client
