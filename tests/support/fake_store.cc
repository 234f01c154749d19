#include "support/fake_store.h"

#include <utility>

namespace dlock::testing {

using std::chrono::milliseconds;

FakeStore::FakeStore(FakeStoreOptions options) : options_(std::move(options)) {}

bool FakeStore::session_live(std::string_view session_id, WallClock::time_point now) const {
  const auto found = sessions_.find(session_id);
  return found != sessions_.end() && found->second.expires_at > now;
}

const LockInfo* FakeStore::live_grant(std::string_view key, WallClock::time_point now) const {
  const auto found = locks_.find(key);
  if (found == locks_.end() || found->second.expires_at <= now) return nullptr;
  return &found->second;
}

LockHandle FakeStore::grant(std::string_view key, std::string_view owner_id,
                            std::string_view session_id, milliseconds ttl,
                            SteadyClock::time_point sent_at, WallClock::time_point now) {
  LockInfo info{
      std::string(key), std::string(owner_id), std::string(session_id), next_token_++, now,
      now + ttl};
  locks_.insert_or_assign(std::string(key), info);
  return LockHandle{info.key,           info.owner_id, info.session_id,
                    info.fencing_token, sent_at + ttl, info.expires_at};
}

std::optional<LockHandle> FakeStore::try_insert(std::string_view key, std::string_view owner_id,
                                                std::string_view session_id, milliseconds ttl) {
  const auto sent_at = SteadyClock::now();
  check_ttl(ttl, options_.limits, "ttl_ms");
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  if (!session_live(session_id, now)) {
    throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
  }
  if (const auto* holder = live_grant(key, now)) {
    if (holder->owner_id != owner_id || holder->session_id != session_id) return std::nullopt;
  }
  return grant(key, owner_id, session_id, ttl, sent_at, now);
}

std::optional<LockInfo> FakeStore::read(std::string_view key) {
  std::lock_guard lock(mutex_);
  const auto* holder = live_grant(key, options_.now());
  if (!holder) return std::nullopt;
  return *holder;
}

std::vector<LockInfo> FakeStore::list(std::string_view prefix, std::size_t limit) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  std::vector<LockInfo> found;
  for (auto row = locks_.lower_bound(prefix); row != locks_.end() && found.size() < limit; ++row) {
    if (!row->first.starts_with(prefix)) break;
    if (row->second.expires_at > now) found.push_back(row->second);
  }
  return found;
}

LockHandle FakeStore::extend(const LockHandle& handle, milliseconds ttl) {
  const auto sent_at = SteadyClock::now();
  check_ttl(ttl, options_.limits, "ttl_ms");
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  const auto row = locks_.find(handle.key);
  if (row == locks_.end() || row->second.expires_at <= now ||
      row->second.fencing_token != handle.fencing_token ||
      row->second.session_id != handle.session_id || row->second.owner_id != handle.owner_id) {
    throw LockLostError("lock " + handle.key + " is not held by this grant");
  }
  row->second.expires_at = now + ttl;
  auto extended = handle;
  extended.client_deadline = sent_at + ttl;
  extended.server_expiry = row->second.expires_at;
  return extended;
}

bool FakeStore::delete_if_owner(std::string_view key, std::string_view owner_id,
                                std::string_view session_id, FencingToken fencing_token) {
  bool released = false;
  {
    std::lock_guard lock(mutex_);
    const auto row = locks_.find(key);
    if (row == locks_.end() || row->second.fencing_token != fencing_token ||
        row->second.owner_id != owner_id || row->second.session_id != session_id) {
      return false;
    }
    released = row->second.expires_at > options_.now();
    locks_.erase(row);
  }
  hub_.notify(key);
  return released;
}

std::optional<LockHandle> FakeStore::handover(const LockHandle& from,
                                              std::string_view next_owner_id,
                                              std::string_view next_session_id, milliseconds ttl) {
  const auto sent_at = SteadyClock::now();
  check_ttl(ttl, options_.limits, "ttl_ms");
  {
    std::lock_guard lock(mutex_);
    const auto now = options_.now();
    const auto* holder = live_grant(from.key, now);
    if (!holder || holder->fencing_token != from.fencing_token ||
        holder->session_id != from.session_id || holder->owner_id != from.owner_id) {
      throw LockLostError("lock " + from.key + " is not held by this grant");
    }
    if (session_live(next_session_id, now)) {
      return grant(from.key, next_owner_id, next_session_id, ttl, sent_at, now);
    }
    locks_.erase(from.key);
  }
  hub_.notify(from.key);
  return std::nullopt;
}

LockOutcome FakeStore::revoke(std::string_view key) {
  LockOutcome outcome;
  {
    std::lock_guard lock(mutex_);
    const auto* holder = live_grant(key, options_.now());
    if (!holder) return outcome;
    outcome = {true, holder->fencing_token, holder->owner_id};
    locks_.erase(locks_.find(key));
  }
  hub_.notify(key);
  return outcome;
}

ReapReport FakeStore::reap_expired() {
  ReapReport report;
  {
    std::lock_guard lock(mutex_);
    const auto now = options_.now();
    for (auto session = sessions_.begin(); session != sessions_.end();) {
      if (session->second.expires_at > now) {
        ++session;
        continue;
      }
      report.expired_sessions.push_back(session->first);
      session = sessions_.erase(session);
    }
    for (auto row = locks_.begin(); row != locks_.end();) {
      const bool session_gone = !sessions_.contains(row->second.session_id);
      if (row->second.expires_at > now && !session_gone) {
        ++row;
        continue;
      }
      report.expired_locks.push_back(row->second);
      row = locks_.erase(row);
    }
  }
  for (const auto& info : report.expired_locks) hub_.notify(info.key);
  return report;
}

ReleaseSubscriptionPtr FakeStore::watch_releases(std::string_view key,
                                                 std::function<void()> on_released) {
  return hub_.subscribe(key, std::move(on_released));
}

SessionInfo FakeStore::open_session(std::string_view owner_id, milliseconds ttl) {
  check_ttl(ttl, options_.limits, "ttl_ms");
  if (owner_id.empty()) throw InvalidArgumentError("owner", "owner must not be empty");
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  SessionInfo info{"session-" + std::to_string(next_session_++), std::string(owner_id), ttl,
                   now + ttl};
  sessions_.emplace(info.session_id, Session{info.owner_id, ttl, info.expires_at});
  return info;
}

SessionInfo FakeStore::heartbeat(std::string_view session_id) {
  std::lock_guard lock(mutex_);
  const auto now = options_.now();
  if (!session_live(session_id, now)) {
    throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
  }
  auto& session = sessions_.find(session_id)->second;
  session.expires_at = now + session.ttl;
  return SessionInfo{std::string(session_id), session.owner_id, session.ttl, session.expires_at};
}

std::optional<SessionInfo> FakeStore::get_session(std::string_view session_id) {
  std::lock_guard lock(mutex_);
  if (!session_live(session_id, options_.now())) return std::nullopt;
  const auto& session = sessions_.find(session_id)->second;
  return SessionInfo{std::string(session_id), session.owner_id, session.ttl, session.expires_at};
}

std::vector<LockInfo> FakeStore::close_session(std::string_view session_id) {
  std::vector<LockInfo> released;
  {
    std::lock_guard lock(mutex_);
    const auto now = options_.now();
    if (!session_live(session_id, now)) {
      throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
    }
    sessions_.erase(sessions_.find(session_id));
    for (auto row = locks_.begin(); row != locks_.end();) {
      if (row->second.session_id != session_id) {
        ++row;
        continue;
      }
      if (row->second.expires_at > now) released.push_back(row->second);
      row = locks_.erase(row);
    }
  }
  for (const auto& info : released) hub_.notify(info.key);
  return released;
}

FencingToken FakeStore::last_token() const {
  std::lock_guard lock(mutex_);
  return next_token_ - 1;
}

}  // namespace dlock::testing
