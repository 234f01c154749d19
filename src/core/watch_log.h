#pragma once

// The lock events this dlockd saw (ADR-0032, C3 "Watch"): grants, releases, expiries, revokes,
// waiters joining and leaving, numbered in one sequence per dlockd process and kept in a
// bounded ring. A watcher long-polls for the events after a position; a position from another
// process (a restart, another dlockd) or older than the ring is answered with a reset, never
// with a silent gap. Thread-safe; answers run on the thread that records (or, at a deadline,
// on the time source's thread), never under the log's lock.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "core/time_source.h"
#include "dlock/types.h"

namespace dlock::core {

enum class WatchKind { kGrant, kRelease, kExpire, kRevoke, kWaiterJoined, kWaiterLeft };
std::string_view to_string(WatchKind kind);

struct WatchEvent {
  std::uint64_t seq = 0;  // set by WatchLog::record
  WatchKind kind = WatchKind::kGrant;
  std::string key;         // the store key, "<ns>/<key>"
  FencingToken token = 0;  // 0: none (a waiter's event)
  std::string owner_id;    // the stored owner
  std::string session_id;
  HoldMode mode = HoldMode::kExclusive;
  WallClock::time_point at{};
  std::string reason;  // waiter_left: granted, gave_up, error; else ""
};

// Which keys a watcher follows: one key, or every key beginning with a prefix.
struct WatchFilter {
  std::string key;  // the store key (exact) or store-key prefix
  bool prefix = false;
  bool matches(const std::string& key) const;
};

class WatchLog {
 public:
  // `capacity`: how many events the ring keeps; `epoch`: this process's mark in positions.
  WatchLog(TimeSource& time, std::size_t capacity, std::string epoch);
  ~WatchLog();
  WatchLog(const WatchLog&) = delete;
  WatchLog& operator=(const WatchLog&) = delete;

  // Numbers the event, keeps it, and answers the pending polls it matches.
  void record(WatchEvent event);

  struct Page {
    // The position was not one this log can continue from (another process, fell out of the
    // ring, or from the future): the events are from "now", and the client must re-read state.
    std::optional<std::string> reset;
    std::vector<WatchEvent> events;
    std::string next;  // the position after the last event considered
  };
  using Done = std::function<void(Page)>;
  // The matching events after `after` (a position, or "" for "now"), at most `limit`; with none
  // yet, waits up to `wait` for one (an empty page at the deadline, or at shutdown). A cancelled
  // poll leaves at once, answered with what it has (its client has gone).
  void poll(WatchFilter filter, const std::string& after, std::size_t limit,
            std::chrono::milliseconds wait, Done done, const CancellationPtr& cancellation);
  // Answers every pending poll with what it has (nothing) and refuses waits from now on.
  void shutdown();

  std::string position(std::uint64_t seq) const;
  const std::string& epoch() const { return epoch_; }
  std::size_t pending() const;

 private:
  struct Pending;
  using PendingPtr = std::shared_ptr<Pending>;
  // Under mutex_: the page for `filter` from `from` (exclusive), or nothing to answer yet.
  Page collect_locked(const WatchFilter& filter, std::uint64_t from, std::size_t limit) const;
  void finish(const PendingPtr& pending);

  TimeSource& time_;
  const std::size_t capacity_;
  const std::string epoch_;

  mutable std::mutex mutex_;  // guards everything below
  std::deque<WatchEvent> ring_;
  std::uint64_t last_ = 0;  // the seq of the newest event recorded (0: none)
  std::list<PendingPtr> pending_;
  bool stopping_ = false;
};

}  // namespace dlock::core
