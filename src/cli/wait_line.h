#pragma once

// What dlock says about a held key: who holds it, when an acquire was not granted, and, on a
// terminal, one line redrawn every second while an acquire waits (docs/cli.md, "While
// waiting"). Owners come from the server: shown through printable().

#include <chrono>
#include <condition_variable>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.h"

namespace dlock::cli {

// "held by alice@node7 (token 41)", "held by 3 readers, newest bob (token 57)", "held by 2
// permits, newest …"; "held by another owner" when `holders` is empty (unknown, or released
// since).
std::string held_by(const std::vector<LockInfo>& holders);

// The waiting line without the terminal controls: "dlock: waiting for KEY: held by OWNER
// (token N); 2 ahead; waited 12s". `ahead`: how many waiters are before this one, when known.
// How many acquires wait before the first one of `session_id` in `waiters` (C3 "Waiters", the
// head first); none when it is not listed (another dlockd answered, or not queued yet).
std::optional<std::size_t> waiters_ahead(const std::vector<client::Waiter>& waiters,
                                         const std::string& session_id);

std::string waiting_line(const std::string& key, const std::vector<LockInfo>& holders,
                         std::optional<std::size_t> ahead, std::chrono::milliseconds waited);

// Draws waiting_line() on a terminal from a thread of its own, every second, from
// `first_draw` after construction (an acquire granted at once draws nothing); asks `lookup`
// for the holders and waiters every 2 s (a failure keeps the last answer) and counts the
// waiters ahead of `session_id`'s acquire. The destructor stops the thread
// and clears the line, so the next message starts on a clean line.
class WaitLine {
 public:
  using Lookup = std::function<client::KeyState()>;
  WaitLine(std::ostream& err, std::string key, std::string session_id, Lookup lookup,
           SteadyClock::time_point started,
           std::chrono::milliseconds first_draw = std::chrono::milliseconds(500));
  WaitLine(const WaitLine&) = delete;
  WaitLine& operator=(const WaitLine&) = delete;
  ~WaitLine();

 private:
  void loop(const std::stop_token& stop);

  std::ostream& err_;
  const std::string key_;
  const std::string session_id_;
  const Lookup lookup_;
  const SteadyClock::time_point started_;
  const std::chrono::milliseconds first_draw_;
  bool drawn_ = false;   // written by the thread, read after it was joined
  std::jthread thread_;  // last: joined before the members it uses are destroyed
};

}  // namespace dlock::cli
