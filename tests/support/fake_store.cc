// The in-memory store of the unit tests (fake_store.h). Over ~500 lines: one definition per SPI
// operation (locks, holder sets, elections, sessions, reaping), each a few lines; split by area
// it would only scatter one small state machine over several files.

#include "support/fake_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "util/ids.h"
#include "util/validate.h"

namespace dlock::testing {

using std::chrono::milliseconds;

void FakeStorage::begin_outage() {
  std::lock_guard lock(mutex);
  outage = true;
}

void FakeStorage::end_outage() {
  std::lock_guard lock(mutex);
  outage = false;
}

void FakeStorage::raw_delete(std::string_view key) {
  std::lock_guard lock(mutex);
  if (const auto row = locks.find(key); row != locks.end()) locks.erase(row);
}

FakeStore::FakeStore(FakeStoreOptions options, std::shared_ptr<FakeStorage> storage)
    : options_(std::move(options)), storage_(std::move(storage)), s_(*storage_) {}

std::unique_lock<std::mutex> FakeStore::enter() const {
  std::unique_lock lock(s_.mutex);
  if (s_.outage) throw UnavailableError("fake storage: outage");
  return lock;
}

bool FakeStore::session_live(std::string_view session_id, WallClock::time_point now) const {
  const auto found = s_.sessions.find(session_id);
  return found != s_.sessions.end() && found->second.expires_at > now;
}

bool FakeStore::live(const LockInfo& row, WallClock::time_point now) const {
  return row.session_bound ? session_live(row.session_id, now) : row.expires_at > now;
}

LockInfo FakeStore::reported(const LockInfo& row) const {
  LockInfo info = row;
  if (const auto session = s_.sessions.find(row.session_id);
      row.session_bound && session != s_.sessions.end()) {
    info.expires_at = session->second.expires_at;
  }
  return info;
}

bool FakeStore::delayed(std::string_view key, WallClock::time_point now) const {
  if (const auto until = s_.delayed_until.find(key);
      until != s_.delayed_until.end() && until->second > now) {
    return true;
  }
  const auto ended_within_delay = [&](const LockInfo& row) {
    const auto delay = s_.grant_delay.find(row.fencing_token);
    return delay != s_.grant_delay.end() && !live(row, now) &&
           reported(row).expires_at + delay->second > now;
  };
  if (const auto row = s_.locks.find(key);
      row != s_.locks.end() && ended_within_delay(row->second)) {
    return true;
  }
  if (const auto rows = s_.holders.find(key); rows != s_.holders.end()) {
    for (const auto& [session, row] : rows->second) {
      if (ended_within_delay(row)) return true;
    }
  }
  return false;
}

void FakeStore::remove_unreleased(const LockInfo& row, WallClock::time_point end) {
  const auto delay = s_.grant_delay.find(row.fencing_token);
  if (delay == s_.grant_delay.end()) return;
  auto& until = s_.delayed_until[row.key];
  until = std::max(until, end + delay->second);
  s_.grant_delay.erase(delay);
}

const LockInfo* FakeStore::live_grant(std::string_view key, WallClock::time_point now) const {
  const auto found = s_.locks.find(key);
  if (found == s_.locks.end() || !live(found->second, now)) return nullptr;
  return &found->second;
}

std::vector<const LockInfo*> FakeStore::live_holders(std::string_view key,
                                                     WallClock::time_point now) const {
  std::vector<const LockInfo*> found;
  if (const auto rows = s_.holders.find(key); rows != s_.holders.end()) {
    for (const auto& [session, row] : rows->second) {
      if (live(row, now)) found.push_back(&row);
    }
  }
  std::sort(found.begin(), found.end(), [](const LockInfo* a, const LockInfo* b) {
    return a->fencing_token < b->fencing_token;
  });
  return found;
}

LockInfo FakeStore::make_row(std::string_view key, std::string_view owner_id,
                             std::string_view session_id, LockLease lease,
                             WallClock::time_point now) {
  // A session-bound grant lives until its session's expiry (the session is live here).
  const auto& session = s_.sessions.find(session_id)->second;
  const auto expires_at = lease.session_bound() ? session.expires_at : now + lease.ttl();
  if (session.lock_delay.count() > 0) s_.grant_delay[s_.next_token] = session.lock_delay;
  return LockInfo{
      std::string(key), std::string(owner_id), std::string(session_id), s_.next_token++, now,
      expires_at,       lease.session_bound()};
}

LockHandle FakeStore::handle_of(const LockInfo& row, SteadyClock::time_point sent_at,
                                WallClock::time_point now) const {
  return LockHandle{row.key,
                    row.owner_id,
                    row.session_id,
                    row.fencing_token,
                    sent_at + std::chrono::duration_cast<milliseconds>(row.expires_at - now),
                    row.expires_at,
                    row.session_bound,
                    row.mode};
}

LockHandle FakeStore::grant(std::string_view key, std::string_view owner_id,
                            std::string_view session_id, LockLease lease,
                            SteadyClock::time_point sent_at, WallClock::time_point now) {
  const auto& row =
      s_.locks.insert_or_assign(std::string(key), make_row(key, owner_id, session_id, lease, now))
          .first->second;
  return handle_of(row, sent_at, now);
}

std::optional<LockHandle> FakeStore::try_grant(std::string_view key, std::string_view owner_id,
                                               std::string_view session_id,
                                               const GrantRequest& request) {
  if (request.holder()) return insert_holder(key, owner_id, session_id, request);
  return insert_exclusive(key, owner_id, session_id, request.lease(), request.leader_value());
}

std::optional<LockHandle> FakeStore::insert_exclusive(std::string_view key,
                                                      std::string_view owner_id,
                                                      std::string_view session_id, LockLease lease,
                                                      std::optional<std::string_view> value) {
  const auto sent_at = SteadyClock::now();
  util::check_key(key);
  util::check_owner(owner_id);
  util::check_session_id(session_id);
  check_lease(lease, options_.limits);
  if (value) util::check_leader_value(*value);
  std::optional<LockHandle> granted;
  {
    const auto lock = enter();
    const auto now = options_.now();
    if (!session_live(session_id, now)) {
      throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
    }
    if (delayed(key, now)) return std::nullopt;
    if (const auto* holder = live_grant(key, now)) {
      if (holder->owner_id != owner_id || holder->session_id != session_id) return std::nullopt;
    }
    if (!live_holders(key, now).empty()) return std::nullopt;  // no upgrade (ADR-0020)
    granted = grant(key, owner_id, session_id, lease, sent_at, now);
    if (value) s_.locks.find(key)->second.value = std::string(*value);
  }
  if (value) s_.hub.notify(key);  // observers of the election (LockStore::watch_releases)
  return granted;
}

std::optional<LockHandle> FakeStore::insert_holder(std::string_view key, std::string_view owner_id,
                                                   std::string_view session_id,
                                                   const GrantRequest& request) {
  const auto sent_at = SteadyClock::now();
  util::check_holder_inputs(key, owner_id, session_id, options_.limits, request);
  const LockLease& lease = request.lease();
  const auto lock = enter();
  const auto now = options_.now();
  if (!session_live(session_id, now)) {
    throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
  }
  if (delayed(key, now)) return std::nullopt;
  if (live_grant(key, now) != nullptr) return std::nullopt;  // no downgrade (ADR-0020)
  std::uint32_t others = 0;
  for (const auto* holder : live_holders(key, now)) {
    if (holder->mode != request.mode()) return std::nullopt;
    if (holder->session_id == session_id) continue;
    if (request.mode() == HoldMode::kPermit && holder->limit != request.limit()) {
      throw ConflictError("limit", "semaphore " + std::string(key) + " has " +
                                       std::to_string(holder->limit) + " permits, not " +
                                       std::to_string(request.limit()));
    }
    ++others;
  }
  if (request.mode() == HoldMode::kPermit && others >= request.limit()) return std::nullopt;
  auto row = make_row(key, owner_id, session_id, lease, now);
  row.mode = request.mode();
  row.limit = request.mode() == HoldMode::kPermit ? request.limit() : 0;
  const auto& stored =
      s_.holders[std::string(key)].insert_or_assign(std::string(session_id), row).first->second;
  return handle_of(stored, sent_at, now);
}

std::vector<LockInfo> FakeStore::read_holders(std::string_view key) {
  const auto lock = enter();
  const auto now = options_.now();
  if (const auto* holder = live_grant(key, now)) return {reported(*holder)};
  std::vector<LockInfo> found;
  for (const auto* holder : live_holders(key, now)) found.push_back(reported(*holder));
  return found;
}

std::optional<LockInfo> FakeStore::read(std::string_view key) {
  const auto lock = enter();
  const auto now = options_.now();
  if (const auto* holder = live_grant(key, now)) return reported(*holder);
  const auto holders = live_holders(key, now);
  if (holders.empty()) return std::nullopt;
  return reported(*holders.back());
}

std::vector<LockInfo> FakeStore::list(std::string_view prefix, const ListAfter& after,
                                      std::size_t limit) {
  const auto lock = enter();
  const auto now = options_.now();
  const auto comes_after = [&](const LockInfo& info) {
    return std::tie(info.key, info.fencing_token) > std::tie(after.key, after.fencing_token);
  };
  const std::string_view start = std::max<std::string_view>(prefix, after.key);
  std::vector<LockInfo> found;
  for (auto row = s_.locks.lower_bound(start); row != s_.locks.end() && found.size() < limit;
       ++row) {
    if (!row->first.starts_with(prefix)) break;
    if (live(row->second, now) && comes_after(row->second)) {
      found.push_back(reported(row->second));
    }
  }
  for (auto rows = s_.holders.lower_bound(start);
       rows != s_.holders.end() && rows->first.starts_with(prefix); ++rows) {
    for (const auto* holder : live_holders(rows->first, now)) {
      if (comes_after(*holder)) found.push_back(reported(*holder));
    }
  }
  std::sort(found.begin(), found.end(), [](const LockInfo& a, const LockInfo& b) {
    return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
  });
  if (found.size() > limit) found.resize(limit);
  return found;
}

LockInfo FakeStore::proclaim(const GrantRef& grant, std::string_view value) {
  util::check_leader_value(value);
  LockInfo answer;
  {
    const auto lock = enter();
    const auto now = options_.now();
    auto row = s_.locks.find(grant.key);
    if (row == s_.locks.end() || !live(row->second, now) ||
        row->second.fencing_token != grant.fencing_token ||
        row->second.session_id != grant.session_id || row->second.owner_id != grant.owner_id) {
      throw LockLostError("lock " + grant.key + " is not held by this grant");
    }
    row->second.value = std::string(value);
    answer = reported(row->second);
  }
  s_.hub.notify(grant.key);
  return answer;
}

LockHandle FakeStore::extend(const GrantRef& grant, milliseconds ttl) {
  const auto sent_at = SteadyClock::now();
  check_ttl(ttl, options_.limits, "ttl_ms");
  const auto lock = enter();
  const auto now = options_.now();
  // The token names the grant: the exclusive row, else the session's holder row.
  const auto matches = [&](const LockInfo& row) {
    return live(row, now) && row.fencing_token == grant.fencing_token &&
           row.session_id == grant.session_id && row.owner_id == grant.owner_id;
  };
  auto row = s_.locks.find(grant.key);
  if (row == s_.locks.end() || !matches(row->second)) {
    const auto rows = s_.holders.find(grant.key);
    if (rows == s_.holders.end()) throw LockLostError("lock " + grant.key + " is not held");
    row = rows->second.find(grant.session_id);
    if (row == rows->second.end() || !matches(row->second)) {
      throw LockLostError("lock " + grant.key + " is not held by this grant");
    }
  }
  if (row->second.session_bound) {
    // A checked no-op: the grant lives by its session, whose expiry is the answer (ADR-0018).
    LockHandle checked{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
    const auto session_expiry = reported(row->second).expires_at;
    checked.client_deadline =
        sent_at + std::chrono::duration_cast<milliseconds>(session_expiry - now);
    checked.server_expiry = session_expiry;
    checked.session_bound = true;
    checked.mode = row->second.mode;
    return checked;
  }
  row->second.expires_at = now + ttl;
  LockHandle extended{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
  extended.client_deadline = sent_at + ttl;
  extended.server_expiry = row->second.expires_at;
  extended.mode = row->second.mode;
  return extended;
}

bool FakeStore::delete_if_owner(const GrantRef& grant) {
  const std::string_view key = grant.key;
  const std::string_view owner_id = grant.owner_id;
  const std::string_view session_id = grant.session_id;
  const FencingToken fencing_token = grant.fencing_token;
  bool released = false;
  {
    const auto lock = enter();
    const auto matches = [&](const LockInfo& row) {
      return row.fencing_token == fencing_token && row.owner_id == owner_id &&
             row.session_id == session_id;
    };
    // A release ends a live grant cleanly; one that had already ended keeps its delay.
    const auto remove = [&](const LockInfo& row) {
      const bool was_live = live(row, options_.now());
      if (!was_live) remove_unreleased(row, reported(row).expires_at);
      return was_live;
    };
    if (const auto row = s_.locks.find(key); row != s_.locks.end() && matches(row->second)) {
      released = remove(row->second);
      s_.locks.erase(row);
    } else if (const auto rows = s_.holders.find(key); rows != s_.holders.end()) {
      const auto holder = rows->second.find(std::string(session_id));
      if (holder == rows->second.end() || !matches(holder->second)) return false;
      released = remove(holder->second);
      rows->second.erase(holder);
    } else {
      return false;
    }
  }
  s_.hub.notify(key);
  return released;
}

FencingToken FakeStore::raw_handover(std::string_view key, std::string_view owner_id,
                                     std::string_view session_id, std::chrono::milliseconds ttl) {
  const auto lock = enter();
  auto& row = s_.locks.at(std::string(key));
  row.owner_id = owner_id;
  row.session_id = session_id;
  row.fencing_token = s_.next_token++;
  row.expires_at = options_.now() + ttl;
  return row.fencing_token;
}

std::optional<LockHandle> FakeStore::handover(const GrantRef& from, std::string_view next_owner_id,
                                              std::string_view next_session_id, LockLease lease) {
  const auto sent_at = SteadyClock::now();
  util::check_owner(next_owner_id);
  util::check_session_id(next_session_id);
  check_lease(lease, options_.limits);
  std::optional<LockHandle> next;
  {
    const auto lock = enter();
    const auto now = options_.now();
    const auto* holder = live_grant(from.key, now);
    if (!holder || holder->fencing_token != from.fencing_token ||
        holder->session_id != from.session_id || holder->owner_id != from.owner_id) {
      throw LockLostError("lock " + from.key + " is not held by this grant");
    }
    if (session_live(next_session_id, now)) {
      next = grant(from.key, next_owner_id, next_session_id, lease, sent_at, now);
    } else {
      s_.locks.erase(from.key);
    }
  }
  // The holder changed without a release: announced with the new token (watch_releases).
  s_.hub.notify(from.key, next ? next->fencing_token : 0);
  return next;
}

LockOutcome FakeStore::revoke(std::string_view key) {
  LockOutcome outcome;
  {
    const auto lock = enter();
    const auto now = options_.now();
    // A revoke ends grants without a release: each keeps its lock-delay, from now.
    if (const auto* holder = live_grant(key, now)) {
      outcome = {true, holder->fencing_token, holder->owner_id};
      remove_unreleased(*holder, now);
      s_.locks.erase(s_.locks.find(key));
    } else if (const auto holders = live_holders(key, now); !holders.empty()) {
      outcome = {true, holders.back()->fencing_token, holders.back()->owner_id};
      for (const auto& [session, row] : s_.holders.find(key)->second) {
        remove_unreleased(row, live(row, now) ? now : reported(row).expires_at);
      }
      s_.holders.erase(s_.holders.find(key));
    } else {
      return outcome;
    }
  }
  s_.hub.notify(key);
  return outcome;
}

std::vector<KeyDelay> FakeStore::list_delays(std::string_view prefix, std::string_view after,
                                             std::size_t limit) {
  const auto lock = enter();
  const auto now = options_.now();
  std::map<std::string, WallClock::time_point, std::less<>> ends;
  const auto keep = [&](const std::string& key, WallClock::time_point until) {
    if (!key.starts_with(prefix) || key <= after || until <= now) return;
    auto [entry, added] = ends.try_emplace(key, until);
    if (!added) entry->second = std::max(entry->second, until);
  };
  const auto keep_row = [&](const LockInfo& row) {
    const auto delay = s_.grant_delay.find(row.fencing_token);
    if (delay != s_.grant_delay.end() && !live(row, now)) {
      keep(row.key, reported(row).expires_at + delay->second);
    }
  };
  for (const auto& [key, until] : s_.delayed_until) keep(key, until);
  for (const auto& [key, row] : s_.locks) keep_row(row);
  for (const auto& [key, rows] : s_.holders) {
    for (const auto& [session, row] : rows) keep_row(row);
  }
  std::vector<KeyDelay> delays;
  for (const auto& [key, until] : ends) {
    if (delays.size() == limit) break;
    delays.push_back({key, until});
  }
  return delays;
}

bool FakeStore::clear_delay(std::string_view key) {
  {
    const auto lock = enter();
    const auto now = options_.now();
    if (!delayed(key, now)) return false;
    if (const auto until = s_.delayed_until.find(key); until != s_.delayed_until.end()) {
      s_.delayed_until.erase(until);
    }
    const auto forget = [&](const LockInfo& row) {
      if (!live(row, now)) s_.grant_delay.erase(row.fencing_token);
    };
    if (const auto row = s_.locks.find(key); row != s_.locks.end()) forget(row->second);
    if (const auto rows = s_.holders.find(key); rows != s_.holders.end()) {
      for (const auto& [session, row] : rows->second) forget(row);
    }
  }
  s_.hub.notify(key);
  return true;
}

ReapReport FakeStore::reap_expired() {
  ReapReport report;
  std::vector<std::string> delays_over;
  {
    const auto lock = enter();
    const auto now = options_.now();
    for (auto row = s_.locks.begin(); row != s_.locks.end();) {
      if (live(row->second, now) && session_live(row->second.session_id, now)) {
        ++row;
        continue;
      }
      report.expired_locks.push_back(reported(row->second));
      // A TTL grant of a dead session ends now; an expired one at its expiry.
      remove_unreleased(row->second,
                        live(row->second, now) ? now : reported(row->second).expires_at);
      row = s_.locks.erase(row);
    }
    for (auto& [key, rows] : s_.holders) {
      std::erase_if(rows, [&](const auto& entry) {
        const auto& row = entry.second;
        if (live(row, now) && session_live(row.session_id, now)) return false;
        report.expired_locks.push_back(reported(row));
        remove_unreleased(row, live(row, now) ? now : reported(row).expires_at);
        return true;
      });
    }
    // Delays that are over: announced like a release, so waiters try again.
    for (auto until = s_.delayed_until.begin(); until != s_.delayed_until.end();) {
      if (until->second > now) {
        ++until;
        continue;
      }
      delays_over.push_back(until->first);
      until = s_.delayed_until.erase(until);
    }
    for (auto session = s_.sessions.begin(); session != s_.sessions.end();) {
      if (session->second.expires_at > now) {
        ++session;
        continue;
      }
      report.expired_sessions.push_back(session->first);
      session = s_.sessions.erase(session);
    }
  }
  for (const auto& info : report.expired_locks) s_.hub.notify(info.key);
  for (const auto& key : delays_over) s_.hub.notify(key);
  return report;
}

ReleaseSubscriptionPtr FakeStore::watch_releases(std::string_view key,
                                                 ReleaseCallback on_released) {
  return s_.hub.subscribe(key, std::move(on_released));
}

SessionInfo FakeStore::open_session(std::string_view owner_id, milliseconds ttl,
                                    milliseconds lock_delay) {
  util::check_owner(owner_id);
  check_ttl(ttl, options_.limits, "ttl_ms");
  check_lock_delay(lock_delay, options_.limits);
  const auto lock = enter();
  const auto now = options_.now();
  // Random like every backend's (C2), so the conformance matrix holds for the fake too.
  SessionInfo info{util::random_id(), std::string(owner_id), ttl, now + ttl, lock_delay};
  s_.sessions.emplace(info.session_id,
                      FakeStorage::Session{info.owner_id, ttl, info.expires_at, lock_delay});
  return info;
}

SessionInfo FakeStore::heartbeat(std::string_view session_id) {
  const auto lock = enter();
  const auto now = options_.now();
  if (!session_live(session_id, now)) {
    throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
  }
  auto& session = s_.sessions.find(session_id)->second;
  session.expires_at = now + session.ttl;
  return SessionInfo{std::string(session_id), session.owner_id, session.ttl, session.expires_at,
                     session.lock_delay};
}

std::optional<SessionInfo> FakeStore::get_session(std::string_view session_id) {
  const auto lock = enter();
  if (!session_live(session_id, options_.now())) return std::nullopt;
  const auto& session = s_.sessions.find(session_id)->second;
  return SessionInfo{std::string(session_id), session.owner_id, session.ttl, session.expires_at,
                     session.lock_delay};
}

std::vector<SessionInfo> FakeStore::list_sessions(std::string_view owner_prefix,
                                                  std::string_view after, std::size_t limit) {
  const auto lock = enter();
  const auto now = options_.now();
  std::vector<SessionInfo> listed;
  for (auto it = s_.sessions.upper_bound(after); it != s_.sessions.end() && listed.size() < limit;
       ++it) {
    const auto& [id, session] = *it;
    if (session.expires_at <= now || !session.owner_id.starts_with(owner_prefix)) continue;
    listed.push_back({id, session.owner_id, session.ttl, session.expires_at, session.lock_delay});
  }
  return listed;
}

std::vector<LockInfo> FakeStore::session_grants(std::string_view session_id) {
  const auto lock = enter();
  const auto now = options_.now();
  std::vector<LockInfo> found;
  for (const auto& [key, row] : s_.locks) {
    if (row.session_id == session_id && live(row, now)) found.push_back(reported(row));
  }
  for (const auto& [key, rows] : s_.holders) {
    for (const auto& [session, row] : rows) {
      if (row.session_id == session_id && live(row, now)) found.push_back(reported(row));
    }
  }
  std::sort(found.begin(), found.end(), [](const LockInfo& a, const LockInfo& b) {
    return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
  });
  return found;
}

std::vector<LockInfo> FakeStore::close_session(std::string_view session_id) {
  std::vector<LockInfo> released;
  {
    const auto lock = enter();
    const auto now = options_.now();
    if (!session_live(session_id, now)) {
      throw SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
    }
    for (auto row = s_.locks.begin(); row != s_.locks.end();) {
      if (row->second.session_id != session_id) {
        ++row;
        continue;
      }
      if (live(row->second, now)) {
        released.push_back(reported(row->second));
      } else {
        remove_unreleased(row->second, row->second.expires_at);  // a TTL grant that expired
      }
      row = s_.locks.erase(row);
    }
    for (auto& [key, rows] : s_.holders) {
      if (const auto holder = rows.find(std::string(session_id)); holder != rows.end()) {
        if (live(holder->second, now)) {
          released.push_back(reported(holder->second));
        } else {
          remove_unreleased(holder->second, holder->second.expires_at);
        }
        rows.erase(holder);
      }
    }
    s_.sessions.erase(s_.sessions.find(session_id));
  }
  for (const auto& info : released) s_.hub.notify(info.key);
  return released;
}

FencingToken FakeStore::last_token() const {
  const auto lock = enter();
  return s_.next_token - 1;
}

}  // namespace dlock::testing
