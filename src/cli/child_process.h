#pragma once

// A command run by `dlock run`, owned RAII-style: whatever path leaves the owner, the command's
// whole process group is killed and its leader reaped, so dlock never leaves an orphan working
// without a lock.
//
// The command leads a process group of its own (ADR-0014): everything it starts (`sleep &`, a
// pipeline, a shell's children) shares that group unless it leaves it on purpose (setsid,
// setpgid: daemons escape, as with `timeout`), and dlock signals the group, not one pid.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with the current environment plus `extra_env`
  // ("NAME=value", overriding), as the leader of a new process group. The child starts with
  // `signal_mask` and default signal dispositions, whatever the parent blocked. With
  // `take_terminal`, when this process is in the foreground of its controlling terminal, the
  // terminal is handed to the new group (so CMD can read it, and Ctrl-C / Ctrl-Z reach CMD's
  // group and not dlock) and taken back on destruction. Throws std::system_error when it
  // cannot start (error code ENOENT / EACCES ... from exec).
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
               const sigset_t& signal_mask, bool take_terminal = false);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // SIGKILLs the whole group and reaps the leader if it still runs; gives the terminal back.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Sends `signo` to the leader only, unless it was already reaped.
  void signal(int signo);
  // Sends `signo` to every process of the group (the leader's pid is the group id), and to
  // the leader alone if it moved itself out of the group.
  void signal_group(int signo);
  // Reaps the leader if it has exited, and any exited group member that was handed to this
  // process (a child subreaper adopts orphans); returns the leader's shell-style status (exit
  // code, or 128 + signal number), or empty while it runs. A leader stopped by SIGTSTP
  // (Ctrl-Z) is continued at once: a command holding a lock must not sit suspended. Other stops
  // and continues are noted (stopped()).
  std::optional<int> try_wait();
  std::optional<int> status() const { return status_; }
  // The signal that stopped the leader (SIGSTOP, SIGTTIN, SIGTTOU; a SIGTSTP stop is continued
  // at once) and since when, as try_wait() last saw it; empty while it runs. Only the leader:
  // other members' stops are not reported to this process.
  struct Stop {
    int signo = 0;
    std::chrono::steady_clock::time_point since;
  };
  const std::optional<Stop>& stopped() const { return stopped_; }
  // True while any process of the group exists (zombies included), after reaping.
  bool group_alive();

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  int terminal_ = -1;  // the controlling terminal handed to the group, or -1
  std::optional<Stop> stopped_;
};

// Shell-style status from a waitpid status word.
int shell_status(int wait_status);

}  // namespace dlock::cli
