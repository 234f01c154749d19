#include "cli/run_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <system_error>
#include <thread>

#include "cli/child_process.h"
#include "cli/exit_codes.h"
#include "cli/stop_timeline.h"
#include "cli/terminal_text.h"
#include "cli/wait_line.h"

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

// Makes this process the reaper of the orphans CMD leaves (a shell killed before its `sleep &`):
// they are then dlock's children, so their zombies are reaped and the group can be seen empty
// even where PID 1 reaps nothing (containers). Linux only; restored on scope exit so a test
// calling run_locked in-process is left as it was.
class OrphanReaper {
 public:
  OrphanReaper() {
    int current = 0;
    if (::prctl(PR_GET_CHILD_SUBREAPER, &current) == 0) previous_ = current;
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  OrphanReaper(const OrphanReaper&) = delete;
  OrphanReaper& operator=(const OrphanReaper&) = delete;
  ~OrphanReaper() { ::prctl(PR_SET_CHILD_SUBREAPER, previous_); }

 private:
  int previous_ = 0;
};

// While the group still has members after its leader was reaped, nothing signals their exit
// (they are not all our children), so the supervisor looks again after this long.
constexpr auto kGroupPoll = std::chrono::milliseconds(10);

std::string describe(std::chrono::milliseconds d) { return client::format_duration(d); }

std::string signal_name(int signo) {
  switch (signo) {
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTTIN:
      return "SIGTTIN (it read the terminal from the background)";
    case SIGTTOU:
      return "SIGTTOU (it wrote to or set the terminal from the background)";
    default:
      return "signal " + std::to_string(signo);
  }
}

// Checks a session-bound grant every `every` with an extend, which for such a grant writes
// nothing and moves no deadline (ADR-0018): nothing else would tell this run that the grant
// was revoked, since the session's keepalives do not look at grants. A transient failure is
// ignored: the session's deadline, which only its keepalives move, decides the stop time.
// A leadership is checked with a read of its election instead: it is lost once another token
// leads or nobody does (tokens are never re-issued), which the election routes answer alone.
class GrantProbe {
 public:
  GrantProbe(client::Client& client, const client::Lock& lock, std::chrono::milliseconds every,
             bool leader)
      : client_(client), lock_(lock), every_(every), leader_(leader) {
    thread_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
  }
  GrantProbe(const GrantProbe&) = delete;
  GrantProbe& operator=(const GrantProbe&) = delete;

  // Why the grant is gone; empty while it is not known to be.
  std::string lost_reason() const {
    std::lock_guard lock(mutex_);
    return reason_;
  }

 private:
  void loop(const std::stop_token& stop) {
    std::mutex sleep_mutex;
    std::condition_variable_any wake;
    for (;;) {
      {
        std::unique_lock lock(sleep_mutex);
        if (wake.wait_for(lock, stop, every_, [] { return false; }) || stop.stop_requested()) {
          return;
        }
      }
      std::string reason;
      try {
        // A short budget: a probe that cannot get through is simply tried again later.
        const SteadyClock::time_point budget = SteadyClock::now() + std::min(every_, kProbeBudget);
        if (leader_) {
          const auto now = client_.leader(lock_.key(), lock_.ns(), budget);
          if (!now || now->fencing_token != lock_.token()) {
            reason = "leadership lost: " +
                     (now ? "token " + std::to_string(now->fencing_token) + " leads now"
                          : std::string("nobody leads"));
          }
        } else {
          client_.extend(lock_.key(), lock_.session_id(), lock_.token(),
                         std::chrono::milliseconds(0), lock_.ns(), budget, lock_.mode());
        }
      } catch (const LockLostError& error) {
        reason = std::string("lock lost: ") + error.what();
      } catch (const SessionNotFoundError& error) {
        reason = std::string("session lost: ") + error.what();
      } catch (const std::exception&) {
        continue;
      }
      if (reason.empty()) continue;
      {
        std::lock_guard lock(mutex_);
        reason_ = reason;
      }
      wake_main_thread();
      return;
    }
  }

  static constexpr std::chrono::milliseconds kProbeBudget{3000};
  client::Client& client_;
  const client::Lock& lock_;
  const std::chrono::milliseconds every_;
  const bool leader_;
  mutable std::mutex mutex_;
  std::string reason_;
  std::jthread thread_;  // last: joined before the members it uses are destroyed
};

// Why the lock can no longer cover CMD, or empty while it can: lost (revoked, lock_lost, the
// session gone), or its deadline within the stop margin because no extend (for a session-bound
// lock: no keepalive of its session) succeeded in time.
std::string stop_reason(const client::Lock& lock, const GrantProbe* probe,
                        SteadyClock::time_point now, const StopTimes& times) {
  std::string reason = lock.lost_reason();
  if (reason.empty() && probe != nullptr) reason = probe->lost_reason();
  if (!reason.empty()) return reason;
  const SteadyClock::time_point deadline = lock.client_deadline();
  const char* renewal = lock.session_bound() ? "keepalive of the session" : "extend";
  if (now >= deadline) {
    return std::string("the lock's deadline passed without a successful ") + renewal;
  }
  if (now >= term_time(deadline, times)) {
    return std::string("no successful ") + renewal + ", and the lock's deadline is " +
           describe(std::chrono::ceil<std::chrono::milliseconds>(deadline - now)) +
           " away (stop margin " + describe(times.margin) + ")";
  }
  return {};
}

// The grant CMD runs under: `acquired`, or the lock underneath `leadership`; `lock` is null
// when the key stayed held.
struct Grant {
  std::optional<client::Lock> acquired;
  std::optional<client::Leadership> leadership;
  client::Lock* lock = nullptr;
};

// Acquires (or campaigns) on a helper thread: the main thread must stay responsive to
// SIGINT/SIGTERM while the server makes us wait, without re-issuing the acquire (which would lose
// our place in the server's first-come first-served queue). A forwarded signal while it waits
// closes the session and ends the process with 128 + the signal. Rethrows the acquire's error.
void acquire_interruptibly(client::Session& session, const RunOptions& options,
                           const BlockedSignals& signals, Grant& grant, std::ostream& err) {
  std::exception_ptr acquire_error;
  std::atomic<bool> acquire_done{false};
  std::jthread acquirer([&] {
    try {
      if (options.leader_value) {
        // Session-bound by definition: the session's keepalives keep the leadership.
        grant.leadership =
            session.campaign(options.key, *options.leader_value, {options.wait, options.ns});
        if (grant.leadership) grant.lock = &grant.leadership->lock();
      } else {
        client::AcquireOptions acquire_options;
        acquire_options.session_bound = options.session_bound;
        if (!options.session_bound) acquire_options.ttl = options.ttl;
        acquire_options.wait = options.wait;
        acquire_options.ns = options.ns;
        acquire_options.mode = options.mode;
        acquire_options.permits = options.permits;
        // Ignored for a session-bound grant (its session's keepalives keep it).
        acquire_options.auto_extend = true;
        acquire_options.on_lost = [](const std::string&) { wake_main_thread(); };
        grant.acquired = session.acquire(options.key, std::move(acquire_options));
        if (grant.acquired) grant.lock = &*grant.acquired;
      }
    } catch (...) {
      acquire_error = std::current_exception();
    }
    acquire_done = true;
    wake_main_thread();
  });
  std::optional<WaitLine> line;
  if (options.terminal && options.wait.count() > 0 && options.state) {
    line.emplace(err, options.key, session.id(), options.state, SteadyClock::now());
  }
  while (!acquire_done) {
    siginfo_t info{};
    const int signo = signals.wait(std::nullopt, info);
    if (is_forwarded(signo)) {
      line.reset();
      err << "dlock: interrupted by signal " << signo << " while waiting for "
          << printable(options.key) << '\n';
      // Closing the session on the server drops a grant that may be arriving right now; the
      // acquiring thread is still blocked in its request, so leave without joining it.
      try {
        session.close();
      } catch (const std::exception& error) {
        err << "dlock: closing the session failed: " << printable(error.what()) << '\n';
      }
      std::_Exit(128 + signo);
    }
  }
  acquirer.join();
  line.reset();
  if (acquire_error) std::rethrow_exception(acquire_error);
}

// "not acquired": the key stayed held for the whole wait; names the holder when it can.
int report_not_acquired(const RunOptions& options, std::ostream& err) {
  std::vector<LockInfo> holders;
  try {
    if (options.state) holders = options.state().holders;
  } catch (const std::exception&) {
    // Not named then: the answer "held" stands on its own.
  }
  const std::string holder = held_by(holders);
  err << "dlock: " << printable(options.key)
      << (options.leader_value  ? ": another session leads (" + holder + ")"
          : options.permits > 0 ? ": every permit is taken (" + holder + ")"
                                : " is " + holder)
      << "; not acquired within " << client::format_duration(options.wait) << '\n';
  return kExitNotAcquired;
}

// The deadline counts from when the granting request was sent: a long --wait can leave less
// than the stop margin. Extend once rather than start CMD only to stop it. A session-bound
// lock's deadline is the session's, renewed every TTL/3 by its keepalives even while the
// acquire waited: that it is this close means they fail, and an extend cannot help. Returns
// kExitLockLost when CMD is not to run, std::nullopt when it is.
std::optional<int> renew_before_running(client::Lock& lock, const StopTimes& times,
                                        const RunOptions& options, std::ostream& err) {
  if (SteadyClock::now() < term_time(lock.client_deadline(), times)) return std::nullopt;
  if (lock.session_bound()) {
    err << "dlock: not running CMD: " << printable(options.key) << " is session-bound and "
        << printable(stop_reason(lock, nullptr, SteadyClock::now(), times)) << '\n';
    return kExitLockLost;
  }
  try {
    lock.extend();
  } catch (const LockLostError& error) {
    err << "dlock: lost " << printable(options.key)
        << " before running CMD: " << printable(error.what()) << '\n';
    return kExitLockLost;
  }
  return std::nullopt;
}

// CMD's environment: the grant it runs under.
std::vector<std::string> command_environment(const RunOptions& options, const Grant& grant,
                                             const client::Session& session) {
  std::vector<std::string> env = {
      "DLOCK_KEY=" + options.key,
      "DLOCK_FENCING_TOKEN=" + std::to_string(grant.lock->token()),
      "DLOCK_SESSION_ID=" + session.id(),
      "DLOCK_NAMESPACE=" + (options.ns.empty() ? std::string("default") : options.ns),
      // exclusive, shared or permit: as granted (ADR-0020).
      std::string("DLOCK_LOCK_MODE=") + to_string(grant.lock->mode()),
  };
  if (grant.leadership) env.push_back("DLOCK_LEADER_VALUE=" + grant.leadership->value());
  return env;
}

// How supervise() ended: CMD's status and whether the lock stopped covering it.
struct Supervised {
  int status = 0;
  // The lock could no longer cover CMD (lost, or its deadline within the stop margin).
  bool lost = false;
  // The server said the grant is gone (revoked, lock_lost, the session gone), as opposed to a
  // deadline reached without a renewal, when the lock may still exist.
  bool known_lost = false;
  // CMD stayed stopped for stopped_bound: its group is stopped, the lock released, exit 76.
  bool given_up = false;
};

// Supervises CMD's process group until none of it is left (ADR-0014). Wakes on SIGCHLD, a
// forwarded signal, a loss report, the stop time (deadline - margin, re-read every margin / 4),
// the SIGKILL time, and while members outlive the leader, every kGroupPoll.
// `stopped_bound`: how long CMD may stay stopped (SIGSTOP, SIGTTIN, SIGTTOU) before dlock gives
// the lock up.
Supervised supervise(ChildProcess* child, const client::Lock* lock, const GrantProbe* probe,
                     const StopTimes& times, std::chrono::milliseconds stopped_bound,
                     const RunOptions& options, const BlockedSignals& signals, std::ostream& err) {
  const std::string& name = options.command[0];
  Supervised result;
  bool& lost = result.lost;
  bool& given_up = result.given_up;
  std::optional<SteadyClock::time_point> term_sent, kill_at;
  bool killed = false;
  std::optional<SteadyClock::time_point> stop_reported;  // the stop last reported
  for (;;) {
    // The leader is waited for even if it left its group (then the group may be empty first).
    child->try_wait();
    if (!child->group_alive() && child->status()) break;
    const bool leader_done = child->status().has_value();
    const SteadyClock::time_point now = SteadyClock::now();
    const SteadyClock::time_point deadline = lock->client_deadline();
    if (!lost) {
      const std::string reason = stop_reason(*lock, probe, now, times);
      if (!reason.empty()) {
        lost = true;
        result.known_lost =
            !lock->lost_reason().empty() || (probe && !probe->lost_reason().empty());
        err << "dlock: lost " << printable(options.key) << " (token " << lock->token()
            << "): " << printable(reason) << '\n';
      }
    }
    const auto& stopped = child->stopped();
    if (!lost && !given_up && !leader_done && stopped) {
      if (stop_reported != stopped->since) {
        stop_reported = stopped->since;
        err << "dlock: " << printable(name) << " was stopped by " << signal_name(stopped->signo)
            << "; giving up " << printable(options.key) << " unless it continues within "
            << describe(stopped_bound) << '\n';
      }
      if (now - stopped->since >= stopped_bound) {
        given_up = true;
        err << "dlock: " << printable(name) << " is still stopped after " << describe(stopped_bound)
            << "; stopping its process group and releasing " << printable(options.key) << '\n';
      }
    }
    if (!kill_at && (lost || leader_done || given_up)) {
      if (lost || given_up) {
        err << "dlock: sending SIGTERM to the process group of " << printable(name) << '\n';
      } else {
        err << "dlock: " << printable(name)
            << " exited; stopping what it left running in its process "
            << "group before releasing " << printable(options.key) << '\n';
      }
      child->signal_group(SIGTERM);
      child->signal_group(SIGCONT);  // a stopped member acts on SIGTERM only once continued
      term_sent = now;
      kill_at = kill_time(now, deadline, times);
    }
    if (kill_at && !killed && now >= *kill_at) {
      err << "dlock: the process group of " << printable(name) << " still runs "
          << describe(std::chrono::floor<std::chrono::milliseconds>(now - *term_sent))
          << " after SIGTERM; sending SIGKILL\n";
      child->signal_group(SIGKILL);
      killed = true;
    }
    std::optional<SteadyClock::time_point> until;
    if (!kill_at) {
      // Nothing reports a successful extend, and one may bring the deadline closer (a shorter
      // TTL answered than asked): look again every margin / 4 at least, so SIGTERM is never
      // more than that late and SIGKILL still goes out by deadline - margin / 2.
      until = std::min(term_time(deadline, times), now + std::max(times.margin / 4, kGroupPoll));
    } else if (!killed) {
      until = *kill_at;
    }
    if (leader_done) until = until ? std::min(*until, now + kGroupPoll) : now + kGroupPoll;
    if (stopped && !given_up && !kill_at) {
      until =
          until ? std::min(*until, stopped->since + stopped_bound) : stopped->since + stopped_bound;
    }
    siginfo_t info{};
    const int signo = signals.wait(until, info);
    // Ctrl-C from a terminal dlock kept reaches dlock alone (CMD's group is not the terminal's
    // foreground group then); from a terminal handed to CMD it never reaches dlock. Either way
    // forwarding it to the group delivers it once.
    if (is_forwarded(signo)) child->signal_group(signo);
  }
  result.status = *child->status();
  return result;
}

// After CMD's group is gone: releases the lock (unless it was lost) and closes the session.
// Returns run_locked's exit status.
int finish(client::Session& session, client::Lock& lock, const Supervised& supervised,
           const RunOptions& options, std::ostream& err) {
  const std::string& name = options.command[0];
  if (supervised.lost) {
    if (supervised.known_lost) {
      // Nothing of ours is left to release: end the session, so that the grant's destructor
      // does not try (and report a failure already reported as the loss).
      try {
        session.close();
      } catch (const std::exception&) {
        // It expires on its own; it holds nothing.
      }
    }
    return kExitLockLost;
  }
  try {
    lock.release();
  } catch (const LockLostError& error) {
    // Lost while CMD ran (revoked, expired) and not noticed before CMD ended: CMD did not hold
    // the lock to the end, which is the loss itself, not a failed clean-up.
    err << "dlock: lost " << printable(options.key) << " (token " << lock.token() << ") before "
        << printable(name) << " ended: " << printable(error.what()) << '\n';
    try {
      session.close();
    } catch (const std::exception&) {
      // It expires on its own; it holds nothing.
    }
    return kExitLockLost;
  } catch (const std::exception& error) {
    err << "dlock: releasing " << printable(options.key) << " failed: " << printable(error.what())
        << '\n';
  }
  try {
    session.close();
  } catch (const std::exception& error) {
    err << "dlock: closing the session failed: " << printable(error.what()) << '\n';
  }
  return supervised.given_up ? kExitLockLost : supervised.status;
}

}  // namespace

int run_locked(client::Client& client, const RunOptions& options, std::ostream& err) {
  BlockedSignals signals;  // before any thread starts, so every thread inherits the mask
  OrphanReaper reaper;

  client::Session session(
      client, {options.owner, options.ttl, [](const std::string&) { wake_main_thread(); },
               options.lock_delay});
  // A session-bound lock lives by the session's TTL. A TTL lock without --ttl gets the server's
  // default lock TTL, which the session's TTL (the server's default session TTL, 30 s for both
  // unless configured) stands in for.
  const std::chrono::milliseconds lock_ttl =
      !options.session_bound && options.ttl.count() > 0 ? options.ttl : session.ttl();
  const StopTimes times = stop_times(lock_ttl, options.stop_margin, options.kill_grace);

  Grant grant;
  acquire_interruptibly(session, options, signals, grant, err);
  if (!grant.lock) return report_not_acquired(options, err);
  client::Lock* lock = grant.lock;
  if (const auto status = renew_before_running(*lock, times, options, err)) return *status;

  const std::vector<std::string> env = command_environment(options, grant, session);
  std::optional<GrantProbe> probe;
  if (lock->session_bound()) {
    probe.emplace(client, *lock, session.ttl() / 3, grant.leadership.has_value());
  }
  std::optional<ChildProcess> child;
  try {
    child.emplace(options.command, env, signals.previous(), /*take_terminal=*/true);
  } catch (const std::system_error& error) {
    err << "dlock: " << printable(error.what()) << '\n';
    return error.code().value() == ENOENT ? kExitCommandNotFound : kExitCannotExecute;
  }
  // How long CMD may stay stopped before dlock gives the lock up: one TTL (ADR-0014, "A stopped
  // CMD").
  const Supervised supervised =
      supervise(&*child, lock, probe ? &*probe : nullptr, times, lock_ttl, options, signals, err);
  child.reset();
  probe.reset();
  return finish(session, *lock, supervised, options, err);
}

}  // namespace dlock::cli
