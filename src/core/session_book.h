#pragma once

// What one dlockd knows about sessions (ADR-0007): the owner of each session it has seen (a
// cache: a session's owner never changes), and the sessions opened through it with their last
// known expiry, counted against the server-wide cap and per principal. Every cap check is O(1):
// counts are kept as sessions come and go, and sessions that expired unseen (closed through
// another dlockd, an etcd lease that lapsed) are pruned from an index ordered by expiry, each
// once. Thread-safe.

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock/lock_store.h"

namespace dlock::core {

struct SessionLimits {
  // Sessions opened through this server and not yet closed or expired.
  std::size_t max_sessions = 100000;
  // The same, per principal; 0: no per-principal limit.
  std::size_t max_sessions_per_principal = 0;
};

class SessionBook {
 public:
  explicit SessionBook(SessionLimits limits) : limits_(limits) {}
  SessionBook(const SessionBook&) = delete;
  SessionBook& operator=(const SessionBook&) = delete;

  // The cached owner of a session, if this server has seen it.
  std::optional<std::string> owner(const std::string& session_id) const;
  void remember_owner(const std::string& session_id, const std::string& owner_id);

  struct Capacity {
    std::size_t pruned = 0;  // expired sessions forgotten to make room (for the sessions gauge)
    // Why a new session would exceed a cap, naming the limit; empty when there is room.
    std::string refusal;
  };
  // Whether a session for `principal` ("" when there is none) fits under the caps, after
  // pruning, only when at a cap, the sessions that expired before `now` less a grace period.
  Capacity check_capacity(std::string_view principal, WallClock::time_point now);
  // check_capacity and, when there is room, one place held for `principal` in the same step,
  // so that concurrent opens cannot all pass the check before any is added (a held place counts
  // against both caps). The place is then taken by add(…, true) or given back by
  // release_reservation.
  Capacity reserve(std::string_view principal, WallClock::time_point now);
  void release_reservation(std::string_view principal);
  // Records a session opened through this server; false if it was already recorded (then only
  // its expiry is updated).
  // With `reserved`, the session takes the place reserve() held for `principal`.
  bool add(const std::string& session_id, std::string_view principal,
           WallClock::time_point expires_at, bool reserved = false);
  // A successful keepalive: the session lives at least until `expires_at`.
  void renew(const std::string& session_id, WallClock::time_point expires_at);
  // The session ended: forgets its owner; true if it was opened through this server.
  bool forget(const std::string& session_id);
  // Of these sessions, those this server cannot vouch for: opened elsewhere, or past the expiry
  // it last saw.
  std::vector<std::string> unsure(const std::vector<std::string>& session_ids,
                                  WallClock::time_point now) const;

  // The sessions whose cached owner `chosen` picks.
  std::vector<std::string> sessions_of(
      const std::function<bool(std::string_view owner)>& chosen) const;

  std::size_t size() const;
  std::size_t count_of(std::string_view principal) const;

 private:
  using ExpiryIndex = std::multimap<WallClock::time_point, std::string>;
  struct Local {
    std::string principal;
    ExpiryIndex::iterator by_expiry;
  };

  Capacity capacity(std::string_view principal, WallClock::time_point now);  // under mutex_
  void unreserve(std::string_view principal);                                // under mutex_
  std::size_t prune(WallClock::time_point horizon);                          // under mutex_
  void erase(std::unordered_map<std::string, Local>::iterator session);      // under mutex_

  const SessionLimits limits_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::string> owners_;  // session id -> owner (immutable)
  std::unordered_map<std::string, Local> local_;         // sessions opened here
  ExpiryIndex by_expiry_;                                // local_'s sessions by last known expiry
  std::unordered_map<std::string, std::size_t> per_principal_;  // counts of local_, no zeros
  std::size_t reserved_ = 0;  // places held by reserve(), not yet added or released
  std::unordered_map<std::string, std::size_t> reserved_per_principal_;  // no zeros
};

}  // namespace dlock::core
