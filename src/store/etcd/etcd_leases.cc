#include "store/etcd/etcd_leases.h"

#include <algorithm>
#include <utility>

#include "dlock/errors.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Bound on the empty grant leases kept for reuse (see LeasePool).
constexpr std::size_t kMaxPooledLeases = 1024;
// Bound on the leases whose minimum remaining life the store remembers (see LeaseBook): above
// server.max.sessions' default (100 000, C5), as the session cache's bound (etcd_sessions.cc), so
// that the session leases of a full dlockd stay booked (a miss costs a LeaseTimeToLive read).
constexpr std::size_t kMaxBookedLeases = 262144;
// A pooled lease is renewed in parallel with the granting Txn only when it is known to live at
// least this long past the Txn's own deadline.
constexpr milliseconds kParallelRenewalMargin{1000};

// The lock TTL a grant record was written with (its expiry minus its grant time), in the lease
// seconds of that grant.
std::int64_t lease_seconds_of(const GrantRecord& record) {
  const std::int64_t ttl_us = record.server_expiry_us() - record.acquired_at_us();
  return ttl_us <= 0 ? 0 : lease_seconds(milliseconds((ttl_us + 999) / 1000));
}

}  // namespace

void LeaseBook::note(std::int64_t lease_id, SteadyClock::time_point alive_until) {
  std::lock_guard lock(mutex_);
  if (until_.size() >= kMaxBookedLeases && !until_.contains(lease_id)) {
    const auto now = SteadyClock::now();
    std::erase_if(until_, [&](const auto& entry) { return entry.second < now; });
    if (until_.size() >= kMaxBookedLeases) until_.clear();
  }
  auto& until = until_[lease_id];
  until = std::max(until, alive_until);
}

std::optional<SteadyClock::time_point> LeaseBook::peek(std::int64_t lease_id) {
  std::lock_guard lock(mutex_);
  const auto found = until_.find(lease_id);
  if (found == until_.end()) return std::nullopt;
  return found->second;
}

std::optional<SteadyClock::time_point> LeaseBook::take(std::int64_t lease_id) {
  std::lock_guard lock(mutex_);
  const auto found = until_.find(lease_id);
  if (found == until_.end()) return std::nullopt;
  const auto until = found->second;
  until_.erase(found);
  return until;
}

bool LeasePool::give(std::int64_t ttl_seconds, std::int64_t lease_id,
                     std::optional<SteadyClock::time_point> alive_until) {
  std::lock_guard lock(mutex_);
  if (size_ >= kMaxPooledLeases) return false;
  free_[ttl_seconds].push_back(Entry{lease_id, SteadyClock::now(), alive_until});
  ++size_;
  return true;
}

std::optional<LeasePool::Entry> LeasePool::take(std::int64_t ttl_seconds) {
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

GrantLease GrantLeases::lease_for(milliseconds ttl) {
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
                        client_.keep_alive_stream(pooled->lease_id)
                            .start(pooled->lease_id, counting_from + client_.call_timeout())};
    }
    std::int64_t renewed = 0;
    try {
      renewed = client_.lease_keep_alive(pooled->lease_id, pooled->alive_until);
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

etcdserverpb::TxnResponse GrantLeases::txn_on(GrantLease& grant,
                                              const etcdserverpb::TxnRequest& request) {
  const auto abandon_renewal = [&] {
    if (grant.renewal) {
      client_.keep_alive_stream(grant.renewal->lease_id).abandon(*grant.renewal);
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

std::optional<milliseconds> GrantLeases::settle(GrantLease& grant) {
  if (grant.renewal) {
    std::int64_t renewed = -1;
    try {
      renewed = client_.keep_alive_stream(grant.renewal->lease_id)
                    .finish(*grant.renewal, SteadyClock::now() + client_.call_timeout());
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

std::optional<milliseconds> GrantLeases::believed_ttl(GrantLease& grant, milliseconds ttl) {
  const auto known = settle(grant);
  if (!known) return std::nullopt;
  book_.note(grant.id, grant.alive_until);
  // Normally the whole TTL; less only if a parallel renewal went unanswered.
  return std::min(ttl, *known);
}

void GrantLeases::recycle_unused(GrantLease& grant) {
  if (!settle(grant)) return;  // gone
  recycle_lease(grant.id, grant.seconds, grant.alive_until);
}

void GrantLeases::recycle_lease(const mvccpb::KeyValue& released) {
  if (released.lease() == 0) return;
  std::int64_t ttl_seconds = 0;
  try {
    const GrantRecord record = decode_grant(released);
    // A session-bound grant's lease is its session's: never pooled, never revoked from here.
    if (record.session_bound()) return;
    ttl_seconds = lease_seconds_of(record);
  } catch (const Error&) {
  }
  recycle_lease(released.lease(), ttl_seconds, book_.take(released.lease()));
}

void GrantLeases::recycle_lease(std::int64_t lease_id, std::int64_t ttl_seconds,
                                std::optional<SteadyClock::time_point> alive_until) {
  if (lease_id == 0) return;
  if (ttl_seconds > 0 && leases_.give(ttl_seconds, lease_id, alive_until)) return;
  revoke_lease(lease_id);
}

void GrantLeases::revoke_lease(std::int64_t lease_id) {
  if (lease_id == 0) return;
  book_.take(lease_id);
  try {
    client_.lease_revoke(lease_id);
  } catch (const Error&) {
  }
}

}  // namespace dlock::store::etcd
