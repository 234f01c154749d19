#pragma once

// A child process owned by the test: started on construction, killed and reaped on
// destruction, whatever the test did in between.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::testing {

struct SubprocessOptions {
  std::vector<std::string> argv;
  // When set, the child drops to this user before exec (PostgreSQL refuses to run as root).
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // stdout and stderr of the child are appended here; empty = inherit.
  std::string log_path;
  // When >= 0, the child's stdout is this descriptor instead (e.g. a pipe's write end; stderr
  // still goes to log_path). Open it O_CLOEXEC so the child keeps no other copy of the pipe.
  int stdout_fd = -1;
  // Extra "NAME=value" entries added to the environment.
  std::vector<std::string> env;
};

class Subprocess {
 public:
  explicit Subprocess(SubprocessOptions options);
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running();
  void signal(int signo);
  // Waits for exit; returns the exit status (128 + signal when killed). Throws on timeout.
  int wait(std::chrono::milliseconds timeout);
  // SIGKILL and reap.
  void kill_now();

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to completion and returns its exit status; throws if it cannot start.
int run_command(SubprocessOptions options, std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_loopback_port();

// A fresh directory under $TMPDIR (or /tmp), removed by the caller.
std::string make_temp_dir(const std::string& prefix);

// The CPU time (user + system, seconds) `pid` has used so far, from /proc/<pid>/stat.
double cpu_seconds(pid_t pid);

// Polls `condition` until it holds or `timeout` passes; returns whether it held.
template <typename Condition>
bool wait_for(Condition condition, std::chrono::milliseconds timeout,
              std::chrono::milliseconds interval = std::chrono::milliseconds(10));

}  // namespace dlock::testing

#include <thread>

namespace dlock::testing {

template <typename Condition>
bool wait_for(Condition condition, std::chrono::milliseconds timeout,
              std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);  // the poll interval
  }
}

}  // namespace dlock::testing
