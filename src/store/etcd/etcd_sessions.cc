#include "store/etcd/etcd_sessions.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "store/etcd/etcd_keys.h"
#include "util/ids.h"

namespace dlock::store::etcd {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// Bound on the session IDs each store remembers the record of (see Sessions::lookup): well above
// server.max.sessions' default (100 000, C5), so that every live session of a busy dlockd stays
// cached. At 65 536 with a clear-all eviction, a dlockd with more live sessions than that would
// miss the cache on most heartbeats, each miss a linearizable Range (reasoned from the code: the
// 100k-sessions bench row hit etcd's own limit first, docs/benchmarks.md). Memory: dlockd's whole
// RSS with 100 000 live etcd sessions was 129 MiB, against 23 MiB with 10 (docs/benchmarks.md);
// this cache is a part of that.
constexpr std::size_t kMaxCachedSessions = 262144;

// The grant keys the session index entries `entries` name: a lock key, or a holder key (the
// entry's value names it, docs/adr/0020). `lease_id` != 0 keeps only entries on that lease.
template <typename KeyValues>
std::vector<std::string> grant_keys(const KeyValues& entries, std::int64_t lease_id = 0) {
  std::vector<std::string> keys;
  for (const auto& kv : entries) {
    const auto parts = parse_session_key(kv.key());
    if (!parts || parts->lock_key.empty() || (lease_id != 0 && kv.lease() != lease_id)) continue;
    keys.push_back(parts->holder ? decode_holder_entry(kv).holder_key()
                                 : format_lock_key(parts->lock_key));
  }
  return keys;
}

// Every index entry of a session (lock and holder entries), with values.
etcdserverpb::RangeRequest index_request(std::string_view session_id) {
  return prefix_request(session_record_key(session_id) + "/");
}

}  // namespace

SessionNotFoundError session_not_found(std::string_view session_id) {
  return SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
}

SessionInfo Sessions::open(std::string_view owner_id, milliseconds ttl, milliseconds lock_delay) {
  const auto sent_at = wall_now();
  const auto steady_sent_at = SteadyClock::now();
  const auto lease = client_.lease_grant(lease_seconds(ttl));
  const std::string session_id = util::random_id();
  // The record maps the ID to the lease and is put on it: it ends with the session.
  SessionRecord record;
  record.set_owner_id(std::string(owner_id));
  record.set_ttl_ms(ttl.count());
  record.set_lease_id(lease.id());
  record.set_lock_delay_ms(lock_delay.count());
  // A write Txn of one put rather than a Put: the client's batcher lets the records of opens
  // arriving together share one Txn and one Raft entry (docs/adr/0030). On failure the lease,
  // holding nothing, expires by itself.
  etcdserverpb::TxnRequest write;
  *write.add_success() =
      put_op(session_record_key(session_id), record.SerializeAsString(), lease.id());
  client_.txn(write, CallKind::kWrite);
  remember(session_id, record);
  // What the lease keeps, counted from before it was asked for (etcd may grant another TTL).
  const auto kept = std::min(ttl, milliseconds(seconds(lease.ttl())));
  leases_.note_renewed(lease.id(), steady_sent_at + kept);
  return SessionInfo{session_id, std::string(owner_id), kept, sent_at + kept, lock_delay};
}

SessionInfo Sessions::heartbeat(std::string_view session_id) {
  // The record first, so only a lease named by a dlock session record is ever renewed.
  const auto record = lookup(session_id);
  if (!record) throw session_not_found(session_id);
  const auto sent_at = wall_now();
  const auto steady_sent_at = SteadyClock::now();
  const std::int64_t renewed_seconds =
      client_.lease_keep_alive(record->lease_id(), leases_.known_alive_until(record->lease_id()));
  return renewed(session_id, *record, renewed_seconds, sent_at, steady_sent_at);
}

SessionInfo Sessions::renewed(std::string_view session_id, const SessionRecord& record,
                              std::int64_t renewed_seconds, WallClock::time_point sent_at,
                              SteadyClock::time_point steady_sent_at) {
  if (renewed_seconds <= 0) {
    forget(session_id);
    throw session_not_found(session_id);
  }
  const auto kept = std::min(milliseconds(record.ttl_ms()), milliseconds(seconds(renewed_seconds)));
  leases_.note_renewed(record.lease_id(), steady_sent_at + kept);
  return SessionInfo{std::string(session_id), record.owner_id(), kept, sent_at + kept,
                     milliseconds(record.lock_delay_ms())};
}

bool Sessions::try_heartbeat_async(std::string_view session_id,
                                   SessionRegistry::HeartbeatDone& done) {
  if (!is_session_id(session_id)) return false;  // heartbeat says what is wrong with it
  std::optional<SessionRecord> record;
  {
    std::lock_guard lock(cache_mutex_);
    if (const auto found = cache_.find(std::string(session_id)); found != cache_.end()) {
      record = found->second;
    }
  }
  if (!record) return false;
  const auto steady_sent_at = SteadyClock::now();
  const auto known = leases_.known_alive_until(record->lease_id());
  if (!known || *known <= steady_sent_at + EtcdClient::kSharedStreamMargin) return false;
  // What heartbeat does after its keep-alive, done when the answer comes. `done` stays in this
  // state until the stream takes the keep-alive, so that a refusal leaves it with the caller.
  struct State {
    SessionRegistry::HeartbeatDone done;
    std::string session_id;
    SessionRecord record;
    WallClock::time_point sent_at;
    SteadyClock::time_point steady_sent_at;
  };
  auto state = std::make_shared<State>(
      State{std::move(done), std::string(session_id), *record, wall_now(), steady_sent_at});
  KeepAliveStream::Done answered = [this, state](std::int64_t renewed_seconds,
                                                 const grpc::Status* failed) {
    std::optional<SessionInfo> info;
    try {
      if (failed) throw_for_status(*failed, "lease keep-alive", CallKind::kRead);
      info = renewed(state->session_id, state->record, renewed_seconds, state->sent_at,
                     state->steady_sent_at);
    } catch (...) {
      state->done(std::nullopt, std::current_exception());
      return;
    }
    state->done(std::move(info), std::nullptr_t{});
  };
  if (client_.keep_alive_stream(record->lease_id())
          .start_async(record->lease_id(), steady_sent_at + client_.call_timeout(), answered)) {
    return true;
  }
  done = std::move(state->done);
  return false;
}

std::optional<SessionInfo> Sessions::get(std::string_view session_id) {
  const auto record = lookup(session_id);
  if (!record) return std::nullopt;  // the record dies with the lease
  const auto sent_at = wall_now();
  const auto remaining = client_.lease_time_to_live(record->lease_id(), false);
  if (remaining.ttl() < 0) {
    forget(session_id);
    return std::nullopt;
  }
  return SessionInfo{std::string(session_id), record->owner_id(), milliseconds(record->ttl_ms()),
                     sent_at + seconds(remaining.ttl()), milliseconds(record->lock_delay_ms())};
}

std::vector<LockInfo> Sessions::close(std::string_view session_id) {
  const auto record = lookup(session_id);
  if (!record) throw session_not_found(session_id);
  // Session-bound grants are on the session's lease and go with it: list them first.
  std::vector<LockInfo> released = session_bound_grants(session_id, *record);
  // Revoke the session first: from then on no acquire for it can pass its Txn's session check,
  // so the grants listed below are all the session will ever have.
  forget(session_id);
  try {
    client_.lease_revoke(record->lease_id());
  } catch (const SessionNotFoundError&) {
    throw session_not_found(session_id);  // ended since it was cached
  }
  const auto entries = client_.range(index_request(session_id));
  for (const auto& kv : read_keys(client_, grant_keys(entries.kvs()))) {
    const GrantRecord grant = decode_grant(kv);
    if (grant.session_id() != session_id || grant.session_bound()) continue;
    // The grant's lease is its own: revoking it removes exactly this grant and its index entry.
    try {
      client_.lease_revoke(kv.lease());
      released.push_back(lock_info(kv));
    } catch (const SessionNotFoundError&) {
      // The grant expired on its own meanwhile: not released by this call.
    }
  }
  return released;
}

std::vector<SessionInfo> Sessions::list(std::string_view owner_prefix, std::string_view after,
                                        std::size_t limit) {
  std::vector<SessionInfo> listed;
  // Past `after`'s record and its index entries ("<after>/..."): "<after>\x01" sorts before any
  // longer ID ('-' is the smallest ID character) and after "<after>" itself.
  etcdserverpb::RangeRequest request = prefix_request(std::string(kSessionPrefix));
  if (!after.empty()) request.set_key(session_record_key(after) + '\x01');
  request.set_limit(1000);
  while (listed.size() < limit) {
    const auto response = client_.range(request);
    for (const auto& kv : response.kvs()) {
      const auto parts = parse_session_key(kv.key());
      if (!parts || !parts->lock_key.empty()) continue;  // an index entry
      auto session = get(parts->session_id);
      if (!session || !session->owner_id.starts_with(owner_prefix)) continue;
      listed.push_back(std::move(*session));
      if (listed.size() == limit) break;
    }
    if (!response.more() || response.kvs_size() == 0) break;
    request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
  }
  return listed;
}

std::vector<LockInfo> Sessions::grants(std::string_view session_id) {
  std::vector<LockInfo> found;
  const auto record = lookup(session_id);
  if (!record) return found;
  const auto entries = client_.range(index_request(session_id));
  for (const auto& kv : read_keys(client_, grant_keys(entries.kvs()))) {
    if (decode_grant(kv).session_id() != session_id) continue;  // handed over since
    if (kv.lease() == record->lease_id()) continue;             // session-bound: below
    found.push_back(lock_info(kv));
  }
  for (auto& info : session_bound_grants(session_id, *record)) found.push_back(std::move(info));
  std::sort(found.begin(), found.end(), [](const LockInfo& a, const LockInfo& b) {
    return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
  });
  return found;
}

std::string PrefixCursor::slice_start(std::uint64_t index, std::uint64_t count) const {
  if (index == 0) return prefix_;
  // Slice `index` of `count` (count <= kMaxSlices = 16^3) starts at the 3-digit hex spelling of
  // index * 4096 / count: distinct and ascending for every index.
  const std::uint64_t at = index * kMaxSlices / count;
  std::string start = prefix_;
  for (int shift = 8; shift >= 0; shift -= 4) start += "0123456789abcdef"[(at >> shift) & 0xf];
  return start;
}

etcdserverpb::RangeResponse PrefixCursor::next(EtcdClient& client) {
  std::lock_guard lock(mutex_);
  etcdserverpb::RangeRequest request = prefix_request(prefix_);
  request.set_key(resume_at_.empty() ? slice_start(slice_, slices_) : resume_at_);
  if (slice_ + 1 < slices_) request.set_range_end(slice_start(slice_ + 1, slices_));
  request.set_keys_only(true);
  request.set_limit(page_keys_);
  auto response = client.range(request);
  keys_seen_ += static_cast<std::uint64_t>(response.kvs_size());
  if (response.more() && response.kvs_size() > 0) {
    resume_at_ = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
    return response;
  }
  resume_at_.clear();
  if (++slice_ < slices_) return response;
  // The walk is over: the next one starts over, cut so that a slice holds about a page.
  ++walks_;
  slice_ = 0;
  // Slices of 7/8 of a page on average: random IDs spread unevenly, and a slice over a page
  // costs a second pass.
  const auto page = static_cast<std::uint64_t>(std::max<std::int64_t>(page_keys_, 1));
  slices_ = std::clamp<std::uint64_t>((keys_seen_ * 8 + page * 7 - 1) / (page * 7), 1, kMaxSlices);
  keys_seen_ = 0;
  return response;
}

std::uint64_t PrefixCursor::walks() const {
  std::lock_guard lock(mutex_);
  return walks_;
}

ReapReport Sessions::reap_expired() {
  // Lock expiry needs no reaper (each grant's lease ends it). What etcd cannot do by itself is
  // end a grant whose *session* lease ended first: find sessions that left grant index entries
  // but no record, and release those grants. Keys only, one page per pass (docs/adr/0022).
  std::set<std::string> live_sessions;
  std::map<std::string, std::vector<std::string>> grants_of;  // index entry keys
  const auto page = reap_cursor_.next(client_);
  for (const auto& kv : page.kvs()) {
    const auto parts = parse_session_key(kv.key());
    if (!parts) continue;
    if (parts->lock_key.empty()) {
      live_sessions.insert(parts->session_id);
    } else {
      grants_of[parts->session_id].push_back(kv.key());
    }
  }
  ReapReport report;
  for (const auto& [session_id, keys] : grants_of) {
    if (live_sessions.contains(session_id)) continue;
    // Its record sorts before its entries, so it may be on an earlier page: ask etcd (not the
    // cache, which may still hold an ended session). Asked after the page was read, an absent
    // record means the session had ended when its entries were seen: a record is put before any
    // entry of its session (an acquire's Txn checks it) and never again (IDs are never reused).
    etcdserverpb::RangeRequest record = range_request(session_record_key(session_id));
    record.set_keys_only(true);
    if (client_.range(record).kvs_size() > 0) continue;
    report.expired_sessions.push_back(session_id);
    for (const auto& kv : read_keys(client_, grant_keys(read_keys(client_, keys)))) {
      const GrantRecord grant = decode_grant(kv);
      if (grant.session_id() != session_id) continue;  // handed over since
      etcdserverpb::TxnRequest remove;
      *remove.add_compare() = compare_mod_revision(kv.key(), kv.mod_revision());
      *remove.add_success() = delete_op(kv.key());
      if (!client_.txn(remove, CallKind::kWrite).succeeded()) continue;
      report.expired_locks.push_back(lock_info(kv));
      // A session-bound grant's lease is the dead session's own (its keys went with it).
      if (!grant.session_bound()) leases_.revoke_lease(kv.lease());  // and its index entry
    }
  }
  return report;
}

std::optional<SteadyClock::time_point> Sessions::alive_until(const SessionRecord& record) {
  if (const auto known = leases_.known_alive_until(record.lease_id());
      known && *known > SteadyClock::now()) {
    return known;
  }
  const auto sent_at = SteadyClock::now();
  const auto remaining = client_.lease_time_to_live(record.lease_id(), false);
  if (remaining.ttl() <= 0) return std::nullopt;
  const auto until =
      sent_at + std::min(milliseconds(record.ttl_ms()), milliseconds(seconds(remaining.ttl())));
  leases_.note_renewed(record.lease_id(), until);
  return until;
}

Sessions::LiveSession Sessions::live(std::string_view session_id) {
  const auto record = lookup(session_id);
  if (!record) throw session_not_found(session_id);
  const auto until = alive_until(*record);
  if (!until) {
    forget(session_id);
    throw session_not_found(session_id);
  }
  return LiveSession{*record, *until};
}

std::vector<LockInfo> Sessions::session_bound_grants(std::string_view session_id,
                                                     const SessionRecord& record) {
  // Index entries on the session's lease belong to session-bound grants (a TTL grant's entry is
  // on the grant's own lease).
  const auto entries = client_.range(index_request(session_id));
  const std::vector<std::string> etcd_keys = grant_keys(entries.kvs(), record.lease_id());
  std::vector<LockInfo> grants;
  if (etcd_keys.empty()) return grants;
  const auto until = alive_until(record);
  for (const auto& kv : read_keys(client_, etcd_keys)) {
    if (kv.lease() != record.lease_id()) continue;  // taken by another session since
    LockInfo info = lock_info(kv);
    if (until)
      info.expires_at =
          wall_now() + std::chrono::duration_cast<WallClock::duration>(*until - SteadyClock::now());
    grants.push_back(std::move(info));
  }
  return grants;
}

std::optional<SessionRecord> Sessions::lookup(std::string_view session_id) {
  if (!is_session_id(session_id)) return std::nullopt;
  const std::string id(session_id);
  {
    std::lock_guard lock(cache_mutex_);
    if (const auto found = cache_.find(id); found != cache_.end()) return found->second;
  }
  // Opened through another dlockd, or forgotten: the record in etcd says.
  const auto response = client_.range(range_request(session_record_key(session_id)));
  if (response.kvs_size() == 0) return std::nullopt;
  const SessionRecord record = decode_session(response.kvs(0));
  remember(id, record);
  return record;
}

void Sessions::remember(const std::string& session_id, const SessionRecord& record) {
  std::lock_guard lock(cache_mutex_);
  // Full: drop one entry (any; a miss costs one Range), not all of them, so that a store with
  // more sessions than the bound does not miss on nearly every lookup.
  if (cache_.size() >= kMaxCachedSessions && !cache_.contains(session_id)) {
    cache_.erase(cache_.begin());
  }
  cache_.insert_or_assign(session_id, record);
}

std::optional<milliseconds> Sessions::cached_lock_delay(std::string_view session_id) {
  std::lock_guard lock(cache_mutex_);
  const auto found = cache_.find(std::string(session_id));
  if (found == cache_.end()) return std::nullopt;
  return milliseconds(found->second.lock_delay_ms());
}

void Sessions::forget(std::string_view session_id) {
  std::lock_guard lock(cache_mutex_);
  cache_.erase(std::string(session_id));
}

}  // namespace dlock::store::etcd
