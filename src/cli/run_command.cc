#include "cli/run_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <ostream>
#include <system_error>
#include <thread>

#include "cli/child_process.h"
#include "cli/exit_codes.h"

namespace dlock::cli {
namespace {

// Background threads (keepalive, auto-extend, the acquiring thread) tell the main thread that
// something changed by raising this signal at the process; the main thread waits for it along
// with the signals it forwards and SIGCHLD, in one sigtimedwait, so it never polls.
constexpr int kWakeSignal = SIGUSR1;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void wake_main_thread() { ::kill(::getpid(), kWakeSignal); }

// Blocks the signals run_locked waits for, in this thread and every thread started after it,
// and restores the previous mask on scope exit. Must outlive every thread that wakes us.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    for (int signo : kForwarded) sigaddset(&set_, signo);
    sigaddset(&set_, SIGCHLD);
    sigaddset(&set_, kWakeSignal);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  ~BlockedSignals() {
    // Drain our own wake-ups and SIGCHLD: unblocked, their default action would apply.
    sigset_t internal;
    sigemptyset(&internal);
    sigaddset(&internal, kWakeSignal);
    sigaddset(&internal, SIGCHLD);
    const timespec zero{0, 0};
    while (sigtimedwait(&internal, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }

  const sigset_t& set() const { return set_; }
  const sigset_t& previous() const { return previous_; }

  // Waits for one of the blocked signals until `until` (forever when empty). Returns the
  // signal, or 0 on timeout.
  int wait(std::optional<SteadyClock::time_point> until, siginfo_t& info) const {
    for (;;) {
      int signo;
      if (until) {
        const auto left = std::max(*until - SteadyClock::now(), SteadyClock::duration(0));
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        const timespec timeout{static_cast<time_t>(ns / 1'000'000'000),
                               static_cast<long>(ns % 1'000'000'000)};
        signo = sigtimedwait(&set_, &info, &timeout);
      } else {
        signo = sigwaitinfo(&set_, &info);
      }
      if (signo > 0) return signo;
      if (errno == EAGAIN) return 0;
      // EINTR: a signal outside the set interrupted the wait; wait again.
    }
  }

 private:
  sigset_t set_;
  sigset_t previous_;
};

bool is_forwarded(int signo) {
  for (int forwarded : kForwarded) {
    if (forwarded == signo) return true;
  }
  return false;
}

// Signals the terminal sends to the whole foreground process group (Ctrl-C) already reached
// CMD; forwarding them again would deliver them twice.
bool sent_by_terminal(const siginfo_t& info) { return info.si_code == SI_KERNEL; }

}  // namespace

int run_locked(client::Client& client, const RunOptions& options, std::ostream& err) {
  BlockedSignals signals;  // before any thread starts, so every thread inherits the mask

  client::Session session(
      client, {options.owner, options.ttl, [](const std::string&) { wake_main_thread(); }});

  // Acquire on a helper thread: the main thread must stay responsive to SIGINT/SIGTERM while
  // the server makes us wait, without re-issuing the acquire (which would lose our place in
  // the server's first-come first-served queue).
  std::optional<client::Lock> lock;
  std::exception_ptr acquire_error;
  std::atomic<bool> acquire_done{false};
  std::jthread acquirer([&] {
    try {
      client::AcquireOptions acquire_options;
      acquire_options.ttl = options.ttl;
      acquire_options.wait = options.wait;
      acquire_options.ns = options.ns;
      acquire_options.auto_extend = true;
      acquire_options.on_lost = [](const std::string&) { wake_main_thread(); };
      lock = session.acquire(options.key, std::move(acquire_options));
    } catch (...) {
      acquire_error = std::current_exception();
    }
    acquire_done = true;
    wake_main_thread();
  });
  while (!acquire_done) {
    siginfo_t info{};
    const int signo = signals.wait(std::nullopt, info);
    if (is_forwarded(signo)) {
      err << "dlock: interrupted by signal " << signo << " while waiting for " << options.key
          << '\n';
      // Closing the session on the server drops a grant that may be arriving right now; the
      // acquiring thread is still blocked in its request, so leave without joining it.
      try {
        session.close();
      } catch (const std::exception& error) {
        err << "dlock: closing the session failed: " << error.what() << '\n';
      }
      std::_Exit(128 + signo);
    }
  }
  acquirer.join();
  if (acquire_error) std::rethrow_exception(acquire_error);
  if (!lock) {
    err << "dlock: " << options.key << " is held by another owner; not acquired within "
        << client::format_duration(options.wait) << '\n';
    return kExitNotAcquired;
  }

  std::vector<std::string> env = {
      "DLOCK_KEY=" + options.key,
      "DLOCK_FENCING_TOKEN=" + std::to_string(lock->token()),
      "DLOCK_SESSION_ID=" + session.id(),
      "DLOCK_NAMESPACE=" + (options.ns.empty() ? std::string("default") : options.ns),
  };
  std::optional<ChildProcess> child;
  try {
    child.emplace(options.command, env, signals.previous());
  } catch (const std::system_error& error) {
    err << "dlock: " << error.what() << '\n';
    return error.code().value() == ENOENT ? kExitCommandNotFound : kExitCannotExecute;
  }

  // Supervise: wake on CMD's exit, a forwarded signal, a loss report, the lock's client
  // deadline, or the SIGKILL deadline once CMD was asked to stop.
  std::optional<SteadyClock::time_point> kill_at;
  bool lost = false;
  for (;;) {
    if (child->try_wait()) break;
    if (!lost && !lock->still_valid()) {
      lost = true;
      std::string reason = lock->lost_reason();
      if (reason.empty()) reason = "the lock's deadline passed without a successful extend";
      err << "dlock: lost " << options.key << " (token " << lock->token() << "): " << reason
          << "; sending SIGTERM to " << options.command[0] << '\n';
      child->signal(SIGTERM);
      kill_at = SteadyClock::now() + options.kill_grace;
    }
    if (kill_at && SteadyClock::now() >= *kill_at) {
      err << "dlock: " << options.command[0] << " still running after "
          << client::format_duration(options.kill_grace) << "; sending SIGKILL\n";
      child->signal(SIGKILL);
      kill_at.reset();
    }
    std::optional<SteadyClock::time_point> until = kill_at;
    if (!lost) until = lock->client_deadline();
    siginfo_t info{};
    const int signo = signals.wait(until, info);
    if (is_forwarded(signo) && !sent_by_terminal(info)) child->signal(signo);
  }
  const int status = *child->status();
  child.reset();

  if (lost) return kExitLockLost;
  try {
    lock->release();
  } catch (const std::exception& error) {
    err << "dlock: releasing " << options.key << " failed: " << error.what() << '\n';
  }
  try {
    session.close();
  } catch (const std::exception& error) {
    err << "dlock: closing the session failed: " << error.what() << '\n';
  }
  return status;
}

}  // namespace dlock::cli
