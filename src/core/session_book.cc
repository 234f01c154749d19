#include "core/session_book.h"

#include <utility>

namespace dlock::core {

namespace {

// Absorbs clock skew between this host and the backend, whose clock sets expires_at.
constexpr auto kExpiryGrace = std::chrono::seconds(5);
// A session's owner never changes, so the cache never goes stale; it only needs a bound.
constexpr std::size_t kMaxCachedOwners = 1'000'000;

}  // namespace

std::optional<std::string> SessionBook::owner(const std::string& session_id) const {
  std::lock_guard lock(mutex_);
  if (const auto found = owners_.find(session_id); found != owners_.end()) return found->second;
  return std::nullopt;
}

void SessionBook::remember_owner(const std::string& session_id, const std::string& owner_id) {
  std::lock_guard lock(mutex_);
  if (owners_.size() >= kMaxCachedOwners) owners_.clear();
  owners_[session_id] = owner_id;
}

SessionBook::Capacity SessionBook::check_capacity(std::string_view principal,
                                                  WallClock::time_point now) {
  std::lock_guard lock(mutex_);
  return capacity(principal, now);
}

SessionBook::Capacity SessionBook::reserve(std::string_view principal, WallClock::time_point now) {
  std::lock_guard lock(mutex_);
  Capacity room = capacity(principal, now);
  if (room.refusal.empty()) {
    ++reserved_;
    ++reserved_per_principal_[std::string(principal)];
  }
  return room;
}

void SessionBook::release_reservation(std::string_view principal) {
  std::lock_guard lock(mutex_);
  unreserve(principal);
}

void SessionBook::unreserve(std::string_view principal) {
  const auto found = reserved_per_principal_.find(std::string(principal));
  if (found == reserved_per_principal_.end()) return;
  --reserved_;
  if (--found->second == 0) reserved_per_principal_.erase(found);
}

SessionBook::Capacity SessionBook::capacity(std::string_view principal, WallClock::time_point now) {
  // Places held by reserve() count like sessions: their opens are under way.
  const auto principal_count = [&]() -> std::size_t {
    const auto found = per_principal_.find(std::string(principal));
    const auto held = reserved_per_principal_.find(std::string(principal));
    return (found == per_principal_.end() ? 0 : found->second) +
           (held == reserved_per_principal_.end() ? 0 : held->second);
  };
  const auto total = [&] { return local_.size() + reserved_; };
  const auto per_principal_full = [&] {
    return limits_.max_sessions_per_principal > 0 &&
           principal_count() >= limits_.max_sessions_per_principal;
  };
  Capacity capacity;
  // Sessions that expired without this server hearing of it would otherwise count against the
  // cap for ever. Only at a cap, and each expired session once: the check stays O(1).
  if (total() >= limits_.max_sessions || per_principal_full()) {
    capacity.pruned = prune(now - kExpiryGrace);
  }
  if (total() >= limits_.max_sessions) {
    capacity.refusal =
        "too many open sessions (limit " + std::to_string(limits_.max_sessions) + ")";
  } else if (per_principal_full()) {
    capacity.refusal = "too many open sessions for principal " + std::string(principal) +
                       " (limit " + std::to_string(limits_.max_sessions_per_principal) + ")";
  }
  return capacity;
}

bool SessionBook::add(const std::string& session_id, std::string_view principal,
                      WallClock::time_point expires_at, bool reserved) {
  std::lock_guard lock(mutex_);
  if (reserved) unreserve(principal);
  if (const auto found = local_.find(session_id); found != local_.end()) {
    by_expiry_.erase(found->second.by_expiry);
    found->second.by_expiry = by_expiry_.emplace(expires_at, session_id);
    return false;
  }
  local_.emplace(session_id,
                 Local{std::string(principal), by_expiry_.emplace(expires_at, session_id)});
  ++per_principal_[std::string(principal)];
  return true;
}

void SessionBook::renew(const std::string& session_id, WallClock::time_point expires_at) {
  std::lock_guard lock(mutex_);
  const auto found = local_.find(session_id);
  if (found == local_.end()) return;
  by_expiry_.erase(found->second.by_expiry);
  found->second.by_expiry = by_expiry_.emplace(expires_at, session_id);
}

bool SessionBook::forget(const std::string& session_id) {
  std::lock_guard lock(mutex_);
  owners_.erase(session_id);
  const auto found = local_.find(session_id);
  if (found == local_.end()) return false;
  erase(found);
  return true;
}

std::vector<std::string> SessionBook::unsure(const std::vector<std::string>& session_ids,
                                             WallClock::time_point now) const {
  std::vector<std::string> unsure;
  std::lock_guard lock(mutex_);
  for (const auto& session_id : session_ids) {
    const auto known = local_.find(session_id);
    if (known == local_.end() || known->second.by_expiry->first <= now) {
      unsure.push_back(session_id);
    }
  }
  return unsure;
}

std::vector<std::string> SessionBook::sessions_of(
    const std::function<bool(std::string_view owner)>& chosen) const {
  std::vector<std::string> sessions;
  std::lock_guard lock(mutex_);
  for (const auto& [session_id, owner] : owners_) {
    if (chosen(owner)) sessions.push_back(session_id);
  }
  return sessions;
}

std::size_t SessionBook::size() const {
  std::lock_guard lock(mutex_);
  return local_.size();
}

std::size_t SessionBook::count_of(std::string_view principal) const {
  std::lock_guard lock(mutex_);
  const auto found = per_principal_.find(std::string(principal));
  return found == per_principal_.end() ? 0 : found->second;
}

std::size_t SessionBook::prune(WallClock::time_point horizon) {
  std::size_t pruned = 0;
  while (!by_expiry_.empty() && by_expiry_.begin()->first < horizon) {
    erase(local_.find(by_expiry_.begin()->second));
    ++pruned;
  }
  return pruned;
}

void SessionBook::erase(std::unordered_map<std::string, Local>::iterator session) {
  by_expiry_.erase(session->second.by_expiry);
  const auto count = per_principal_.find(session->second.principal);
  if (count != per_principal_.end() && --count->second == 0) per_principal_.erase(count);
  local_.erase(session);
}

}  // namespace dlock::core
