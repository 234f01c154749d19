// Failover between two real dlockd on one PostgreSQL, and on one etcd (docs/client.md,
// "Failover"): a client
// configured with both holds a lock with auto-extend and a session with keepalives; each
// dlockd in turn is stopped (SIGTERM, as for an upgrade) and started again as a newer build
// (dlockd_next: the same server under another version string, src/exe/CMakeLists.txt). The
// client keeps its session, its lock and its fencing token throughout, because both live in the
// backend.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "dlock/client.h"
#include "support/dlockd_backends.h"
#include "support/dlockd_process.h"
#include "support/subprocess.h"

namespace dlock::testing {
namespace {

using std::chrono::milliseconds;

DlockdOptions backend_dlockd(const std::string& backend) {
  DlockdOptions options = dlockd_options(backend, "dlock_failover");
  options.fixed_port = true;  // the client keeps its server list across restarts
  options.log_level = "info";
  return options;
}

// What `BINARY --version` prints.
std::string version_of(const std::string& binary) {
  const std::string out = make_temp_dir("dlockd-version") + "/out";
  SubprocessOptions command;
  command.argv = {binary, "--version"};
  command.log_path = out;
  EXPECT_EQ(run_command(command, std::chrono::seconds(10)), 0) << binary;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove_all(std::filesystem::path(out).parent_path());
  return text.str();
}

// The installed dlockd, as a package manager keeps it: one path, replaced by an upgrade.
class InstalledDlockd {
 public:
  InstalledDlockd() : dir_(make_temp_dir("dlockd-installed")), path_(dir_ + "/dlockd") {
    std::filesystem::create_symlink(DLOCK_DLOCKD_PATH, path_);
  }
  ~InstalledDlockd() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return path_; }
  // Replaces the binary at path() by the newer build, atomically (rename), as dpkg does.
  void upgrade() {
    const std::string next = dir_ + "/dlockd.new";
    std::filesystem::create_symlink(DLOCK_DLOCKD_NEXT_PATH, next);
    std::filesystem::rename(next, path_);
  }

 private:
  std::string dir_;
  std::string path_;
};

// The binary a running dlockd was started from.
std::string running_binary(const DlockdProcess& dlockd) {
  return std::filesystem::read_symlink("/proc/" + std::to_string(dlockd.pid()) + "/exe");
}

// SIGTERM and wait for the exit: a graceful stop, as a service manager does it.
void stop(DlockdProcess& dlockd) {
  dlockd.process().signal(SIGTERM);
  dlockd.process().wait(std::chrono::seconds(30));
}

class ClientFailover : public ::testing::TestWithParam<std::string> {};

TEST_P(ClientFailover, LockAndTokenSurviveEachServerRestartingAsANewerBuild) {
  const std::string old_version = version_of(DLOCK_DLOCKD_PATH);
  const std::string new_version = version_of(DLOCK_DLOCKD_NEXT_PATH);
  ASSERT_NE(old_version, new_version) << "dlockd_next is not a different build";
  InstalledDlockd installed;
  DlockdOptions dlockd_options = backend_dlockd(GetParam());
  dlockd_options.binary = installed.path();
  DlockdProcess first(dlockd_options);
  DlockdProcess second(dlockd_options);
  ASSERT_EQ(version_of(running_binary(first)), old_version);
  client::ClientOptions options;
  options.servers = {first.url(), second.url()};
  options.request_timeout = milliseconds(2000);
  options.backoff_initial = milliseconds(20);
  options.backoff_max = milliseconds(200);
  std::vector<std::string> problems;
  std::mutex problems_mutex;
  options.log = [&](std::string_view message) {
    std::lock_guard lock(problems_mutex);
    problems.emplace_back(message);
  };
  client::Client client(options);
  const milliseconds ttl(3000);
  client::SessionOptions session_options;
  session_options.owner = "failover";
  session_options.ttl = ttl;
  client::Session session(client, session_options);
  client::AcquireOptions acquire_options;
  acquire_options.ttl = ttl;
  acquire_options.auto_extend = true;
  auto lock = session.acquire("failover/key", acquire_options);
  ASSERT_TRUE(lock.has_value());
  const FencingToken token = lock->token();

  // Long enough for several keepalives and extends (every TTL/3) against the survivor.
  const auto hold = [&](DlockdProcess& survivor) {
    // Real time: the client's own keepalive and extend timers must run against the survivor.
    std::this_thread::sleep_for(ttl * 2);
    EXPECT_TRUE(lock->still_valid()) << lock->lost_reason();
    EXPECT_FALSE(session.lost()) << session.lost_reason();
    EXPECT_EQ(lock->token(), token);
    const auto seen = http_call(survivor.address(), "GET", "/v1/locks/failover%2Fkey");
    ASSERT_EQ(seen.status, 200) << seen.body;
    EXPECT_EQ(seen.json.at("fencing_token").to_number<std::uint64_t>(), token);
  };

  installed.upgrade();  // the package is upgraded; each server restarts into the new build
  stop(first);
  hold(second);
  first.start();
  EXPECT_EQ(version_of(running_binary(first)), new_version);
  stop(second);
  hold(first);
  second.start();
  EXPECT_EQ(version_of(running_binary(second)), new_version);
  hold(second);

  lock->release();
  session.close();
  std::lock_guard guard(problems_mutex);
  for (const auto& problem : problems) ADD_FAILURE() << "client logged: " << problem;
}

TEST_P(ClientFailover, StoppedFirstServerIsSkippedByPlainCalls) {
  DlockdProcess first(backend_dlockd(GetParam()));
  DlockdProcess second(backend_dlockd(GetParam()));
  stop(first);
  client::ClientOptions options;
  options.server_url = first.url() + "," + second.url();
  options.retry_budget = milliseconds(5000);
  client::Client client(options);
  const SessionInfo session = client.open_session("plain", milliseconds(10000));
  const auto handle =
      client.acquire("failover/plain", session.session_id, milliseconds(10000), milliseconds(0));
  ASSERT_TRUE(handle.has_value());
  const auto info = client.get("failover/plain");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->fencing_token, handle->fencing_token);
  client.release("failover/plain", session.session_id, handle->fencing_token);
  client.close_session(session.session_id);
}

#ifdef DLOCK_WITH_ETCD
INSTANTIATE_TEST_SUITE_P(Backends, ClientFailover, ::testing::Values("pg", "etcd"));
#else
INSTANTIATE_TEST_SUITE_P(Backends, ClientFailover, ::testing::Values("pg"));
#endif

}  // namespace
}  // namespace dlock::testing
