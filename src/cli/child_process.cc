#include "cli/child_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <system_error>

extern char** environ;

namespace dlock::cli {
namespace {

// The environment as NAME -> "NAME=value", with `extra` entries replacing existing ones.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> by_name;
  auto add = [&by_name](const std::string& entry) {
    by_name[entry.substr(0, entry.find('='))] = entry;
  };
  for (char** entry = environ; *entry != nullptr; ++entry) add(*entry);
  for (const std::string& entry : extra) add(entry);
  std::vector<std::string> out;
  out.reserve(by_name.size());
  for (auto& [name, entry] : by_name) out.push_back(std::move(entry));
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The controlling terminal when this process is in its foreground group, else -1.
int foreground_terminal() {
  const int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (::tcgetpgrp(fd) != ::getpgrp()) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Makes this process's group the terminal's foreground group again. We are in the background
// by then: with SIGTTOU blocked the kernel allows the call instead of stopping us.
void take_terminal_back(int fd) {
  sigset_t ttou, previous;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &previous);
  ::tcsetpgrp(fd, ::getpgrp());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& extra_env, const sigset_t& signal_mask,
                           bool take_terminal) {
  if (argv.empty()) throw std::system_error(EINVAL, std::generic_category(), "empty command");
  std::vector<std::string> args = argv;
  std::vector<std::string> env = merged_environment(extra_env);
  std::vector<char*> arg_pointers = pointers(args);
  std::vector<char*> env_pointers = pointers(env);

  // posix_spawn rather than fork+exec: dlock has keepalive threads running, and after fork
  // only async-signal-safe calls are allowed. It also reports exec failures as an error code.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t all_signals;
  sigfillset(&all_signals);
  posix_spawnattr_setsigmask(&attributes, &signal_mask);
  posix_spawnattr_setsigdefault(&attributes, &all_signals);
  posix_spawnattr_setpgroup(&attributes, 0);  // a new group, led by the child
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (take_terminal) terminal_ = foreground_terminal();
  // The child takes the terminal itself before exec, so it can never read it while still in
  // the background (which would stop it with SIGTTIN).
  if (terminal_ >= 0) posix_spawn_file_actions_addtcsetpgrp_np(&actions, terminal_);
  const int error = posix_spawnp(&pid_, args[0].c_str(), &actions, &attributes, arg_pointers.data(),
                                 env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    pid_ = -1;
    if (terminal_ >= 0) {
      take_terminal_back(terminal_);
      ::close(terminal_);
    }
    throw std::system_error(error, std::generic_category(), "cannot run '" + args[0] + "'");
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    signal_group(SIGKILL);
    while (!status_) {
      int wait_status = 0;
      const pid_t result = ::waitpid(pid_, &wait_status, 0);
      if (result == pid_ && !WIFSTOPPED(wait_status)) status_ = shell_status(wait_status);
      if (result < 0 && errno != EINTR) break;
    }
  }
  if (terminal_ >= 0) {
    take_terminal_back(terminal_);
    ::close(terminal_);
  }
}

void ChildProcess::signal(int signo) {
  if (pid_ > 0 && !status_) ::kill(pid_, signo);
}

void ChildProcess::signal_group(int signo) {
  if (pid_ <= 0) return;
  // A leader that moved itself to another group is signalled all the same.
  if (::kill(-pid_, signo) != 0 && errno == ESRCH && !status_) ::kill(pid_, signo);
}

std::optional<int> ChildProcess::try_wait() {
  if (pid_ <= 0) return status_;
  for (;;) {
    int wait_status = 0;
    // Any child in the group: the leader, or a member adopted after its parent died.
    const pid_t result = ::waitpid(-pid_, &wait_status, WNOHANG | WUNTRACED | WCONTINUED);
    if (result < 0 && errno == EINTR) continue;
    if (result <= 0) break;
    if (result != pid_) continue;
    if (WIFSTOPPED(wait_status)) {
      if (WSTOPSIG(wait_status) == SIGTSTP) {
        ::kill(-pid_, SIGCONT);
      } else if (!stopped_) {
        stopped_ = Stop{WSTOPSIG(wait_status), std::chrono::steady_clock::now()};
      }
      continue;
    }
    if (WIFCONTINUED(wait_status)) {
      stopped_.reset();
      continue;
    }
    stopped_.reset();
    status_ = shell_status(wait_status);
  }
  return status_;
}

bool ChildProcess::group_alive() {
  if (pid_ <= 0) return false;
  try_wait();
  return ::kill(-pid_, 0) == 0 || errno != ESRCH;
}

}  // namespace dlock::cli
