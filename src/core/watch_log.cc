#include "core/watch_log.h"

#include <charconv>
#include <utility>

namespace dlock::core {

std::string_view to_string(WatchKind kind) {
  switch (kind) {
    case WatchKind::kGrant:
      return "grant";
    case WatchKind::kRelease:
      return "release";
    case WatchKind::kExpire:
      return "expire";
    case WatchKind::kRevoke:
      return "revoke";
    case WatchKind::kWaiterJoined:
      return "waiter_joined";
    case WatchKind::kWaiterLeft:
      return "waiter_left";
  }
  return "unknown";
}

bool WatchFilter::matches(const std::string& candidate) const {
  return prefix ? candidate.starts_with(key) : candidate == key;
}

struct WatchLog::Pending {
  WatchFilter filter;
  std::uint64_t from = 0;
  std::size_t limit = 0;
  Done done;
  TimerPtr timer;
  bool finished = false;
};

WatchLog::WatchLog(TimeSource& time, std::size_t capacity, std::string epoch)
    : time_(time), capacity_(std::max<std::size_t>(capacity, 1)), epoch_(std::move(epoch)) {}

WatchLog::~WatchLog() { shutdown(); }

std::string WatchLog::position(std::uint64_t seq) const {
  return epoch_ + "." + std::to_string(seq);
}

std::size_t WatchLog::pending() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

void WatchLog::record(WatchEvent event) {
  std::vector<std::pair<PendingPtr, Page>> answers;
  {
    std::lock_guard lock(mutex_);
    event.seq = ++last_;
    ring_.push_back(std::move(event));
    if (ring_.size() > capacity_) ring_.pop_front();
    const auto& recorded = ring_.back();
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto& pending = *it;
      if (!pending->filter.matches(recorded.key)) {
        ++it;
        continue;
      }
      pending->finished = true;
      answers.emplace_back(pending, collect_locked(pending->filter, pending->from, pending->limit));
      it = pending_.erase(it);
    }
  }
  for (auto& [pending, page] : answers) {
    if (pending->timer) pending->timer->cancel();
    pending->done(std::move(page));
  }
}

WatchLog::Page WatchLog::collect_locked(const WatchFilter& filter, std::uint64_t from,
                                        std::size_t limit) const {
  Page page;
  std::uint64_t considered = last_;
  // ring_ holds the seqs (last_ - size, last_], consecutive.
  const auto first = last_ - ring_.size() + 1;
  for (auto seq = std::max(from + 1, first); seq <= last_; ++seq) {
    const auto& event = ring_[seq - first];
    if (!filter.matches(event.key)) continue;
    if (page.events.size() == limit) {
      considered = seq - 1;
      break;
    }
    page.events.push_back(event);
  }
  page.next = position(considered);
  return page;
}

void WatchLog::poll(WatchFilter filter, const std::string& after, std::size_t limit,
                    std::chrono::milliseconds wait, Done done,
                    const CancellationPtr& cancellation) {
  auto pending = std::make_shared<Pending>();
  Page page;
  {
    std::lock_guard lock(mutex_);
    std::optional<std::string> reset;
    std::uint64_t from = last_;
    if (!after.empty()) {
      const auto dot = after.rfind('.');
      std::uint64_t seq = 0;
      const auto digits =
          dot == std::string::npos ? std::string_view() : std::string_view(after).substr(dot + 1);
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
      if (dot == std::string::npos || after.substr(0, dot) != epoch_ || digits.empty() ||
          error != std::errc() || end != digits.data() + digits.size()) {
        reset = "the position is from another dlockd process (a restart, or another dlockd)";
      } else if (seq > last_) {
        reset = "the position is ahead of this dlockd's events";
      } else if (seq + ring_.size() < last_) {
        // The oldest kept event is last_ - size + 1: events after `seq` were dropped.
        reset = "the position fell out of this dlockd's event log (a slow or long-gone watcher)";
      } else {
        from = seq;
      }
    }
    page = collect_locked(filter, from, limit);
    page.reset = std::move(reset);
    if (!page.events.empty() || page.reset || wait.count() <= 0 || stopping_) {
      pending->finished = true;
    } else {
      pending->filter = std::move(filter);
      pending->from = from;
      pending->limit = limit;
      pending->done = std::move(done);
      pending->timer = time_.make_timer();
      pending_.push_back(pending);
    }
  }
  if (pending->finished) return done(std::move(page));
  pending->timer->arm(wait, [this, weak = std::weak_ptr<Pending>(pending)] {
    if (auto alive = weak.lock()) finish(alive);
  });
  if (cancellation) {
    // Its client has gone: answered now (nobody reads it), so that whatever the answer releases
    // (the caller's count of waiting requests) is released at once.
    cancellation->arm_watched([this, weak = std::weak_ptr<Pending>(pending)] {
      if (const auto alive = weak.lock()) {
        if (alive->timer) alive->timer->cancel();
        finish(alive);
      }
    });
  }
}

void WatchLog::finish(const PendingPtr& pending) {
  Page page;
  {
    std::lock_guard lock(mutex_);
    if (pending->finished) return;
    pending->finished = true;
    pending_.remove(pending);
    page = collect_locked(pending->filter, pending->from, pending->limit);
  }
  pending->done(std::move(page));
}

void WatchLog::shutdown() {
  std::list<PendingPtr> pending;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    pending.swap(pending_);
  }
  for (const auto& each : pending) {
    if (each->timer) each->timer->cancel();
    finish(each);
  }
}

}  // namespace dlock::core
