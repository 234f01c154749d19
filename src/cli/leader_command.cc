#include "cli/leader_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <optional>
#include <ostream>
#include <thread>

namespace dlock::cli {
namespace {

bool same(const std::optional<client::LeaderInfo>& a, const std::optional<client::LeaderInfo>& b) {
  if (!a || !b) return a.has_value() == b.has_value();
  return a->fencing_token == b->fencing_token && a->value == b->value;
}

}  // namespace

void watch_leader(client::Client& client, const std::string& name, const std::string& ns,
                  Printer& printer, std::ostream& out, std::chrono::milliseconds poll,
                  const std::stop_token& stop) {
  std::optional<client::LeaderInfo> current = client.leader(name, ns);
  printer.leader(name, current);
  out.flush();
  // The last leader's token stays the basis while nobody leads: only a greater one wakes us.
  FencingToken after_token = current ? current->fencing_token : 0;
  while (!stop.stop_requested()) {
    // With a leader its value too, so that a proclaim (same token, new value) wakes us.
    const std::optional<std::string> after_value =
        current ? std::optional<std::string>(current->value) : std::nullopt;
    std::optional<client::LeaderInfo> next =
        client.observe(name, after_token, after_value, poll, ns);
    if (same(next, current)) continue;  // the poll ended without a change
    current = std::move(next);
    if (current) after_token = current->fencing_token;
    if (stop.stop_requested()) return;
    printer.leader(name, current);
    out.flush();
  }
}

int watch_until_interrupted(client::Client& client, const std::string& name, const std::string& ns,
                            Printer& printer, std::ostream& out) {
  return until_interrupted(
      [&](const std::stop_token& stop) {
        watch_leader(client, name, ns, printer, out, kWatchPoll, stop);
      },
      out);
}

int until_interrupted(const std::function<void(const std::stop_token&)>& body, std::ostream& out) {
  // Blocked before the watcher starts, so every thread inherits the mask and the signals are
  // taken here, by sigwait, alone.
  sigset_t set, previous;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // the watcher ended (an error)
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  std::exception_ptr failure;
  std::jthread watcher([&](const std::stop_token& stop) {
    try {
      body(stop);
    } catch (...) {
      failure = std::current_exception();
    }
    ::kill(::getpid(), SIGUSR1);
  });
  int signo = 0;
  while (sigwait(&set, &signo) != 0 || (signo != SIGUSR1 && signo != SIGINT && signo != SIGTERM)) {
  }
  if (signo != SIGUSR1) {
    // Interrupted: the end of a watch, not a failure. The poll in flight may last up to a
    // minute: leave without waiting for it.
    out.flush();
    std::_Exit(0);
  }
  watcher.join();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (failure) std::rethrow_exception(failure);
  return 0;
}

}  // namespace dlock::cli
