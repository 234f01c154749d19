// `dlock elect NAME --value V -- CMD` as a user runs it: the real dlock binary against a fake
// dlockd (C3 "Elections"). It is `dlock run` with a campaign for the grant, so these cases cover
// what differs: the campaign and its value, DLOCK_LEADER_VALUE, "another leader" exiting 75,
// the resign afterwards, and a lost leadership (noticed by reading the election, or with the
// session) stopping CMD with 76. The stop timeline itself is dlock_run_test's.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

class DlockElectTest : public ::testing::Test {
 protected:
  DlockElectTest() : server_([this](const FakeRequest& request) { return api_.handle(request); }) {
    char pattern[] = "/tmp/dlock-elect-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    api_.leads = true;  // the election read sees our token (the fake's `token`)
  }
  ~DlockElectTest() override { std::filesystem::remove_all(dir_); }

  // Starts `dlock --server <fake> elect NAME --value V <flags> -- sh -c SCRIPT`.
  std::unique_ptr<ChildProcess> start(const std::string& script,
                                      std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {DLOCK_BINARY, "--server", server_.url(),
                                     "--timeout",  "1s",       "elect",
                                     "db primary", "--value",  "10.0.0.7:5432"};
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

  std::vector<FakeRequest> sent(const std::string& method, const std::string& prefix) const {
    return server_.requests_to(method, prefix);
  }

  FakeLockApi api_;
  FakeServer server_;
  std::filesystem::path dir_;
};

TEST_F(DlockElectTest, RunsTheCommandAsLeaderWithTokenAndValueThenResigns) {
  auto dlock = start(
      R"(echo "$DLOCK_KEY|$DLOCK_FENCING_TOKEN|$DLOCK_LEADER_VALUE|$DLOCK_LOCK_MODE" > "$DIR/env";
         exit 3)");
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 3);
  EXPECT_EQ(read_file(dir_ / "env"), "db primary|42|10.0.0.7:5432|exclusive\n");
  const auto campaigns = sent("POST", "/v1/elections/db%20primary/campaign");
  ASSERT_EQ(campaigns.size(), 1u);
  EXPECT_EQ(boost::json::parse(campaigns[0].body).at("value").as_string(), "10.0.0.7:5432");
  const auto resigns = sent("POST", "/v1/elections/db%20primary/resign");
  ASSERT_EQ(resigns.size(), 1u);
  EXPECT_EQ(boost::json::parse(resigns[0].body).at("fencing_token").to_number<int>(), 42);
  EXPECT_EQ(sent("DELETE", "/v1/sessions/s-1").size(), 1u);
}

TEST_F(DlockElectTest, LockDelayIsAskedForWithTheSession) {
  auto dlock = start("exit 0", {"--lock-delay", "2s"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 0);
  const auto opened = sent("POST", "/v1/sessions");
  ASSERT_GE(opened.size(), 1u);
  EXPECT_EQ(boost::json::parse(opened[0].body).at("lock_delay_ms").to_number<int>(), 2000);
}

TEST_F(DlockElectTest, AnotherLeaderAfterTheWaitExits75WithoutRunningTheCommand) {
  api_.held = true;
  auto dlock = start(R"(touch "$DIR/ran")", {"--wait", "100ms"});
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 75);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ran"));
}

TEST_F(DlockElectTest, ALostLeadershipStopsTheCommandAndExits76) {
  auto dlock = start(R"(echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)");
  ASSERT_TRUE(
      wait_until([&] { return std::filesystem::exists(dir_ / "pid"); }, milliseconds(10'000)));
  api_.leads = false;  // resigned or superseded elsewhere: the next read of the election says so
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
  EXPECT_GE(sent("GET", "/v1/elections/db%20primary").size(), 1u);
}

TEST_F(DlockElectTest, ALeadershipIsLostWithItsSession) {
  auto dlock = start(R"(echo $$ > "$DIR/pid"; while :; do sleep 0.05; done)");
  ASSERT_TRUE(
      wait_until([&] { return std::filesystem::exists(dir_ / "pid"); }, milliseconds(10'000)));
  api_.session_gone = true;
  EXPECT_EQ(wait_exit(*dlock, milliseconds(10'000)), 76);
}

TEST_F(DlockElectTest, ValueIsRequired) {
  std::vector<std::string> argv = {DLOCK_BINARY, "--server", server_.url(), "elect",
                                   "db",         "--",       "true"};
  sigset_t none;
  sigemptyset(&none);
  ChildProcess dlock(argv, {}, none);
  EXPECT_EQ(wait_exit(dlock, milliseconds(10'000)), 64);
}

}  // namespace
}  // namespace dlock::client
