#include "store/etcd/etcd_session_bound.h"

#include <string>

#include "store/etcd/etcd_delays.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_records.h"
#include "util/lock_lost.h"

namespace dlock::store::etcd {
namespace {

WallClock::time_point wall_at(SteadyClock::time_point until) {
  return wall_now() + std::chrono::duration_cast<WallClock::duration>(until - SteadyClock::now());
}

// The Txn operations that put a session-bound grant of (owner, session) on `lease_id`.
void add_grant_puts(etcdserverpb::TxnRequest& request, const std::string& etcd_key,
                    std::string_view key, std::string_view owner_id, std::string_view session_id,
                    std::int64_t lease_id, WallClock::time_point expiry,
                    std::optional<std::string_view> leader_value = std::nullopt) {
  const auto now = wall_now();
  *request.add_success() = put_op(
      etcd_key, encode_grant(owner_id, session_id, now, expiry, true, leader_value), lease_id);
  // The index entry holds the owner, so a release can check it with a Compare (ADR-0009).
  *request.add_success() =
      put_op(session_lock_key(session_id, key), std::string(owner_id), lease_id);
}

}  // namespace

std::optional<LockHandle> SessionBoundGrants::acquire(
    std::string_view key, std::string_view owner_id, std::string_view session_id,
    std::optional<std::string_view> leader_value) {
  // The grant lives while the session's lease does: at least until `until`.
  const auto session = sessions_.live(session_id);
  const auto until = session.until;
  const std::string etcd_key = format_lock_key(key);
  const std::string record_key = session_record_key(session_id);
  // The whole acquire: If(CreateRevision(key) == 0, session alive, no holder of the key) Then(Put
  // on the session's lease) Else(Get). The holder range is one compare (docs/adr/0020).
  const KeyRange holders = holder_range(key);
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_create_revision(etcd_key, 0);
  *request.add_compare() = compare_exists(record_key);
  *request.add_compare() = compare_none_in(holders.begin, holders.end);
  add_delay_guard(request, key);  // no lock-delay marker or delay of the name (etcd_delays.h)
  add_grant_puts(request, etcd_key, key, owner_id, session_id, session.record.lease_id(),
                 wall_at(until), leader_value);
  add_marker_put(request, key, etcd_key, std::chrono::milliseconds(session.record.lock_delay_ms()));
  *request.add_failure() = get_op(etcd_key);
  *request.add_failure() = get_op(record_key);
  add_delay_state_read(request, key);
  auto response = client_.txn(request, CallKind::kWrite);
  if (!response.succeeded()) {
    if (response.responses(1).response_range().kvs_size() == 0) {
      sessions_.forget(session_id);
      throw session_not_found(session_id);
    }
    const auto& holder = response.responses(0).response_range();
    if (holder.kvs_size() == 0) {
      // A grant of the name ended without a release: its marker becomes a delay, if not yet.
      if (delay_state_seen(response, 2)) settle_delays(client_, key);
      return std::nullopt;  // holders live, or a lock-delay runs
    }
    const GrantRecord held = decode_grant(holder.kvs(0));
    if (held.owner_id() != owner_id || held.session_id() != session_id) {
      watches_.remember_held(etcd_key, response.header().revision(),
                             holder.kvs(0).create_revision());
      return std::nullopt;  // held by a live grant of another session: a decision
    }
    // Re-entrant: rewrite the key only while it is still the grant just observed.
    const mvccpb::KeyValue previous = holder.kvs(0);
    etcdserverpb::TxnRequest again;
    *again.add_compare() = compare_mod_revision(etcd_key, previous.mod_revision());
    *again.add_compare() = compare_exists(record_key);
    add_grant_puts(again, etcd_key, key, owner_id, session_id, session.record.lease_id(),
                   wall_at(until), leader_value);
    response = client_.txn(again, CallKind::kWrite);
    if (!response.succeeded()) {
      throw ContentionError("lock " + std::string(key) +
                            " changed during a re-entrant acquire; retry");
    }
    leases_.recycle_lease(previous);  // a TTL grant's own lease now holds nothing
  }
  if (after_grant_for_test_) after_grant_for_test_(key);
  // The token is the revision of the granting write, captured from this answer once.
  return LockHandle{std::string(key),
                    std::string(owner_id),
                    std::string(session_id),
                    static_cast<FencingToken>(response.header().revision()),
                    until,
                    wall_at(until),
                    true};
}

LockHandle SessionBoundGrants::extend(const GrantRef& grant, const std::string& etcd_key,
                                      std::int64_t mod_revision) {
  const auto record = sessions_.lookup(grant.session_id);
  if (!record) throw util::lock_lost(grant.key, grant.fencing_token);
  // Nothing to renew but the session: check the grant (same revision, on the session's lease,
  // session record present). The Range makes it a linearizable read (see EtcdStore::extend).
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_mod_revision(
      etcd_key, mod_revision != 0 ? mod_revision : static_cast<std::int64_t>(grant.fencing_token));
  *request.add_compare() = compare_lease(etcd_key, record->lease_id());
  *request.add_compare() = compare_exists(session_record_key(grant.session_id));
  *request.add_success() = get_op(etcd_key);
  if (!client_.txn(request, CallKind::kRead).succeeded()) {
    throw util::lock_lost(grant.key, grant.fencing_token);
  }
  const auto until = sessions_.alive_until(*record);
  if (!until) throw util::lock_lost(grant.key, grant.fencing_token);
  LockHandle checked{grant.key, grant.owner_id, grant.session_id, grant.fencing_token};
  checked.client_deadline = *until;
  checked.server_expiry = wall_at(*until);
  checked.session_bound = true;
  return checked;
}

std::optional<LockHandle> SessionBoundGrants::handover(const GrantRef& from,
                                                       std::string_view next_owner_id,
                                                       std::string_view next_session_id,
                                                       std::int64_t mod_revision) {
  const auto record = sessions_.lookup(next_session_id);
  if (!record) return std::nullopt;
  const auto until = sessions_.alive_until(*record);
  if (!until) return std::nullopt;
  const std::string etcd_key = format_lock_key(from.key);
  const auto token = static_cast<std::int64_t>(from.fencing_token);
  etcdserverpb::TxnRequest request;
  *request.add_compare() = compare_mod_revision(etcd_key, mod_revision != 0 ? mod_revision : token);
  *request.add_compare() = compare_exists(session_record_key(next_session_id));
  *request.add_success() = get_op(etcd_key);  // the outgoing grant, for its lease
  add_grant_puts(request, etcd_key, from.key, next_owner_id, next_session_id, record->lease_id(),
                 wall_at(*until));
  if (from.session_id != next_session_id) {
    *request.add_success() = delete_op(session_lock_key(from.session_id, from.key));
  }
  // The grant carries the next session's lock-delay now (etcd_delays.h).
  add_marker_handover(request, from.key, etcd_key,
                      std::chrono::milliseconds(record->lock_delay_ms()),
                      sessions_.cached_lock_delay(from.session_id));
  *request.add_failure() = get_op(etcd_key);
  etcdserverpb::TxnResponse response;
  try {
    response = client_.txn(request, CallKind::kWrite);
  } catch (const SessionNotFoundError&) {
    sessions_.forget(next_session_id);  // its lease ended: nothing was written
    return std::nullopt;
  }
  if (!response.succeeded()) {
    const auto& current = response.responses(0).response_range();
    if (current.kvs_size() == 0 || token_of(current.kvs(0)) != token) {
      throw util::lock_lost(from.key, from.fencing_token);
    }
    if (current.kvs(0).mod_revision() != (mod_revision != 0 ? mod_revision : token)) {
      if (mod_revision != 0) {
        throw ContentionError("lock " + from.key + " was proclaimed during a hand-over; retry");
      }
      // A proclaimed leader (docs/adr/0020): the same grant, guarded by the revision just read.
      return handover(from, next_owner_id, next_session_id, current.kvs(0).mod_revision());
    }
    sessions_.forget(next_session_id);
    return std::nullopt;  // the next session is gone
  }
  for (const auto& kv : response.responses(0).response_range().kvs()) leases_.recycle_lease(kv);
  return LockHandle{from.key,
                    std::string(next_owner_id),
                    std::string(next_session_id),
                    static_cast<FencingToken>(response.header().revision()),
                    *until,
                    wall_at(*until),
                    true};
}

}  // namespace dlock::store::etcd
