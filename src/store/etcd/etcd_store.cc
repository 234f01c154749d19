// The etcd LockStore (about 565 lines, over the usual ~500): the one class every SPI call enters,
// kept whole so each exclusive grant's Txns read side by side; its parts (leases, sessions,
// session-bound grants, holders, elections, lock-delays, watches) live in the other etcd_*.cc
// files.
#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_delays.h"
#include "store/etcd/etcd_elections.h"
#include "store/etcd/etcd_holders.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_records.h"
#include "store/etcd/etcd_session_bound.h"
#include "store/etcd/etcd_sessions.h"
#include "store/etcd/etcd_watch.h"
#include "util/backend_names.h"
#include "util/lock_lost.h"
#include "util/store_key.h"
#include "util/validating_backend.h"

namespace dlock::store::etcd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::int64_t to_revision(FencingToken token) { return static_cast<std::int64_t>(token); }

class EtcdStore final : public Backend {
 public:
  explicit EtcdStore(const EtcdStoreOptions& options)
      : after_grant_for_test_(options.after_grant_for_test),
        client_(make_channel(options.endpoints, {options.cacert, options.cert, options.key}),
                options.call_timeout),
        leases_(client_),
        sessions_(client_, leases_),
        session_bound_(client_, leases_, sessions_, watches_, after_grant_for_test_),
        holders_(client_, leases_, sessions_),
        watches_(client_) {}

  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override {
    if (request.holder()) {
      // Holder sets (docs/adr/0020), etcd_holders.h.
      // The one check of its own: the key layout (etcd_keys.h) needs a namespace and a name,
      // which the other stores do not (the wrapper checked every argument's shape).
      format_lock_key(key);  // InvalidArgumentError("key") without namespace or name
      if (!is_session_id(session_id)) throw session_not_found(session_id);
      return holders_.acquire(key, owner_id, session_id, request);
    }
    // Elections (docs/adr/0020, etcd_elections.h): a leader is the exclusive acquire, its record
    // with the value.
    const auto value = request.leader_value();
    return insert_exclusive(key, owner_id, session_id, request.lease(), value);
  }

  LockInfo proclaim(const GrantRef& grant, std::string_view value) override {
    const std::string etcd_key = format_lock_key(grant.key);
    if (!is_session_id(grant.session_id)) throw util::lock_lost(grant.key, grant.fencing_token);
    return live_lock_info(proclaim_value(client_, grant, etcd_key, value));
  }
  std::vector<LockInfo> read_holders(std::string_view key) override {
    std::vector<LockInfo> found;
    for (const auto& kv : holders_.read(key)) found.push_back(live_lock_info(kv));
    return found;
  }

  std::optional<LockInfo> read(std::string_view key) override {
    // The lock key comes first when it exists; holders follow, ordered by token.
    const auto found = holders_.read(key);
    if (found.empty()) return std::nullopt;  // never granted, released or expired
    return live_lock_info(parse_lock_key(found.front().key()) ? found.front() : found.back());
  }

  std::vector<LockInfo> list(std::string_view prefix, const ListAfter& after,
                             std::size_t limit) override {
    std::vector<LockInfo> locks;
    std::int64_t revision = 0;
    const auto comes_after = [&](const LockInfo& info) {
      return std::tie(info.key, info.fencing_token) > std::tie(after.key, after.fencing_token);
    };
    auto lock_keys = prefix_request(scan_prefix_for(prefix));
    auto holder_keys = prefix_request(holder_scan_prefix_for(prefix));
    // A page that follows another starts at its last grant's name: the lock and holder keys of a
    // namespace sort as its names do (etcd_keys.h).
    if (const auto parts = store_key::split(after.key);
        parts && !parts->ns.empty() && !parts->key.empty()) {
      lock_keys.set_key(std::max(lock_keys.key(), format_lock_key(after.key)));
      holder_keys.set_key(std::max(holder_keys.key(), holder_range(after.key).begin));
    }
    // Session keys may share the scanned range; pages continue past them, all at the revision
    // of the first page, so the listing is one snapshot.
    scan(lock_keys, limit, revision, [&](const mvccpb::KeyValue& kv) {
      const auto key = parse_lock_key(kv.key());
      if (key && key->starts_with(prefix)) {
        auto info = live_lock_info(kv);
        if (comes_after(info)) locks.push_back(std::move(info));
      }
      return locks.size() < limit;
    });
    // Holders (docs/adr/0020) at the same revision: whole names, until `limit` of them, so the
    // first `limit` grants by (key, token) are among what is read.
    std::size_t holders = 0;
    std::string last_name;
    scan(holder_keys, limit, revision, [&](const mvccpb::KeyValue& kv) {
      const auto key = parse_holder_key(kv.key());
      if (!key || !key->starts_with(prefix)) return true;
      if (holders >= limit && *key != last_name) return false;
      auto info = live_lock_info(kv);
      if (!comes_after(info)) return true;
      locks.push_back(std::move(info));
      ++holders;
      last_name = *key;
      return true;
    });
    std::stable_sort(locks.begin(), locks.end(), [](const LockInfo& a, const LockInfo& b) {
      return std::tie(a.key, a.fencing_token) < std::tie(b.key, b.fencing_token);
    });
    if (locks.size() > limit) locks.resize(limit);
    return locks;
  }

  LockHandle extend(const GrantRef& ref, milliseconds ttl) override {
    const std::string lock_key = format_lock_key(ref.key);
    if (!is_session_id(ref.session_id)) throw util::lock_lost(ref.key, ref.fencing_token);
    const auto sent_at = SteadyClock::now();
    const auto wall_sent_at = wall_now();
    const auto grant = named_grant(ref, lock_key);
    if (!grant) throw util::lock_lost(ref.key, ref.fencing_token);
    const std::string& etcd_key = grant->key();
    const auto record = decode_grant(*grant);
    const auto mode = static_cast<HoldMode>(record.mode());
    // The grant's record says its mode and lease: a session-bound grant's lease is its session's.
    if (record.session_bound()) {
      LockHandle checked = session_bound_.extend(ref, etcd_key, grant->mod_revision());
      checked.mode = mode;
      return checked;
    }
    const std::optional<std::int64_t> grant_lease = grant->lease();
    // A lease renews for the TTL it was granted with; a Put to attach a longer one would move
    // the key's revision, i.e. change the token. So the TTL can be renewed, never lengthened:
    // the handle says the shorter lifetime (docs/adr/0011-honest-lock-lifetimes.md).
    const std::int64_t renewed_seconds =
        client_.lease_keep_alive(*grant_lease, leases_.known_alive_until(*grant_lease));
    if (renewed_seconds <= 0) throw util::lock_lost(ref.key, ref.fencing_token);
    leases_.note_renewed(*grant_lease, sent_at + seconds(renewed_seconds));
    // Verify after renewing: the grant (same revision, same lease) and its session still live.
    etcdserverpb::TxnRequest request;
    // (The revision read: a proclaimed leader's moved off its token, docs/adr/0020.)
    *request.add_compare() = compare_mod_revision(etcd_key, grant->mod_revision());
    *request.add_compare() = compare_lease(etcd_key, *grant_lease);
    *request.add_compare() = compare_exists(session_record_key(ref.session_id));
    // One read in the Txn: etcd serves a Txn without operations as a serializable read, so a
    // follower that has not yet applied the grant would answer "lost" for a live lock. With a
    // (default, linearizable) Range inside, the check goes through the leader's read index.
    *request.add_success() = get_op(etcd_key);
    if (!client_.txn(request, CallKind::kRead).succeeded()) {
      throw util::lock_lost(ref.key, ref.fencing_token);
    }
    const milliseconds believed = std::min(ttl, milliseconds(seconds(renewed_seconds)));
    LockHandle extended{ref.key, ref.owner_id, ref.session_id, ref.fencing_token};
    extended.mode = mode;
    // Both counted from before the keep-alive was sent: the renewed lease lives at least that
    // long.
    extended.client_deadline = sent_at + believed;
    extended.server_expiry = wall_sent_at + believed;
    return extended;
  }

  bool delete_if_owner(const GrantRef& grant) override {
    return release(grant.key, format_lock_key(grant.key), grant.owner_id, grant.session_id,
                   grant.fencing_token, to_revision(grant.fencing_token));
  }

  bool release(std::string_view key, const std::string& etcd_key, std::string_view owner_id,
               std::string_view session_id, FencingToken fencing_token, std::int64_t key_revision) {
    const std::string index_key = session_lock_key(session_id, key);
    // One Txn. The lock key's revision is the token, so it names exactly that grant; the
    // session's index entry was written by the same Txn (same revision) and holds the owner, so
    // session and owner are checked by Compare without reading the value first.
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, key_revision);
    *request.add_compare() = compare_mod_revision(index_key, to_revision(fencing_token));
    *request.add_compare() = compare_value(index_key, std::string(owner_id));
    *request.add_success() = delete_op_with_prev(etcd_key);
    *request.add_success() = delete_op(index_key);
    // A release ends the grant cleanly: its lock-delay marker goes with it (etcd_delays.h).
    add_marker_delete(request, key, etcd_key, sessions_.cached_lock_delay(session_id));
    // Not this lock: the token may name a holder (docs/adr/0020), found by its index entry.
    *request.add_failure() = get_op(session_holder_key(session_id, key));
    const auto response = client_.txn(request, CallKind::kWrite);
    if (!response.succeeded()) {
      const auto& entries = response.responses(0).response_range();
      if (entries.kvs_size() != 0 && entries.kvs(0).mod_revision() == to_revision(fencing_token)) {
        return holders_.release(owner_id, fencing_token, entries.kvs(0));
      }
      // A proclaimed leader (docs/adr/0020): the record keeps the token, the revision moved.
      // Again, guarded by the revision read now (the index entry still names the token). A read
      // of its own, not in the Txn's failure branch: the release Txn, a Raft entry, stays as it
      // was for every plain grant.
      const auto lock = client_.range(range_request(etcd_key));
      if (lock.kvs_size() != 0 && lock.kvs(0).mod_revision() != key_revision &&
          token_of(lock.kvs(0)) == to_revision(fencing_token)) {
        return release(key, etcd_key, owner_id, session_id, fencing_token,
                       lock.kvs(0).mod_revision());
      }
      return false;
    }
    for (const auto& kv : response.responses(0).response_delete_range().prev_kvs()) {
      leases_.recycle_lease(kv);  // it held this lock key and this index entry, both gone
    }
    return true;
  }

  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override {
    const std::string etcd_key = format_lock_key(from.key);
    if (!is_session_id(next_session_id)) return release_instead_of_handover(from);
    if (lease.session_bound()) {
      if (auto next = session_bound_.handover(from, next_owner_id, next_session_id)) return next;
      return release_instead_of_handover(from);  // the next session is gone
    }
    return handover_ttl(from, etcd_key, next_owner_id, next_session_id, lease.ttl(),
                        to_revision(from.fencing_token));
  }

  // handover to a TTL grant, guarded by the lock key's `key_revision` (the token, or a proclaimed
  // leader's revision, docs/adr/0020).
  std::optional<LockHandle> handover_ttl(const GrantRef& from, const std::string& etcd_key,
                                         std::string_view next_owner_id,
                                         std::string_view next_session_id, milliseconds ttl,
                                         std::int64_t key_revision) {
    const auto next = sessions_.lookup(next_session_id);
    if (!next) return release_instead_of_handover(from);  // the next session is gone
    GrantLease grant = leases_.lease_for(ttl);
    const auto now = grant.wall_from;
    const std::string next_record = session_record_key(next_session_id);
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_mod_revision(etcd_key, key_revision);
    *request.add_compare() = compare_exists(next_record);
    *request.add_success() = get_op(etcd_key);  // the outgoing grant, for its lease
    *request.add_success() =
        put_op(etcd_key, encode_grant(next_owner_id, next_session_id, now, now + ttl), grant.id);
    *request.add_success() =
        put_op(session_lock_key(next_session_id, from.key), std::string(next_owner_id), grant.id);
    if (from.session_id != next_session_id) {
      *request.add_success() = delete_op(session_lock_key(from.session_id, from.key));
    }
    // The grant carries the next session's lock-delay now (etcd_delays.h).
    add_marker_handover(request, from.key, etcd_key, milliseconds(next->lock_delay_ms()),
                        sessions_.cached_lock_delay(from.session_id));
    *request.add_failure() = get_op(etcd_key);
    const auto response = leases_.txn_on(grant, request);
    if (response.succeeded()) {
      const FencingToken token = static_cast<FencingToken>(response.header().revision());
      // The outgoing grant's lease held its lock key (now on the new lease) and its index entry
      // (deleted, or rewritten on the new lease for the same session): nothing any more.
      for (const auto& kv : response.responses(0).response_range().kvs()) leases_.recycle_lease(kv);
      const auto believed = leases_.believed_ttl(grant, ttl);
      if (!believed) {
        throw UnknownOutcomeError("lock " + from.key +
                                  " was released, but the lease of its hand-over "
                                  "grant ended at once: nobody holds it");
      }
      return LockHandle{from.key, std::string(next_owner_id),      std::string(next_session_id),
                        token,    grant.counting_from + *believed, now + *believed};
    }
    leases_.recycle_unused(grant);
    const auto& current = response.responses(0).response_range();
    if (current.kvs_size() == 0 || token_of(current.kvs(0)) != to_revision(from.fencing_token)) {
      throw util::lock_lost(from.key, from.fencing_token);
    }
    if (current.kvs(0).mod_revision() != key_revision) {  // proclaimed meanwhile: the same grant
      return handover_ttl(from, etcd_key, next_owner_id, next_session_id, ttl,
                          current.kvs(0).mod_revision());
    }
    return release_instead_of_handover(from);  // the next session is gone
  }

  LockOutcome revoke(std::string_view key) override { return holders_.revoke(key); }

  std::vector<KeyDelay> list_delays(std::string_view prefix, std::string_view after,
                                    std::size_t limit) override {
    return etcd::list_delays(client_, prefix, after, limit);
  }

  bool clear_delay(std::string_view key) override { return clear_delays(client_, key); }

  ReleaseSubscriptionPtr watch_releases(std::string_view key,
                                        ReleaseCallback on_released) override {
    // The lock key and, for holders (docs/adr/0020), the key's holder range.
    // And its lock-delay state (etcd_delays.h): a delay's end is the deletion of its key.
    return watches_.watch(format_lock_key(key), holder_range(key), delay_state_range(key),
                          std::move(on_released));
  }

  std::string_view backend_id() const override { return backend_names::kEtcd; }

  using SessionRegistry::open_session;
  SessionInfo open_session(std::string_view owner_id, milliseconds ttl,
                           milliseconds lock_delay) override {
    return sessions_.open(owner_id, ttl, lock_delay);
  }
  SessionInfo heartbeat(std::string_view session_id) override {
    return sessions_.heartbeat(session_id);
  }
  std::vector<SessionInfo> list_sessions(std::string_view owner_prefix, std::string_view after,
                                         std::size_t limit) override {
    return sessions_.list(owner_prefix, after, limit);
  }
  std::vector<LockInfo> session_grants(std::string_view session_id) override {
    return sessions_.grants(session_id);
  }
  bool try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) override {
    return sessions_.try_heartbeat_async(session_id, done);
  }
  std::optional<SessionInfo> get_session(std::string_view session_id) override {
    return sessions_.get(session_id);
  }
  std::vector<LockInfo> close_session(std::string_view session_id) override {
    // A close ends the session's grants cleanly: no lock-delay (etcd_delays.h).
    if (const auto record = sessions_.lookup(session_id); record && record->lock_delay_ms() > 0) {
      clear_markers_of(client_, session_id);
    }
    return sessions_.close(session_id);
  }
  ReapReport reap_expired() override {
    ReapReport report = sessions_.reap_expired();
    settle_all_delays(client_);  // markers of grants that ended (or were reaped) become delays
    return report;
  }

 private:
  // try_grant of an exclusive grant, or of a leader with its value (its arguments checked by the
  // ValidatingBackend the store is returned in).
  std::optional<LockHandle> insert_exclusive(std::string_view key, std::string_view owner_id,
                                             std::string_view session_id, LockLease lease,
                                             std::optional<std::string_view> leader_value) {
    const std::string etcd_key = format_lock_key(key);
    if (!is_session_id(session_id)) throw session_not_found(session_id);
    if (lease.session_bound()) {
      return session_bound_.acquire(key, owner_id, session_id, leader_value);
    }
    return acquire(key, etcd_key, owner_id, session_id, lease.ttl(), leader_value);
  }
  std::optional<LockHandle> acquire(std::string_view key, const std::string& etcd_key,
                                    std::string_view owner_id, std::string_view session_id,
                                    milliseconds ttl, std::optional<std::string_view> leader_value);
  std::optional<LockHandle> reacquire(std::string_view key, const std::string& etcd_key,
                                      std::string_view owner_id, std::string_view session_id,
                                      const mvccpb::KeyValue& holder, GrantLease& grant,
                                      const std::string& value, milliseconds ttl,
                                      WallClock::time_point now);
  // The handle of the grant `response` (a succeeded granting Txn on `grant`'s lease) made.
  LockHandle granted(std::string_view key, std::string_view owner_id, std::string_view session_id,
                     const etcdserverpb::TxnResponse& response, GrantLease& grant, milliseconds ttl,
                     WallClock::time_point now);
  // The key of the grant `grant` names, as one read Txn finds it: its lock key `lock_key` when
  // that is the grant (token, owner, session), else its holder key; std::nullopt for none.
  std::optional<mvccpb::KeyValue> named_grant(const GrantRef& grant, const std::string& lock_key);
  // Pages (of at least `page` keys) through `request` at `revision` (the first page's when 0, then
  // set), calling `visit` with every key-value until it returns false.
  void scan(etcdserverpb::RangeRequest request, std::size_t page, std::int64_t& revision,
            const std::function<bool(const mvccpb::KeyValue&)>& visit);
  // When the next session of a hand-over is gone, the outgoing grant is simply released.
  std::optional<LockHandle> release_instead_of_handover(const GrantRef& from);
  // The grant as read and list report it, its expiry the later of the one written at the grant
  // and what its lease is known to live (an extend renews the lease without rewriting the key).
  LockInfo live_lock_info(const mvccpb::KeyValue& kv);

  const std::function<void(std::string_view)> after_grant_for_test_;
  EtcdClient client_;
  GrantLeases leases_;
  Sessions sessions_;
  // Holds references only (watches_ is constructed after it and used only after construction).
  SessionBoundGrants session_bound_;
  Holders holders_;
  // Declared last: destroyed first, so no watch callback outlives the rest of the store.
  ReleaseWatches watches_;
};

std::optional<LockHandle> EtcdStore::acquire(std::string_view key, const std::string& etcd_key,
                                             std::string_view owner_id, std::string_view session_id,
                                             milliseconds ttl,
                                             std::optional<std::string_view> leader_value) {
  // The grant's lease starts counting before the grant exists, so it ends no earlier than
  // counting_from + ttl: the client deadline below can never outlive the key.
  // The session's lock-delay, for the grant's marker: cached, else one Range (etcd_delays.h).
  const auto session = sessions_.lookup(session_id);
  if (!session) throw session_not_found(session_id);
  GrantLease grant = leases_.lease_for(ttl);
  // Counted, like the lease, from before the lease was asked for.
  const auto now = grant.wall_from;
  const std::string value = encode_grant(owner_id, session_id, now, now + ttl, false, leader_value);
  const std::string record_key = session_record_key(session_id);
  // The whole acquire: If(CreateRevision(key) == 0, session alive, no holder of the key)
  // Then(Put) Else(Get). The holder range is one compare (docs/adr/0020).
  const KeyRange holders = holder_range(key);
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_create_revision(etcd_key, 0);
  *request.add_compare() = compare_exists(record_key);
  *request.add_compare() = compare_none_in(holders.begin, holders.end);
  add_delay_guard(request, key);  // no lock-delay marker or delay of the name (etcd_delays.h)
  *request.add_success() = put_op(etcd_key, value, grant.id);
  // The index entry holds the owner, so a release can check it with a Compare.
  *request.add_success() =
      put_op(session_lock_key(session_id, key), std::string(owner_id), grant.id);
  add_marker_put(request, key, etcd_key, milliseconds(session->lock_delay_ms()));
  *request.add_failure() = get_op(etcd_key);
  *request.add_failure() = get_op(record_key);
  add_delay_state_read(request, key);
  const auto response = leases_.txn_on(grant, request);
  if (response.succeeded()) {
    if (after_grant_for_test_) after_grant_for_test_(key);
    return granted(key, owner_id, session_id, response, grant, ttl, now);
  }
  const auto& holder = response.responses(0).response_range();
  if (response.responses(1).response_range().kvs_size() == 0) {
    leases_.recycle_unused(grant);
    throw session_not_found(session_id);
  }
  if (holder.kvs_size() == 0) {
    leases_.recycle_unused(grant);
    // A grant of the name ended without a release: its marker becomes a delay, if not yet.
    if (delay_state_seen(response, 2)) settle_delays(client_, key);
    return std::nullopt;  // holders live (no upgrade, docs/adr/0020), or a lock-delay runs
  }
  const GrantRecord record = decode_grant(holder.kvs(0));
  if (record.owner_id() == owner_id && record.session_id() == session_id) {
    return reacquire(key, etcd_key, owner_id, session_id, holder.kvs(0), grant, value, ttl, now);
  }
  leases_.recycle_unused(grant);
  watches_.remember_held(etcd_key, response.header().revision(), holder.kvs(0).create_revision());
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
  *request.add_compare() = compare_exists(session_record_key(session_id));
  *request.add_success() = put_op(etcd_key, value, grant.id);
  *request.add_success() =
      put_op(session_lock_key(session_id, key), std::string(owner_id), grant.id);
  const auto response = leases_.txn_on(grant, request);
  if (!response.succeeded()) {
    leases_.recycle_unused(grant);
    throw ContentionError("lock " + std::string(key) +
                          " changed during a re-entrant acquire; retry");
  }
  leases_.recycle_lease(holder);  // the superseded grant's key and index entry are on the new lease
  return granted(key, owner_id, session_id, response, grant, ttl, now);
}

LockHandle EtcdStore::granted(std::string_view key, std::string_view owner_id,
                              std::string_view session_id,
                              const etcdserverpb::TxnResponse& response, GrantLease& grant,
                              milliseconds ttl, WallClock::time_point now) {
  // The token is the revision of the granting write, captured from this answer once.
  const FencingToken token = static_cast<FencingToken>(response.header().revision());
  const auto believed = leases_.believed_ttl(grant, ttl);
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

std::optional<mvccpb::KeyValue> EtcdStore::named_grant(const GrantRef& grant,
                                                       const std::string& lock_key) {
  etcdserverpb::TxnRequest request;
  *request.add_success() = get_op(lock_key);
  Holders::add_holder_reads(request, grant.key, grant.session_id);
  const auto response = client_.txn(request, CallKind::kRead);
  const auto& current = response.responses(0).response_range();
  if (current.kvs_size() != 0) {
    const auto& kv = current.kvs(0);
    const GrantRecord record = decode_grant(kv);
    if (token_of(kv, record) == to_revision(grant.fencing_token) &&
        record.owner_id() == grant.owner_id && record.session_id() == grant.session_id) {
      return kv;
    }
  }
  return Holders::holder_in(response, 1, grant.owner_id, grant.session_id, grant.fencing_token);
}

std::optional<LockHandle> EtcdStore::release_instead_of_handover(const GrantRef& from) {
  if (!delete_if_owner(from)) {
    throw util::lock_lost(from.key, from.fencing_token);
  }
  return std::nullopt;
}

void EtcdStore::scan(etcdserverpb::RangeRequest request, std::size_t page, std::int64_t& revision,
                     const std::function<bool(const mvccpb::KeyValue&)>& visit) {
  request.set_limit(static_cast<std::int64_t>(std::max<std::size_t>(page, 64)));
  while (true) {
    request.set_revision(revision);
    const auto response = client_.range(request);
    revision = response.header().revision();
    for (const auto& kv : response.kvs()) {
      if (!visit(kv)) return;
    }
    if (!response.more() || response.kvs_size() == 0) return;
    request.set_key(response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0'));
  }
}

LockInfo EtcdStore::live_lock_info(const mvccpb::KeyValue& kv) {
  LockInfo info = lock_info(kv);
  const auto now = wall_now();
  if (info.expires_at > now || kv.lease() == 0) return info;
  // The expiry written at the grant has passed and the key lives: its lease was renewed by an
  // extend (rewriting the key would change the token, ADR-0011). Without a later expiry, the
  // waiters of this server would retry every few milliseconds until the lock ends.
  const auto steady_now = SteadyClock::now();
  if (const auto until = leases_.known_alive_until(kv.lease()); until && *until > steady_now) {
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

}  // namespace

BackendPtr make_etcd_store(const EtcdStoreOptions& options) {
  return std::make_unique<util::ValidatingBackend>(std::make_unique<EtcdStore>(options),
                                                   options.limits);
}

}  // namespace dlock::store::etcd
