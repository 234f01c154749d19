#include "server/log_limiter.h"

#include <algorithm>
#include <utility>

namespace dlock::server {

LogLimiter::Notice LogLimiter::end_of(const std::string& name, Client& client) {
  Notice notice{name, false, client.dropped, std::move(client.dropped_by_kind)};
  client.dropping = false;
  client.dropped = 0;
  client.dropped_by_kind.clear();
  return notice;
}

LogLimiter::Verdict LogLimiter::admit(std::string_view client_name, std::string_view kind,
                                      Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto found = clients_.find(client_name);
  if (found == clients_.end()) {
    if (clients_.size() >= options_.max_clients) forget_idle(now);
    Client fresh;
    fresh.tokens = options_.burst;
    fresh.refilled = now;
    found = clients_.emplace(std::string(client_name), std::move(fresh)).first;
  }
  Client& client = found->second;
  const double elapsed = std::chrono::duration<double>(now - client.refilled).count();
  client.tokens =
      std::min(options_.burst, client.tokens + std::max(0.0, elapsed) * options_.lines_per_second);
  client.refilled = now;

  Verdict verdict;
  if (client.dropping && now - client.last_drop >= options_.quiet) {
    verdict.notice = end_of(found->first, client);
  }
  if (client.tokens >= 1) {
    client.tokens -= 1;
    return verdict;
  }
  verdict.admit = false;
  if (!client.dropping) {
    // A fresh episode (the end notice of a previous one, if any, is already in the verdict:
    // both cannot be told in one line, so the start is implied by the end's counts then).
    client.dropping = true;
    if (!verdict.notice) verdict.notice = Notice{found->first, true, 0, {}};
  }
  client.last_drop = now;
  ++client.dropped;
  ++client.dropped_by_kind[std::string(kind)];
  ++dropped_total_;
  return verdict;
}

std::vector<LogLimiter::Notice> LogLimiter::sweep(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<Notice> ended;
  for (auto& [name, client] : clients_) {
    if (client.dropping && now - client.last_drop >= options_.quiet) {
      ended.push_back(end_of(name, client));
    }
  }
  return ended;
}

std::uint64_t LogLimiter::dropped_total() const {
  std::lock_guard lock(mutex_);
  return dropped_total_;
}

void LogLimiter::forget_idle(Clock::time_point now) {
  std::erase_if(clients_, [&](const auto& entry) {
    const Client& client = entry.second;
    const double elapsed = std::chrono::duration<double>(now - client.refilled).count();
    return !client.dropping &&
           client.tokens + elapsed * options_.lines_per_second >= options_.burst;
  });
}

}  // namespace dlock::server
