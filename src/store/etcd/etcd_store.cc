#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/validate.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_records.h"
#include "store/etcd/etcd_watch.h"

namespace dlock::store::etcd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// etcd refuses transactions with more operations than its --max-txn-ops (128 by default).
constexpr std::size_t kMaxOpsPerTxn = 64;
// Bound on the remembered "held at revision" entries (see remember_held).
constexpr std::size_t kMaxRememberedKeys = 4096;
// Bound on the empty grant leases kept for reuse (see LeasePool).
constexpr std::size_t kMaxPooledLeases = 1024;

// etcd leases count whole seconds; rounding up keeps the lease at least as long as the TTL the
// client is told to believe.
std::int64_t lease_seconds(milliseconds ttl) { return (ttl.count() + 999) / 1000; }

// The store's wall clock at the precision the records keep (microseconds), so a handle and the
// record it was written to report the same instants.
WallClock::time_point wall_now() {
  return std::chrono::floor<std::chrono::microseconds>(WallClock::now());
}

std::int64_t to_revision(FencingToken token) { return static_cast<std::int64_t>(token); }

LockLostError lost(std::string_view key, FencingToken token) {
  return LockLostError("lock " + std::string(key) + " token " + std::to_string(token) +
                       " is no longer held");
}

SessionNotFoundError session_not_found(std::string_view session_id) {
  return SessionNotFoundError("session " + std::string(session_id) + " not found or expired");
}

// The lock TTL a grant record was written with (its expiry minus its grant time), in the lease
// seconds of that grant.
std::int64_t lease_seconds_of(const GrantRecord& record) {
  const std::int64_t ttl_us = record.server_expiry_us() - record.acquired_at_us();
  return ttl_us <= 0 ? 0 : lease_seconds(milliseconds((ttl_us + 999) / 1000));
}

// Bound on the leases whose minimum remaining life the store remembers (see LeaseBook).
constexpr std::size_t kMaxBookedLeases = 65536;
// A pooled lease is renewed in parallel with the granting Txn only when it is known to live at
// least this long past the Txn's own deadline.
constexpr milliseconds kParallelRenewalMargin{1000};

// For the leases this store granted or renewed: the instant each is certain to live until (the
// send time of its LeaseGrant or last keep-alive plus the TTL etcd answered). A lease it does
// not know (granted through another dlockd, or forgotten) is simply renewed before use.
class LeaseBook {
 public:
  void note(std::int64_t lease_id, SteadyClock::time_point alive_until) {
    std::lock_guard lock(mutex_);
    if (until_.size() >= kMaxBookedLeases && !until_.contains(lease_id)) {
      const auto now = SteadyClock::now();
      std::erase_if(until_, [&](const auto& entry) { return entry.second < now; });
      if (until_.size() >= kMaxBookedLeases) until_.clear();
    }
    auto& until = until_[lease_id];
    until = std::max(until, alive_until);
  }

  std::optional<SteadyClock::time_point> peek(std::int64_t lease_id) {
    std::lock_guard lock(mutex_);
    const auto found = until_.find(lease_id);
    if (found == until_.end()) return std::nullopt;
    return found->second;
  }

  std::optional<SteadyClock::time_point> take(std::int64_t lease_id) {
    std::lock_guard lock(mutex_);
    const auto found = until_.find(lease_id);
    if (found == until_.end()) return std::nullopt;
    const auto until = found->second;
    until_.erase(found);
    return until;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::int64_t, SteadyClock::time_point> until_;
};

// Grant leases that hold nothing any more (their grant was released, superseded or never made),
// kept by TTL for the next grant instead of being revoked. Reusing one costs a keep-alive, which
// etcd's leader answers without a Raft proposal, where a LeaseGrant and a LeaseRevoke are one
// each: an acquire+release pair costs two Raft writes (the two Txns), as the raw path does.
// A grant on a pooled lease is only ever reported for as long as the lease is known to live
// (GrantLease); one that sat in the pool for half its TTL is dropped unasked (it expires by
// itself, holding nothing).
class LeasePool {
 public:
  struct Entry {
    std::int64_t lease_id = 0;
    SteadyClock::time_point pooled_at;
    std::optional<SteadyClock::time_point> alive_until;  // from the LeaseBook, when known
  };

  // False when the pool is full: the caller revokes the lease instead.
  bool give(std::int64_t ttl_seconds, std::int64_t lease_id,
            std::optional<SteadyClock::time_point> alive_until) {
    std::lock_guard lock(mutex_);
    if (size_ >= kMaxPooledLeases) return false;
    free_[ttl_seconds].push_back(Entry{lease_id, SteadyClock::now(), alive_until});
    ++size_;
    return true;
  }

  std::optional<Entry> take(std::int64_t ttl_seconds) {
    std::lock_guard lock(mutex_);
    const auto found = free_.find(ttl_seconds);
    if (found == free_.end()) return std::nullopt;
    auto& entries = found->second;
    const auto fresh_after = SteadyClock::now() - milliseconds(ttl_seconds * 1000 / 2);
    while (!entries.empty()) {
      const Entry entry = entries.back();
      entries.pop_back();
      --size_;
      if (entry.pooled_at >= fresh_after) return entry;
    }
    return std::nullopt;
  }

 private:
  std::mutex mutex_;
  std::map<std::int64_t, std::vector<Entry>> free_;
  std::size_t size_ = 0;
};

// The lease a new grant goes on. Its TTL (`seconds`) counts from `counting_from` at the latest,
// so the key lives at least until counting_from + seconds once `renewal` (a keep-alive sent in
// parallel with the granting Txn) is confirmed; until then the lease is only known to live
// until `alive_until`, which is always at or after the Txn's deadline.
struct GrantLease {
  std::int64_t id = 0;
  std::int64_t seconds = 0;
  SteadyClock::time_point counting_from;
  WallClock::time_point wall_from;  // the store's wall clock at counting_from
  SteadyClock::time_point alive_until;
  std::optional<KeepAliveStream::Pending> renewal;
};

// Every grant has a lease of its own (TTL = the lock's TTL), so a lock expires by itself like
// in the relational stores; its session is checked in the granting Txn and its death is handled
// by close_session and reap_expired. See docs/adr/0006-etcd-store.md for why the lock cannot
// simply ride on the session's lease.
class EtcdStore final : public Backend {
 public:
  explicit EtcdStore(const EtcdStoreOptions& options)
      : limits_(options.limits),
        after_grant_for_test_(options.after_grant_for_test),
        client_(make_channel(options.endpoints), options.call_timeout),
        watches_(std::make_unique<WatchHub>(client_.shared_channel())) {}

  std::optional<LockHandle> try_insert(std::string_view key, std::string_view owner_id,
                                       std::string_view session_id, milliseconds ttl) override {
    core::check_key(key);
    core::check_owner(owner_id);
    core::check_session_id(session_id);
    check_ttl(ttl, limits_, "ttl_ms");
    const std::string etcd_key = format_lock_key(key);
    if (!parse_session_id(session_id)) throw session_not_found(session_id);
    return acquire(key, etcd_key, owner_id, session_id, ttl);
  }

  std::optional<LockInfo> read(std::string_view key) override {
    core::check_key(key);
    const auto response = client_.range(range_request(format_lock_key(key)));
    if (response.kvs_size() == 0) return std::nullopt;  // never granted, released or expired
    return live_lock_info(response.kvs(0));
  }

  std::vector<LockInfo> list(std::string_view prefix, std::size_t limit) override {
    std::vector<LockInfo> locks;
    etcdserverpb::RangeRequest request = prefix_request(scan_prefix_for(prefix));
    // Session keys may share the scanned range; pages continue past them, all at the revision
    // of the first page, so the listing is one snapshot.
    while (locks.size() < limit) {
      request.set_limit(static_cast<std::int64_t>(std::max<std::size_t>(limit - locks.size(), 64)));
      const auto response = client_.range(request);
      for (const auto& kv : response.kvs()) {
        const auto key = parse_lock_key(kv.key());
        if (!key || !key->starts_with(prefix)) continue;
        locks.push_back(live_lock_info(kv));
        if (locks.size() == limit) break;
      }
      if (!response.more() || response.kvs_size() == 0) break;
      request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
      request.set_revision(response.header().revision());
    }
    return locks;
  }

  LockHandle extend(const LockHandle& handle, milliseconds ttl) override {
    check_ttl(ttl, limits_, "ttl_ms");
    const std::string etcd_key = format_lock_key(handle.key);
    const auto session_lease = parse_session_id(handle.session_id);
    if (!session_lease) throw lost(handle.key, handle.fencing_token);
    const auto sent_at = SteadyClock::now();
    const auto wall_sent_at = wall_now();
    const auto grant_lease =
        live_grant_lease(etcd_key, handle.owner_id, handle.session_id, handle.fencing_token);
    if (!grant_lease) throw lost(handle.key, handle.fencing_token);
    // A lease renews for the TTL it was granted with; a Put to attach a longer one would move
    // the key's revision, i.e. change the token. So the TTL can be renewed, never lengthened:
    // the handle says the shorter lifetime (docs/adr/0011-honest-lock-lifetimes.md).
    const std::int64_t renewed_seconds = client_.lease_keep_alive(*grant_lease);
    if (renewed_seconds <= 0) throw lost(handle.key, handle.fencing_token);
    book_.note(*grant_lease, sent_at + seconds(renewed_seconds));
    // Verify after renewing: the grant (same revision, same lease) and its session still live.
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, to_revision(handle.fencing_token));
    *request.add_compare() = compare_lease(etcd_key, *grant_lease);
    *request.add_compare() = compare_exists(session_record_key(*session_lease));
    if (!client_.txn(request, CallKind::kRead).succeeded()) {
      throw lost(handle.key, handle.fencing_token);
    }
    const milliseconds believed = std::min(ttl, milliseconds(seconds(renewed_seconds)));
    LockHandle extended = handle;
    // Both counted from before the keep-alive was sent: the renewed lease lives at least that
    // long.
    extended.client_deadline = sent_at + believed;
    extended.server_expiry = wall_sent_at + believed;
    return extended;
  }

  bool delete_if_owner(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken fencing_token) override {
    core::check_key(key);
    core::check_owner(owner_id);
    core::check_session_id(session_id);
    const std::string etcd_key = format_lock_key(key);
    const std::string index_key = session_lock_key(session_id, key);
    // One Txn. The lock key's revision is the token, so it names exactly that grant; the
    // session's index entry was written by the same Txn (same revision) and holds the owner, so
    // session and owner are checked by Compare without reading the value first.
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, to_revision(fencing_token));
    *request.add_compare() = compare_mod_revision(index_key, to_revision(fencing_token));
    *request.add_compare() = compare_value(index_key, std::string(owner_id));
    *request.add_success() = delete_op_with_prev(etcd_key);
    *request.add_success() = delete_op(index_key);
    const auto response = client_.txn(request, CallKind::kWrite);
    if (!response.succeeded()) return false;
    for (const auto& kv : response.responses(0).response_delete_range().prev_kvs()) {
      recycle_lease(kv);  // it held this lock key and this index entry, both gone
    }
    return true;
  }

  std::optional<LockHandle> handover(const LockHandle& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, milliseconds ttl) override {
    core::check_owner(next_owner_id);
    core::check_session_id(next_session_id);
    check_ttl(ttl, limits_, "ttl_ms");
    const std::string etcd_key = format_lock_key(from.key);
    const auto next_session = parse_session_id(next_session_id);
    if (!next_session) return release_instead_of_handover(from);
    GrantLease grant = lease_for(ttl);
    const auto now = grant.wall_from;
    const std::string next_record = session_record_key(*next_session);
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, to_revision(from.fencing_token));
    *request.add_compare() = compare_exists(next_record);
    *request.add_success() = get_op(etcd_key);  // the outgoing grant, for its lease
    *request.add_success() =
        put_op(etcd_key, encode_grant(next_owner_id, next_session_id, now, now + ttl), grant.id);
    *request.add_success() =
        put_op(session_lock_key(next_session_id, from.key), std::string(next_owner_id), grant.id);
    if (from.session_id != next_session_id) {
      *request.add_success() = delete_op(session_lock_key(from.session_id, from.key));
    }
    *request.add_failure() = get_op(etcd_key);
    const auto response = txn_on(grant, request);
    if (response.succeeded()) {
      const FencingToken token = static_cast<FencingToken>(response.header().revision());
      // The outgoing grant's lease held its lock key (now on the new lease) and its index entry
      // (deleted, or rewritten on the new lease for the same session): nothing any more.
      for (const auto& kv : response.responses(0).response_range().kvs()) recycle_lease(kv);
      const auto believed = believed_ttl(grant, ttl);
      if (!believed) {
        throw UnknownOutcomeError("lock " + from.key +
                                  " was released, but the lease of its hand-over "
                                  "grant ended at once: nobody holds it");
      }
      return LockHandle{from.key, std::string(next_owner_id),      std::string(next_session_id),
                        token,    grant.counting_from + *believed, now + *believed};
    }
    recycle_unused(grant);
    const auto& current = response.responses(0).response_range();
    if (current.kvs_size() == 0 ||
        current.kvs(0).mod_revision() != to_revision(from.fencing_token)) {
      throw lost(from.key, from.fencing_token);
    }
    return release_instead_of_handover(from);  // the next session is gone
  }

  LockOutcome revoke(std::string_view key) override {
    core::check_key(key);
    etcdserverpb::DeleteRangeRequest request;
    request.set_key(format_lock_key(key));
    request.set_prev_kv(true);
    const auto response = client_.delete_range(request);
    LockOutcome outcome;
    if (response.deleted() > 0 && response.prev_kvs_size() > 0) {
      const auto& kv = response.prev_kvs(0);
      outcome.revoked = true;
      outcome.fencing_token = static_cast<FencingToken>(kv.mod_revision());
      outcome.owner_id = decode_grant(kv).owner_id();
      revoke_lease(kv.lease());  // takes the grant's session index entry with it
    }
    return outcome;
  }

  ReapReport reap_expired() override;

  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        std::function<void()> on_released) override {
    const std::string etcd_key = format_lock_key(key);
    std::optional<HeldAt> held;
    {
      std::lock_guard lock(held_mutex_);
      const auto found = held_at_.find(etcd_key);
      if (found != held_at_.end()) held = found->second;
    }
    // Without a failed acquire to start from: watch from now, woken once when it exists.
    if (!held) return watches_->subscribe(etcd_key, 0, std::move(on_released));
    // Watch from now (etcd delivers a watch that starts in the past from a 100 ms catch-up
    // loop), then check whether the grant seen holding the key ended between the failed
    // acquire and the watch's start: then wake the waiter now.
    auto created = std::make_shared<CreatedAt>();
    auto subscription = watches_->subscribe(
        etcd_key, 0, on_released, [created](std::int64_t revision) { created->set(revision); });
    const auto revision = created->wait_until(SteadyClock::now() + client_.call_timeout());
    if (!revision || released_since(etcd_key, *held, *revision)) on_released();
    return subscription;
  }

  std::string_view backend_id() const override { return "etcd"; }

  SessionInfo open_session(std::string_view owner_id, milliseconds ttl) override {
    core::check_owner(owner_id);
    check_ttl(ttl, limits_, "ttl_ms");
    const auto sent_at = wall_now();
    const auto lease = client_.lease_grant(lease_seconds(ttl));
    etcdserverpb::PutRequest put;
    put.set_key(session_record_key(lease.id()));
    put.set_value(encode_session(owner_id, ttl));
    put.set_lease(lease.id());
    client_.put(put);  // on failure the lease, holding nothing, expires by itself
    // What the lease keeps, counted from before it was asked for (etcd may grant another TTL).
    const auto kept = std::min(ttl, milliseconds(seconds(lease.ttl())));
    return SessionInfo{format_session_id(lease.id()), std::string(owner_id), kept, sent_at + kept};
  }

  SessionInfo heartbeat(std::string_view session_id) override {
    core::check_session_id(session_id);
    const auto lease = parse_session_id(session_id);
    if (!lease) throw session_not_found(session_id);
    // The record first, so a lease that is not a dlock session is never renewed.
    const auto record = session_record(*lease);
    if (!record) throw session_not_found(session_id);
    const auto sent_at = wall_now();
    const std::int64_t renewed_seconds = client_.lease_keep_alive(*lease);
    if (renewed_seconds <= 0) throw session_not_found(session_id);
    const auto kept =
        std::min(milliseconds(record->ttl_ms()), milliseconds(seconds(renewed_seconds)));
    return SessionInfo{std::string(session_id), record->owner_id(), kept, sent_at + kept};
  }

  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    core::check_session_id(session_id);
    const auto lease = parse_session_id(session_id);
    if (!lease) return std::nullopt;
    const auto record = session_record(*lease);
    if (!record) return std::nullopt;  // the record dies with the lease
    const auto sent_at = wall_now();
    const auto remaining = client_.lease_time_to_live(*lease, false);
    if (remaining.ttl() < 0) return std::nullopt;
    return SessionInfo{std::string(session_id), record->owner_id(), milliseconds(record->ttl_ms()),
                       sent_at + seconds(remaining.ttl())};
  }

  std::vector<LockInfo> close_session(std::string_view session_id) override;

 private:
  std::optional<LockHandle> acquire(std::string_view key, const std::string& etcd_key,
                                    std::string_view owner_id, std::string_view session_id,
                                    milliseconds ttl);
  std::optional<LockHandle> reacquire(std::string_view key, const std::string& etcd_key,
                                      std::string_view owner_id, std::string_view session_id,
                                      const mvccpb::KeyValue& holder, GrantLease& grant,
                                      const std::string& value, milliseconds ttl,
                                      WallClock::time_point now);
  // The handle of the grant `response` (a succeeded granting Txn on `grant`'s lease) made.
  LockHandle granted(std::string_view key, std::string_view owner_id, std::string_view session_id,
                     const etcdserverpb::TxnResponse& response, GrantLease& grant, milliseconds ttl,
                     WallClock::time_point now);
  // The granting Txn on `grant`'s lease; a failed call abandons a parallel renewal (the lease
  // is then simply left to expire).
  etcdserverpb::TxnResponse txn_on(GrantLease& grant, const etcdserverpb::TxnRequest& request);
  std::optional<std::int64_t> live_grant_lease(const std::string& etcd_key,
                                               std::string_view owner_id,
                                               std::string_view session_id, FencingToken token);
  // When the next session of a hand-over is gone, the outgoing grant is simply released.
  std::optional<LockHandle> release_instead_of_handover(const LockHandle& from);
  std::optional<SessionRecord> session_record(std::int64_t lease);
  // The grant as read and list report it, its expiry the later of the one written at the grant
  // and what its lease is known to live (an extend renews the lease without rewriting the key).
  LockInfo live_lock_info(const mvccpb::KeyValue& kv);
  std::vector<mvccpb::KeyValue> read_keys(const std::vector<std::string>& etcd_keys);
  // A grant seen holding a key: the revision of the failed acquire that saw it, and the grant's
  // create revision (a hand-over or re-entrant acquire keeps it; a new grant has a new one).
  struct HeldAt {
    std::int64_t revision = 0;
    std::int64_t create_revision = 0;
  };
  // The revision a watch was created at, handed from the watch's thread to the subscriber.
  struct CreatedAt {
    std::mutex mutex;
    std::condition_variable created;
    std::optional<std::int64_t> revision;
    void set(std::int64_t at) {
      std::lock_guard lock(mutex);
      revision = at;
      created.notify_all();
    }
    std::optional<std::int64_t> wait_until(SteadyClock::time_point deadline) {
      std::unique_lock lock(mutex);
      created.wait_until(lock, deadline, [&] { return revision.has_value(); });
      return revision;
    }
  };
  void remember_held(const std::string& etcd_key, const HeldAt& held);
  // Whether the grant seen in `held` ended by `revision` (the key was gone, or held by another
  // grant, at that revision). An error counts as yes: a needless wake-up costs the waiter one
  // attempt, a missed one could leave it asleep.
  bool released_since(const std::string& etcd_key, const HeldAt& held, std::int64_t revision);
  // A lease for a grant of `ttl`: a pooled one (renewed before, or in parallel with, the Txn),
  // else a new one.
  GrantLease lease_for(milliseconds ttl);
  // After the Txn: waits for a parallel renewal. Returns how long past counting_from the lease is
  // certain to live, std::nullopt when the renewal found it gone (and with it any key put on it).
  std::optional<milliseconds> settle(GrantLease& grant);
  // A grant was made on `grant`: remember its lease's life and say how long the grant is
  // certain to be held from counting_from (at most `ttl`); std::nullopt when the lease is gone,
  // and the grant with it.
  std::optional<milliseconds> believed_ttl(GrantLease& grant, milliseconds ttl);
  // The Txn made no grant on `grant`: its lease goes back to the pool.
  void recycle_unused(GrantLease& grant);
  // Leases that hold nothing any more go back to the pool (or are revoked when it is full).
  // `released` is the lock key as its grant ended; its lease must hold nothing else.
  void recycle_lease(const mvccpb::KeyValue& released);
  void recycle_lease(std::int64_t lease_id, std::int64_t ttl_seconds,
                     std::optional<SteadyClock::time_point> alive_until);
  // Best effort: a lease that is not revoked expires by itself after its TTL anyway.
  void revoke_lease(std::int64_t lease_id);

  const TtlLimits limits_;
  const std::function<void(std::string_view)> after_grant_for_test_;
  EtcdClient client_;
  std::mutex held_mutex_;
  std::map<std::string, HeldAt, std::less<>> held_at_;
  LeasePool leases_;
  LeaseBook book_;
  // Declared last: destroyed first, so no watch callback outlives the rest of the store.
  std::unique_ptr<WatchHub> watches_;
};

std::optional<LockHandle> EtcdStore::acquire(std::string_view key, const std::string& etcd_key,
                                             std::string_view owner_id, std::string_view session_id,
                                             milliseconds ttl) {
  // The grant's lease starts counting before the grant exists, so it ends no earlier than
  // counting_from + ttl: the client deadline below can never outlive the key.
  GrantLease grant = lease_for(ttl);
  // Counted, like the lease, from before the lease was asked for.
  const auto now = grant.wall_from;
  const std::string value = encode_grant(owner_id, session_id, now, now + ttl);
  const std::string record_key = session_record_key(*parse_session_id(session_id));
  // The whole acquire: If(CreateRevision(key) == 0, session alive) Then(Put) Else(Get).
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_create_revision(etcd_key, 0);
  *request.add_compare() = compare_exists(record_key);
  *request.add_success() = put_op(etcd_key, value, grant.id);
  // The index entry holds the owner, so a release can check it with a Compare.
  *request.add_success() =
      put_op(session_lock_key(session_id, key), std::string(owner_id), grant.id);
  *request.add_failure() = get_op(etcd_key);
  *request.add_failure() = get_op(record_key);
  const auto response = txn_on(grant, request);
  if (response.succeeded()) {
    if (after_grant_for_test_) after_grant_for_test_(key);
    return granted(key, owner_id, session_id, response, grant, ttl, now);
  }
  const auto& holder = response.responses(0).response_range();
  if (response.responses(1).response_range().kvs_size() == 0) {
    recycle_unused(grant);
    throw session_not_found(session_id);
  }
  if (holder.kvs_size() == 0) {
    throw InternalError("etcd: a failed acquire Txn did not return the holder of " + etcd_key);
  }
  const GrantRecord record = decode_grant(holder.kvs(0));
  if (record.owner_id() == owner_id && record.session_id() == session_id) {
    return reacquire(key, etcd_key, owner_id, session_id, holder.kvs(0), grant, value, ttl, now);
  }
  recycle_unused(grant);
  remember_held(etcd_key, HeldAt{response.header().revision(), holder.kvs(0).create_revision()});
  return std::nullopt;  // held by a live grant of another session: a decision
}

// Re-entrant acquire: rewrite the key only while it is still the grant just observed, so the
// new token (this write's revision) is strictly greater and nobody else's grant is touched.
std::optional<LockHandle> EtcdStore::reacquire(std::string_view key, const std::string& etcd_key,
                                               std::string_view owner_id,
                                               std::string_view session_id,
                                               const mvccpb::KeyValue& holder, GrantLease& grant,
                                               const std::string& value, milliseconds ttl,
                                               WallClock::time_point now) {
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_mod_revision(etcd_key, holder.mod_revision());
  *request.add_compare() = compare_exists(session_record_key(*parse_session_id(session_id)));
  *request.add_success() = put_op(etcd_key, value, grant.id);
  *request.add_success() =
      put_op(session_lock_key(session_id, key), std::string(owner_id), grant.id);
  const auto response = txn_on(grant, request);
  if (!response.succeeded()) {
    recycle_unused(grant);
    throw ContentionError("lock " + std::string(key) +
                          " changed during a re-entrant acquire; retry");
  }
  recycle_lease(holder);  // the superseded grant's key and index entry are on the new lease
  return granted(key, owner_id, session_id, response, grant, ttl, now);
}

LockHandle EtcdStore::granted(std::string_view key, std::string_view owner_id,
                              std::string_view session_id,
                              const etcdserverpb::TxnResponse& response, GrantLease& grant,
                              milliseconds ttl, WallClock::time_point now) {
  // The token is the revision of the granting write, captured from this answer once.
  const FencingToken token = static_cast<FencingToken>(response.header().revision());
  const auto believed = believed_ttl(grant, ttl);
  if (!believed) {
    throw ContentionError("lock " + std::string(key) +
                          ": the lease of the grant ended at once, and the grant with it; retry");
  }
  return LockHandle{std::string(key),
                    std::string(owner_id),
                    std::string(session_id),
                    token,
                    grant.counting_from + *believed,
                    now + *believed};
}

ReapReport EtcdStore::reap_expired() {
  // Lock expiry needs no reaper (each grant's lease ends it). What etcd cannot do by itself is
  // end a grant whose *session* lease ended first: find sessions that left grant index entries
  // but no record, and release those grants. Keys only, one snapshot.
  std::set<std::string> live_sessions;
  std::map<std::string, std::vector<std::string>> grants_of;
  etcdserverpb::RangeRequest request = prefix_request(std::string(kSessionPrefix));
  request.set_keys_only(true);
  request.set_limit(1000);
  while (true) {
    const auto response = client_.range(request);
    for (const auto& kv : response.kvs()) {
      const auto parts = parse_session_key(kv.key());
      if (!parts) continue;
      if (parts->lock_key.empty()) {
        live_sessions.insert(parts->session_id);
      } else {
        grants_of[parts->session_id].push_back(parts->lock_key);
      }
    }
    if (!response.more() || response.kvs_size() == 0) break;
    request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
    request.set_revision(response.header().revision());
  }
  ReapReport report;
  for (const auto& [session_id, keys] : grants_of) {
    if (live_sessions.contains(session_id)) continue;
    report.expired_sessions.push_back(session_id);
    std::vector<std::string> etcd_keys;
    for (const auto& key : keys) etcd_keys.push_back(format_lock_key(key));
    for (const auto& kv : read_keys(etcd_keys)) {
      if (decode_grant(kv).session_id() != session_id) continue;  // handed over since
      etcdserverpb::TxnRequest remove;
      *remove.add_compare() = compare_mod_revision(kv.key(), kv.mod_revision());
      *remove.add_success() = delete_op(kv.key());
      if (!client_.txn(remove, CallKind::kWrite).succeeded()) continue;
      report.expired_locks.push_back(lock_info(kv));
      revoke_lease(kv.lease());  // takes the grant's index entry with it
    }
  }
  return report;
}

std::vector<LockInfo> EtcdStore::close_session(std::string_view session_id) {
  core::check_session_id(session_id);
  const auto lease = parse_session_id(session_id);
  if (!lease || !session_record(*lease)) throw session_not_found(session_id);
  // Revoke the session first: from then on no acquire for it can pass its Txn's session check,
  // so the grants listed below are all the session will ever have.
  client_.lease_revoke(*lease);
  auto index = prefix_request(session_locks_prefix(session_id));
  index.set_keys_only(true);
  std::vector<std::string> etcd_keys;
  const auto entries = client_.range(index);
  for (const auto& kv : entries.kvs()) {
    const auto parts = parse_session_key(kv.key());
    if (parts && !parts->lock_key.empty()) etcd_keys.push_back(format_lock_key(parts->lock_key));
  }
  std::vector<LockInfo> released;
  for (const auto& kv : read_keys(etcd_keys)) {
    if (decode_grant(kv).session_id() != session_id) continue;
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

std::optional<std::int64_t> EtcdStore::live_grant_lease(const std::string& etcd_key,
                                                        std::string_view owner_id,
                                                        std::string_view session_id,
                                                        FencingToken token) {
  const auto current = client_.range(range_request(etcd_key));
  if (current.kvs_size() == 0) return std::nullopt;
  const auto& kv = current.kvs(0);
  if (kv.mod_revision() != to_revision(token)) return std::nullopt;
  const GrantRecord record = decode_grant(kv);
  if (record.owner_id() != owner_id || record.session_id() != session_id) return std::nullopt;
  return kv.lease();
}

std::optional<LockHandle> EtcdStore::release_instead_of_handover(const LockHandle& from) {
  if (!delete_if_owner(from.key, from.owner_id, from.session_id, from.fencing_token)) {
    throw lost(from.key, from.fencing_token);
  }
  return std::nullopt;
}

std::optional<SessionRecord> EtcdStore::session_record(std::int64_t lease) {
  const auto response = client_.range(range_request(session_record_key(lease)));
  if (response.kvs_size() == 0) return std::nullopt;
  return decode_session(response.kvs(0));
}

LockInfo EtcdStore::live_lock_info(const mvccpb::KeyValue& kv) {
  LockInfo info = lock_info(kv);
  const auto now = wall_now();
  if (info.expires_at > now || kv.lease() == 0) return info;
  // The expiry written at the grant has passed and the key lives: its lease was renewed by an
  // extend (rewriting the key would change the token, ADR-0011). Without a later expiry, the
  // waiters of this server would retry every few milliseconds until the lock ends.
  const auto steady_now = SteadyClock::now();
  if (const auto until = book_.peek(kv.lease()); until && *until > steady_now) {
    info.expires_at = now + std::chrono::duration_cast<WallClock::duration>(*until - steady_now);
    return info;
  }
  try {
    // Renewed through another server: etcd reports whole seconds left, rounded down.
    const auto remaining = client_.lease_time_to_live(kv.lease(), false);
    if (remaining.ttl() > 0) info.expires_at = now + seconds(remaining.ttl());
  } catch (const Error&) {
    // Informational only: the expiry written at the grant stands.
  }
  return info;
}

std::vector<mvccpb::KeyValue> EtcdStore::read_keys(const std::vector<std::string>& etcd_keys) {
  std::vector<mvccpb::KeyValue> found;
  for (std::size_t first = 0; first < etcd_keys.size(); first += kMaxOpsPerTxn) {
    etcdserverpb::TxnRequest request;  // no compare: a consistent multi-key read
    const std::size_t last = std::min(etcd_keys.size(), first + kMaxOpsPerTxn);
    for (std::size_t i = first; i < last; ++i) *request.add_success() = get_op(etcd_keys[i]);
    const auto response = client_.txn(request, CallKind::kRead);
    for (const auto& op : response.responses()) {
      for (const auto& kv : op.response_range().kvs()) found.push_back(kv);
    }
  }
  return found;
}

// The grant seen holding `etcd_key` by a failed acquire, so a waiter's watch can tell whether it
// ended before the watch began and no release is missed in between. Bounded: a forgotten entry
// only means the watch wakes its waiter once when it starts.
void EtcdStore::remember_held(const std::string& etcd_key, const HeldAt& held) {
  std::lock_guard lock(held_mutex_);
  if (held_at_.size() >= kMaxRememberedKeys && !held_at_.contains(etcd_key)) held_at_.clear();
  auto& remembered = held_at_[etcd_key];
  if (held.revision >= remembered.revision) remembered = held;
}

bool EtcdStore::released_since(const std::string& etcd_key, const HeldAt& held,
                               std::int64_t revision) {
  if (revision <= held.revision) return false;  // nothing was written since
  try {
    auto request = range_request(etcd_key);
    request.set_revision(revision);
    const auto response = client_.range(request);
    return response.kvs_size() == 0 || response.kvs(0).create_revision() != held.create_revision;
  } catch (const Error&) {
    return true;
  }
}

GrantLease EtcdStore::lease_for(milliseconds ttl) {
  const std::int64_t wanted = lease_seconds(ttl);
  while (const auto pooled = leases_.take(wanted)) {
    const auto counting_from = SteadyClock::now();
    const auto wall_from = wall_now();
    if (pooled->alive_until &&
        *pooled->alive_until >= counting_from + client_.call_timeout() + kParallelRenewalMargin) {
      // Certainly alive when the Txn (sent now, with that deadline) is applied: renew it in
      // parallel with the Txn instead of one round trip before it.
      return GrantLease{pooled->lease_id,
                        wanted,
                        counting_from,
                        wall_from,
                        *pooled->alive_until,
                        client_.keep_alive_stream().start(pooled->lease_id,
                                                          counting_from + client_.call_timeout())};
    }
    std::int64_t renewed = 0;
    try {
      renewed = client_.lease_keep_alive(pooled->lease_id);
    } catch (const SessionNotFoundError&) {
      renewed = 0;  // expired meanwhile
    }
    // etcd raises a TTL below its minimum (2 s with default timings), as for a new lease.
    if (renewed >= wanted && renewed <= std::max<std::int64_t>(wanted, 2)) {
      return GrantLease{
          pooled->lease_id, wanted, counting_from, wall_from, counting_from + seconds(renewed),
          std::nullopt};
    }
    if (renewed > 0) revoke_lease(pooled->lease_id);  // not the TTL this grant needs
  }
  const auto counting_from = SteadyClock::now();
  const auto wall_from = wall_now();
  const auto granted = client_.lease_grant(wanted);
  return GrantLease{
      granted.id(), wanted, counting_from, wall_from, counting_from + seconds(granted.ttl()),
      std::nullopt};
}

etcdserverpb::TxnResponse EtcdStore::txn_on(GrantLease& grant,
                                            const etcdserverpb::TxnRequest& request) {
  const auto abandon_renewal = [&] {
    if (grant.renewal) {
      client_.keep_alive_stream().abandon(*grant.renewal);
      grant.renewal.reset();
    }
  };
  try {
    return client_.txn(request, CallKind::kWrite);
  } catch (const SessionNotFoundError&) {
    // "requested lease not found": the grant's lease itself (the session is a Compare, not an
    // error). Only an outside LeaseRevoke can do that to a lease known alive; nothing was put.
    abandon_renewal();
    throw ContentionError("the lease chosen for a grant was revoked meanwhile; retry");
  } catch (...) {
    abandon_renewal();
    throw;
  }
}

std::optional<milliseconds> EtcdStore::settle(GrantLease& grant) {
  if (grant.renewal) {
    std::int64_t renewed = -1;
    try {
      renewed = client_.keep_alive_stream().finish(*grant.renewal,
                                                   SteadyClock::now() + client_.call_timeout());
    } catch (const SessionNotFoundError&) {
      renewed = 0;
    } catch (const Error&) {
      renewed = -1;  // no answer: the lease still lives at least until alive_until
    }
    grant.renewal.reset();
    if (renewed == 0) return std::nullopt;
    if (renewed > 0) {
      grant.alive_until = std::max(grant.alive_until, grant.counting_from + seconds(renewed));
    }
  }
  return std::chrono::duration_cast<milliseconds>(grant.alive_until - grant.counting_from);
}

std::optional<milliseconds> EtcdStore::believed_ttl(GrantLease& grant, milliseconds ttl) {
  const auto known = settle(grant);
  if (!known) return std::nullopt;
  book_.note(grant.id, grant.alive_until);
  // Normally the whole TTL; less only if a parallel renewal went unanswered.
  return std::min(ttl, *known);
}

void EtcdStore::recycle_unused(GrantLease& grant) {
  if (!settle(grant)) return;  // gone
  recycle_lease(grant.id, grant.seconds, grant.alive_until);
}

void EtcdStore::recycle_lease(const mvccpb::KeyValue& released) {
  if (released.lease() == 0) return;
  std::int64_t ttl_seconds = 0;
  try {
    ttl_seconds = lease_seconds_of(decode_grant(released));
  } catch (const Error&) {
  }
  recycle_lease(released.lease(), ttl_seconds, book_.take(released.lease()));
}

void EtcdStore::recycle_lease(std::int64_t lease_id, std::int64_t ttl_seconds,
                              std::optional<SteadyClock::time_point> alive_until) {
  if (lease_id == 0) return;
  if (ttl_seconds > 0 && leases_.give(ttl_seconds, lease_id, alive_until)) return;
  revoke_lease(lease_id);
}

void EtcdStore::revoke_lease(std::int64_t lease_id) {
  if (lease_id == 0) return;
  book_.take(lease_id);
  try {
    client_.lease_revoke(lease_id);
  } catch (const Error&) {
  }
}

}  // namespace

BackendPtr make_etcd_store(const EtcdStoreOptions& options) {
  return std::make_unique<EtcdStore>(options);
}

}  // namespace dlock::store::etcd
