#include "cli/wait_line.h"

#include <algorithm>
#include <ostream>

#include "cli/terminal_text.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kRedraw{1000};
constexpr milliseconds kLookup{2000};

std::string whole_seconds(milliseconds waited) {
  return std::to_string(std::chrono::floor<std::chrono::seconds>(waited).count()) + "s";
}

}  // namespace

std::string held_by(const std::vector<LockInfo>& holders) {
  if (holders.empty()) return "held by another owner";
  const auto newest = std::max_element(
      holders.begin(), holders.end(),
      [](const LockInfo& a, const LockInfo& b) { return a.fencing_token < b.fencing_token; });
  const std::string owner =
      printable(newest->owner_id) + " (token " + std::to_string(newest->fencing_token) + ")";
  if (holders.size() == 1) return "held by " + owner;
  const char* what = newest->mode == HoldMode::kShared   ? " readers"
                     : newest->mode == HoldMode::kPermit ? " permits"
                                                         : " holders";
  return "held by " + std::to_string(holders.size()) + what + ", newest " + owner;
}

std::optional<std::size_t> waiters_ahead(const std::vector<client::Waiter>& waiters,
                                         const std::string& session_id) {
  if (session_id.empty()) return std::nullopt;
  for (const auto& waiter : waiters) {
    if (waiter.session_id == session_id) return waiter.position > 0 ? waiter.position - 1 : 0;
  }
  return std::nullopt;
}

std::string waiting_line(const std::string& key, const std::vector<LockInfo>& holders,
                         std::optional<std::size_t> ahead, milliseconds waited) {
  std::string line = "dlock: waiting for " + printable(key) + ": " + held_by(holders);
  if (ahead) line += "; " + std::to_string(*ahead) + " ahead";
  return line + "; waited " + whole_seconds(waited);
}

WaitLine::WaitLine(std::ostream& err, std::string key, std::string session_id, Lookup lookup,
                   SteadyClock::time_point started, milliseconds first_draw)
    : err_(err),
      key_(std::move(key)),
      session_id_(std::move(session_id)),
      lookup_(std::move(lookup)),
      started_(started),
      first_draw_(first_draw),
      thread_([this](const std::stop_token& stop) { loop(stop); }) {}

WaitLine::~WaitLine() {
  thread_.request_stop();
  thread_.join();
  if (drawn_) err_ << "\r\x1b[K" << std::flush;
}

void WaitLine::loop(const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any wake;
  const auto sleep = [&](milliseconds delay) {
    std::unique_lock lock(mutex);
    return !wake.wait_for(lock, stop, delay, [] { return false; }) && !stop.stop_requested();
  };
  if (!sleep(first_draw_)) return;
  client::KeyState state;
  std::optional<SteadyClock::time_point> looked_up;
  for (;;) {
    if (!looked_up || SteadyClock::now() - *looked_up >= kLookup) {
      try {
        state = lookup_();
      } catch (const std::exception&) {
        // Keep the last answer: the line is a courtesy, the acquire decides.
      }
      looked_up = SteadyClock::now();
      if (stop.stop_requested()) return;
    }
    err_ << "\r\x1b[K"
         << waiting_line(key_, state.holders, waiters_ahead(state.waiters, session_id_),
                         std::chrono::duration_cast<milliseconds>(SteadyClock::now() - started_))
         << std::flush;
    drawn_ = true;
    if (!sleep(kRedraw)) return;
  }
}

}  // namespace dlock::cli
