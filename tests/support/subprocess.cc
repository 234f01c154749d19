#include "support/subprocess.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::testing {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Subprocess::Subprocess(SubprocessOptions options) {
  if (options.argv.empty()) throw std::invalid_argument("Subprocess: empty argv");
  std::vector<char*> argv;
  for (auto& arg : options.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) env_strings.emplace_back(*entry);
  for (auto& extra : options.env) env_strings.push_back(extra);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  // A test that aborts (a crash, an ASSERT beside a running std::thread) runs no destructor: its
  // servers would live on and load every later test of the run. A child started from the main
  // thread is killed when the test process dies. Not from another thread: the signal follows the
  // thread that forked, so a server a helper thread restarts would die with that thread.
  const bool dies_with_parent = gettid() == getpid();
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Child: only async-signal-safe calls from here on.
    setpgid(0, 0);
    if (!options.log_path.empty()) {
      const int fd = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
    }
    if (options.stdout_fd >= 0) dup2(options.stdout_fd, STDOUT_FILENO);
    if (options.gid && setgid(*options.gid) != 0) _exit(126);
    if (options.uid && setuid(*options.uid) != 0) _exit(126);
    // After setuid, which clears it; kept across execve of a binary that is not set-user-ID.
    if (dies_with_parent && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) {
      _exit(125);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) kill_now();
}

bool Subprocess::running() {
  if (status_) return false;
  int status = 0;
  const pid_t result = waitpid(pid_, &status, WNOHANG);
  if (result == pid_) {
    status_ = decode_status(status);
    return false;
  }
  return true;
}

void Subprocess::signal(int signo) {
  if (!status_) ::kill(pid_, signo);
}

int Subprocess::wait(std::chrono::milliseconds timeout) {
  if (!wait_for([this] { return !running(); }, timeout, std::chrono::milliseconds(5))) {
    throw std::runtime_error("process " + std::to_string(pid_) + " did not exit in time");
  }
  return *status_;
}

void Subprocess::kill_now() {
  if (status_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  status_ = decode_status(status);
}

int run_command(SubprocessOptions options, std::chrono::milliseconds timeout) {
  Subprocess process(std::move(options));
  return process.wait(timeout);
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  }
  return pattern;
}

double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace dlock::testing
