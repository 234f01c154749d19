#pragma once

// The per-client bound on log lines (contract C4, "Log lines"): each client address may log
// `lines_per_second` lines a second, in bursts of `burst`. Over that, its lines are not written
// one by one: they are counted (dlock_log_dropped_total{reason="client_rate"}) per client and
// per kind, and the client's episode is told in two lines, a notice when it starts and one with
// the counts when it ends (`quiet` without a line over the rate). Audit lines are limited the
// same way: never dropped silently, each one over the rate is counted under its action in the
// end notice. Clock-free: callers pass the time, so tests drive it.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::server {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    double lines_per_second = 100;
    double burst = 200;
    // An episode ends after this long without a line over the rate.
    std::chrono::milliseconds quiet{1000};
    // Clients remembered at most; beyond, those with a full bucket and no episode are forgotten.
    std::size_t max_clients = 4096;
  };

  // What a client's episode of dropping was: announced when it starts (dropped 0), told with
  // its counts when it ends.
  struct Notice {
    std::string client;
    bool started = false;  // false: the episode ended
    std::uint64_t dropped = 0;
    std::map<std::string, std::uint64_t> dropped_by_kind;  // e.g. "audit:grant", "backend_error"
  };

  struct Verdict {
    bool admit = true;
    std::optional<Notice> notice;  // to log before (admitted) or instead of (dropped) the line
  };

  LogLimiter() : LogLimiter(Options{}) {}
  explicit LogLimiter(Options options) : options_(options) {}

  // One line of `kind` from `client` at `now`. Thread-safe.
  Verdict admit(std::string_view client, std::string_view kind, Clock::time_point now);
  // Episodes that have been quiet for `quiet` at `now`: their end notices. Thread-safe.
  std::vector<Notice> sweep(Clock::time_point now);

  std::uint64_t dropped_total() const;

 private:
  struct Client {
    double tokens = 0;
    Clock::time_point refilled;
    bool dropping = false;
    Clock::time_point last_drop;
    std::uint64_t dropped = 0;
    std::map<std::string, std::uint64_t> dropped_by_kind;
  };
  static Notice end_of(const std::string& name, Client& client);
  void forget_idle(Clock::time_point now);

  const Options options_;
  mutable std::mutex mutex_;
  std::map<std::string, Client, std::less<>> clients_;
  std::uint64_t dropped_total_ = 0;
};

}  // namespace dlock::server
