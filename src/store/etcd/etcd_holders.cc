#include "store/etcd/etcd_holders.h"

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "store/etcd/etcd_delays.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {
namespace {

// Lost races (another grant or release between the read and the Txn) before giving up with
// ContentionError: each is one read and one Txn; only a busy permit set loses that often.
constexpr int kMaxAttempts = 16;

WallClock::time_point wall_at(SteadyClock::time_point until) {
  return wall_now() + std::chrono::duration_cast<WallClock::duration>(until - SteadyClock::now());
}

// "No key of [begin, end) but `except`" as compares (none when the range is empty).
void add_none_in_except(etcdserverpb::TxnRequest& request, const std::string& begin,
                        const std::string& end, const std::string* except) {
  if (except != nullptr && *except >= begin && *except < end) {
    add_none_in_except(request, begin, *except, nullptr);
    add_none_in_except(request, *except + std::string(1, '\0'), end, nullptr);
    return;
  }
  if (begin < end) *request.add_compare() = compare_none_in(begin, end);
}

std::uint32_t random_index(std::size_t size) {
  thread_local std::mt19937 generator{std::random_device{}()};
  return static_cast<std::uint32_t>(
      std::uniform_int_distribution<std::size_t>(0, size - 1)(generator));
}

}  // namespace

std::optional<LockHandle> Holders::acquire(std::string_view key, std::string_view owner_id,
                                           std::string_view session_id,
                                           const GrantRequest& request) {
  if (request.mode() == HoldMode::kShared) {
    return acquire_shared(key, owner_id, session_id, request.lease());
  }
  return acquire_permit(key, owner_id, session_id, request.lease(), request.limit());
}

std::optional<LockHandle> Holders::acquire_shared(std::string_view key, std::string_view owner_id,
                                                  std::string_view session_id, LockLease lease) {
  // One Txn: If(no lock key, no permit slot, session alive, no lock-delay) Then(Put the session's
  // shared key). A re-acquire puts the same key again: a new mod revision, i.e. a new, greater
  // token. While live holders have lock-delay markers, the delay guard is the one a read of
  // them allows (etcd_delays.h), and a lost race looks again.
  const std::string lock_key = format_lock_key(key);
  const std::string record_key = session_record_key(session_id);
  const KeyRange permits = permit_range(key);
  std::optional<DelayState> delays;
  for (int tries = 0; tries < kMaxAttempts; ++tries) {
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_create_revision(lock_key, 0);
    *request.add_compare() = compare_exists(record_key);
    *request.add_compare() = compare_none_in(permits.begin, permits.end);
    add_delay_guard(request, key, delays ? &*delays : nullptr);
    *request.add_failure() = get_op(record_key);
    add_delay_state_read(request, key);
    *request.add_failure() = get_op(lock_key);
    *request.add_failure() = range_op(permits.begin, permits.end);
    auto attempt = grant(std::move(request), key, owner_id, session_id, lease, HoldMode::kShared, 0,
                         shared_holder_key(key, session_id));
    if (attempt.handle) return attempt.handle;
    const auto& response = attempt.response;
    if (response.responses(0).response_range().kvs_size() == 0) {
      sessions_.forget(session_id);
      throw session_not_found(session_id);
    }
    if (response.responses(2).response_range().kvs_size() != 0 ||
        response.responses(3).response_range().kvs_size() != 0) {
      return std::nullopt;  // an exclusive or permit holder lives: a decision
    }
    if (delay_state_seen(response, 1)) {
      delays = settle_delays(client_, key);
      if (delays->delayed) return std::nullopt;  // a lock-delay runs
    }
  }
  throw ContentionError("lock " + std::string(key) + " changed during every attempt; retry");
}

std::optional<LockHandle> Holders::acquire_permit(std::string_view key, std::string_view owner_id,
                                                  std::string_view session_id, LockLease lease,
                                                  std::uint32_t limit) {
  const std::string lock_key = format_lock_key(key);
  const std::string record_key = session_record_key(session_id);
  const std::string index_key = session_holder_key(session_id, key);
  const KeyRange holders = holder_range(key);
  const KeyRange shared = shared_range(key);
  const KeyRange permits = permit_range(key);
  const KeyRange of_limit = permit_range_of_limit(key, limit);
  std::optional<DelayState> delays;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    // One snapshot: the lock key, every holder of the name, the session, its index entry.
    etcdserverpb::TxnRequest read;
    *read.add_success() = get_op(lock_key);
    *read.add_success() = range_op(holders.begin, holders.end);
    *read.add_success() = get_op(record_key);
    *read.add_success() = get_op(index_key);
    const auto seen = client_.txn(read, CallKind::kRead);
    if (seen.responses(2).response_range().kvs_size() == 0) {
      sessions_.forget(session_id);
      throw session_not_found(session_id);
    }
    if (seen.responses(0).response_range().kvs_size() != 0) return std::nullopt;  // exclusive
    const auto& entries = seen.responses(3).response_range();
    const mvccpb::KeyValue* own = nullptr;  // this session's holder of the name, if any
    std::string own_key;
    if (entries.kvs_size() != 0) own_key = decode_holder_entry(entries.kvs(0)).holder_key();
    std::set<std::uint32_t> taken;
    std::optional<std::uint32_t> own_slot;
    for (const auto& kv : seen.responses(1).response_range().kvs()) {
      const auto slot = parse_permit_slot(kv.key());
      if (!slot) return std::nullopt;  // a shared holder lives (even this session's: no switch)
      if (kv.key() == own_key && decode_grant(kv).session_id() == session_id) {
        own = &kv;
        if (slot->limit == limit) own_slot = slot->slot;
        continue;
      }
      if (slot->limit != limit) {
        throw ConflictError("limit", "semaphore " + std::string(key) + " has " +
                                         std::to_string(slot->limit) + " permits, not " +
                                         std::to_string(limit));
      }
      taken.insert(slot->slot);
    }
    std::uint32_t slot = 0;
    if (own_slot) {
      slot = *own_slot;  // a re-acquire keeps its slot: never a second permit
    } else {
      std::vector<std::uint32_t> free;
      for (std::uint32_t i = 0; i < limit; ++i) {
        if (!taken.contains(i)) free.push_back(i);
      }
      if (free.empty()) return std::nullopt;   // `limit` permits of other sessions live
      slot = free[random_index(free.size())];  // spread concurrent acquirers over the free slots
    }
    const std::string slot_key = permit_slot_key(key, limit, slot);
    // If(no lock key, session alive, no shared holder, no slot of another limit (but the
    // session's own), the slot absent or still the session's own, the session's index entry as
    // read) Then(delete the session's old slot of another limit, Put the slot).
    etcdserverpb::TxnRequest request;
    *request.add_compare() = compare_create_revision(lock_key, 0);
    *request.add_compare() = compare_exists(record_key);
    *request.add_compare() = compare_none_in(shared.begin, shared.end);
    const std::string* except = own != nullptr ? &own->key() : nullptr;
    add_none_in_except(request, permits.begin, of_limit.begin, except);
    add_none_in_except(request, of_limit.end, permits.end, except);
    if (own_slot) {
      *request.add_compare() = compare_mod_revision(slot_key, own->mod_revision());
    } else {
      *request.add_compare() = compare_create_revision(slot_key, 0);
      if (own != nullptr) {
        *request.add_compare() = compare_mod_revision(own->key(), own->mod_revision());
        *request.add_success() = delete_op_with_prev(own->key());
        add_marker_delete(request, key, own->key(), sessions_.cached_lock_delay(session_id));
      }
    }
    *request.add_compare() = entries.kvs_size() != 0
                                 ? compare_mod_revision(index_key, entries.kvs(0).mod_revision())
                                 : compare_create_revision(index_key, 0);
    add_delay_guard(request, key, delays ? &*delays : nullptr);  // etcd_delays.h
    add_delay_state_read(request, key);
    auto granted = grant(std::move(request), key, owner_id, session_id, lease, HoldMode::kPermit,
                         limit, slot_key);
    if (granted.handle) return granted.handle;
    if (delay_state_seen(granted.response, 0)) {
      delays = settle_delays(client_, key);
      if (delays->delayed) return std::nullopt;  // a lock-delay runs
    }
    // Lost a race (the slot was taken, a holder came or went): look again.
  }
  throw ContentionError("semaphore " + std::string(key) + " changed during every attempt; retry");
}

Holders::Attempt Holders::grant(etcdserverpb::TxnRequest request, std::string_view key,
                                std::string_view owner_id, std::string_view session_id,
                                LockLease lease, HoldMode mode, std::uint32_t limit,
                                const std::string& holder_key) {
  const std::string index_key = session_holder_key(session_id, key);
  const auto add_puts = [&](std::int64_t lease_id, WallClock::time_point now,
                            WallClock::time_point expiry) {
    auto put =
        put_op(holder_key,
               encode_holder(owner_id, session_id, now, expiry, lease.session_bound(), mode, limit),
               lease_id);
    put.mutable_request_put()->set_prev_kv(true);  // a replaced holder's lease, to recycle
    *request.add_success() = std::move(put);
    // The index entry names the holder key, so close_session and the reaper find it.
    *request.add_success() = put_op(index_key, encode_holder_entry(owner_id, holder_key), lease_id);
  };
  Attempt attempt;
  std::int64_t used_lease = 0;
  const auto record = sessions_.lookup(session_id);
  if (!record) throw session_not_found(session_id);
  add_marker_put(request, key, holder_key, std::chrono::milliseconds(record->lock_delay_ms()));
  if (lease.session_bound()) {
    const auto session = sessions_.live(session_id);
    const auto until = session.until;
    used_lease = session.record.lease_id();
    add_puts(used_lease, wall_now(), wall_at(until));
    try {
      attempt.response = client_.txn(request, CallKind::kWrite);
    } catch (const SessionNotFoundError&) {
      sessions_.forget(session_id);  // its lease ended: nothing was written
      throw session_not_found(session_id);
    }
    if (!attempt.response.succeeded()) return attempt;
    attempt.handle = LockHandle{std::string(key),
                                std::string(owner_id),
                                std::string(session_id),
                                static_cast<FencingToken>(attempt.response.header().revision()),
                                until,
                                wall_at(until),
                                true,
                                mode};
  } else {
    const auto ttl = lease.ttl();
    GrantLease granted = leases_.lease_for(ttl);
    used_lease = granted.id;
    add_puts(used_lease, granted.wall_from, granted.wall_from + ttl);
    attempt.response = leases_.txn_on(granted, request);
    if (!attempt.response.succeeded()) {
      leases_.recycle_unused(granted);
      return attempt;
    }
    const auto believed = leases_.believed_ttl(granted, ttl);
    if (!believed) {
      throw ContentionError("holder of " + std::string(key) +
                            ": the lease of the grant ended at once, and the grant with it; retry");
    }
    attempt.handle = LockHandle{std::string(key),
                                std::string(owner_id),
                                std::string(session_id),
                                static_cast<FencingToken>(attempt.response.header().revision()),
                                granted.counting_from + *believed,
                                granted.wall_from + *believed,
                                false,
                                mode};
  }
  // A replaced holder (re-acquire) leaves its grant lease holding nothing.
  for (const auto& op : attempt.response.responses()) {
    if (op.has_response_put() && op.response_put().has_prev_kv() &&
        op.response_put().prev_kv().lease() != used_lease) {
      leases_.recycle_lease(op.response_put().prev_kv());
    }
    for (const auto& kv : op.response_delete_range().prev_kvs()) leases_.recycle_lease(kv);
  }
  return attempt;
}

std::vector<mvccpb::KeyValue> Holders::read(std::string_view key) {
  const KeyRange holders = holder_range(key);
  etcdserverpb::TxnRequest request;
  *request.add_success() = get_op(format_lock_key(key));
  *request.add_success() = range_op(holders.begin, holders.end);
  const auto response = client_.txn(request, CallKind::kRead);
  std::vector<mvccpb::KeyValue> found;
  for (const auto& kv : response.responses(0).response_range().kvs()) found.push_back(kv);
  const auto first_holder = found.size();
  for (const auto& kv : response.responses(1).response_range().kvs()) found.push_back(kv);
  std::sort(found.begin() + static_cast<std::ptrdiff_t>(first_holder), found.end(),
            [](const auto& a, const auto& b) { return a.mod_revision() < b.mod_revision(); });
  return found;
}

void Holders::add_holder_reads(etcdserverpb::TxnRequest& request, std::string_view key,
                               std::string_view session_id) {
  const KeyRange holders = holder_range(key);
  *request.add_success() = get_op(session_holder_key(session_id, key));
  *request.add_success() = range_op(holders.begin, holders.end);
}

std::optional<mvccpb::KeyValue> Holders::holder_in(const etcdserverpb::TxnResponse& response,
                                                   int first, std::string_view owner_id,
                                                   std::string_view session_id,
                                                   FencingToken token) {
  const auto& entries = response.responses(first).response_range();
  if (entries.kvs_size() == 0) return std::nullopt;
  const HolderEntry entry = decode_holder_entry(entries.kvs(0));
  if (entry.owner_id() != owner_id) return std::nullopt;
  for (const auto& kv : response.responses(first + 1).response_range().kvs()) {
    if (kv.key() == entry.holder_key() && kv.mod_revision() == static_cast<std::int64_t>(token) &&
        decode_grant(kv).session_id() == session_id) {
      return kv;
    }
  }
  return std::nullopt;
}

bool Holders::release(std::string_view owner_id, FencingToken token,
                      const mvccpb::KeyValue& entry) {
  const HolderEntry holder = decode_holder_entry(entry);
  if (holder.owner_id() != owner_id) return false;
  // The holder key's revision is the token; its index entry was written by the same Txn.
  etcdserverpb::TxnRequest request;
  *request.add_compare() =
      compare_mod_revision(holder.holder_key(), static_cast<std::int64_t>(token));
  *request.add_compare() = compare_mod_revision(entry.key(), static_cast<std::int64_t>(token));
  *request.add_success() = delete_op_with_prev(holder.holder_key());
  *request.add_success() = delete_op(entry.key());
  // A release ends the holder cleanly: its lock-delay marker goes with it (etcd_delays.h).
  if (const auto parts = parse_session_key(entry.key())) {
    add_marker_delete(request, parts->lock_key, holder.holder_key(),
                      sessions_.cached_lock_delay(parts->session_id));
  }
  const auto response = client_.txn(request, CallKind::kWrite);
  if (!response.succeeded()) return false;
  for (const auto& kv : response.responses(0).response_delete_range().prev_kvs()) {
    leases_.recycle_lease(kv);  // it held this holder key and its index entry, both gone
  }
  return true;
}

LockOutcome Holders::revoke(std::string_view key) {
  // One Txn: the lock key and every holder of the key (docs/adr/0020).
  const KeyRange holders = holder_range(key);
  etcdserverpb::TxnRequest request;
  *request.add_success() = delete_op_with_prev(format_lock_key(key));
  *request.add_success() = delete_range_op_with_prev(holders.begin, holders.end);
  // And their lock-delay markers become delays in the same Txn (etcd_delays.h).
  const auto response = revoke_with_delays(client_, key, request);
  LockOutcome outcome;
  for (const auto& op : response.responses()) {
    for (const auto& kv : op.response_delete_range().prev_kvs()) {
      // The outcome names the revoked grant with the greatest token.
      // (A proclaimed leader's record keeps its token, docs/adr/0020.)
      const auto token = static_cast<FencingToken>(token_of(kv));
      if (!outcome.fencing_token || token > *outcome.fencing_token) {
        outcome.fencing_token = token;
        outcome.owner_id = decode_grant(kv).owner_id();
      }
      outcome.revoked = true;
      remove_index_of(key, kv);
    }
  }
  return outcome;
}

void Holders::remove_index_of(std::string_view key, const mvccpb::KeyValue& kv) {
  const GrantRecord record = decode_grant(kv);
  if (!record.session_bound()) {
    leases_.revoke_lease(kv.lease());  // takes the grant's session index entry with it
    return;
  }
  // Its lease is its session's, which lives on: remove the index entry instead.
  const std::string index_key = parse_lock_key(kv.key())
                                    ? session_lock_key(record.session_id(), key)
                                    : session_holder_key(record.session_id(), key);
  etcdserverpb::TxnRequest remove;
  *remove.add_compare() = compare_mod_revision(index_key, token_of(kv, record));
  *remove.add_success() = delete_op(index_key);
  client_.txn(remove, CallKind::kWrite);
}

}  // namespace dlock::store::etcd
