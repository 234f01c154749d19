#include "cli/child_process.h"

#include <spawn.h>
#include <sys/wait.h>
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

}  // namespace

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& extra_env, const sigset_t& signal_mask) {
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
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const int error = posix_spawnp(&pid_, args[0].c_str(), nullptr, &attributes, arg_pointers.data(),
                                 env_pointers.data());
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    pid_ = -1;
    throw std::system_error(error, std::generic_category(), "cannot run '" + args[0] + "'");
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  int wait_status = 0;
  while (::waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
  }
}

void ChildProcess::signal(int signo) {
  if (pid_ > 0 && !status_) ::kill(pid_, signo);
}

std::optional<int> ChildProcess::try_wait() {
  if (status_ || pid_ <= 0) return status_;
  int wait_status = 0;
  pid_t result;
  do {
    result = ::waitpid(pid_, &wait_status, WNOHANG);
  } while (result < 0 && errno == EINTR);
  if (result == pid_) status_ = shell_status(wait_status);
  return status_;
}

}  // namespace dlock::cli
