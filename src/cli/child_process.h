#pragma once

// A command run by `dlock run`, owned RAII-style: whatever path leaves the owner, the child is
// killed and reaped, so dlock never leaves an orphan working without a lock.

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with the current environment plus `extra_env`
  // ("NAME=value", overriding). The child starts with `signal_mask` and default signal
  // dispositions, whatever the parent blocked. Throws std::system_error when it cannot start
  // (error code ENOENT / EACCES ... from exec).
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
               const sigset_t& signal_mask);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // SIGKILLs and reaps a child still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Sends `signo` unless the child was already reaped.
  void signal(int signo);
  // Reaps the child if it has exited; returns its shell-style status (exit code, or
  // 128 + signal number), or empty while it runs.
  std::optional<int> try_wait();
  std::optional<int> status() const { return status_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Shell-style status from a waitpid status word.
int shell_status(int wait_status);

}  // namespace dlock::cli
