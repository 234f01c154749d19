#include "support/subprocess.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

SubprocessOptions command(std::vector<std::string> argv) {
  SubprocessOptions options;
  options.argv = std::move(argv);
  return options;
}

// Whether `pid` has ended: gone, or a zombie its new parent has not reaped yet.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto state = line.find(") ");
  return state != std::string::npos && state + 2 < line.size() && line[state + 2] == 'Z';
}

// A test binary that aborts runs no destructor: the server it started must not outlive it.
TEST(Subprocess, AChildOfTheMainThreadDiesWithItsTestProcess) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t test_process = fork();
  ASSERT_GE(test_process, 0);
  if (test_process == 0) {
    // Stands for a test binary: starts a server from its main thread, then dies without
    // destroying it (as std::terminate would).
    close(fds[0]);
    auto* server = new Subprocess(command({"/bin/sleep", "60"}));
    const pid_t pid = server->pid();
    // Dies only once the server runs: a child whose parent is already gone exits on its own.
    const bool running = wait_for(
        [&] {
          std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
          std::string name;
          return std::getline(comm, name) && name == "sleep";
        },
        seconds(10));
    if (!running) _exit(3);
    if (write(fds[1], &pid, sizeof pid) != sizeof pid) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  pid_t server = -1;
  ASSERT_EQ(read(fds[0], &server, sizeof server), static_cast<ssize_t>(sizeof server));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(test_process, &status, 0), test_process);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const bool died = wait_for([&] { return ended(server); }, seconds(10));
  if (!died) kill(server, SIGKILL);
  EXPECT_TRUE(died) << "the server of a test process that died lived on";
}

// The parent-death signal follows the thread that forked: a child started from a helper thread
// must outlive that thread (fault scenarios restart servers from theirs).
TEST(Subprocess, AChildOfAHelperThreadOutlivesThatThread) {
  std::unique_ptr<Subprocess> server;
  std::thread helper([&] { server = std::make_unique<Subprocess>(command({"/bin/sleep", "60"})); });
  helper.join();
  EXPECT_FALSE(wait_for([&] { return !server->running(); }, milliseconds(500)))
      << "the child died with the thread that started it";
  server->kill_now();
}

TEST(Subprocess, RunCommandAnswersTheExitStatusAndKillNowReaps) {
  EXPECT_EQ(run_command(command({"/bin/sh", "-c", "exit 3"}), seconds(10)), 3);
  Subprocess sleeper(command({"/bin/sleep", "60"}));
  EXPECT_TRUE(sleeper.running());
  sleeper.kill_now();
  EXPECT_FALSE(sleeper.running());
}

}  // namespace
}  // namespace dlock::testing
