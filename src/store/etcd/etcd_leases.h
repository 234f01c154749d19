#pragma once

// The leases grants go on (docs/adr/0009-etcd-grant-lease-pool.md). Every grant has a lease of
// its own, so a lock expires by itself; leases that hold nothing any more are pooled by TTL and
// reused (one keep-alive, no Raft write) instead of being revoked and granted anew. A pooled
// lease is only ever reported as living for as long as it is known to live.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "dlock/types.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/proto/kv.pb.h"

namespace dlock::store::etcd {

// etcd leases count whole seconds; rounding up keeps the lease at least as long as the TTL the
// client is told to believe.
inline std::int64_t lease_seconds(std::chrono::milliseconds ttl) {
  return (ttl.count() + 999) / 1000;
}

// The store's wall clock at the precision the records keep (microseconds), so a handle and the
// record it was written to report the same instants.
inline WallClock::time_point wall_now() {
  return std::chrono::floor<std::chrono::microseconds>(WallClock::now());
}

// For the leases this store granted or renewed: the instant each is certain to live until (the
// send time of its LeaseGrant or last keep-alive plus the TTL etcd answered). A lease it does
// not know (granted through another dlockd, or forgotten) is simply renewed before use.
class LeaseBook {
 public:
  void note(std::int64_t lease_id, SteadyClock::time_point alive_until);
  std::optional<SteadyClock::time_point> peek(std::int64_t lease_id);
  std::optional<SteadyClock::time_point> take(std::int64_t lease_id);

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
            std::optional<SteadyClock::time_point> alive_until);
  std::optional<Entry> take(std::int64_t ttl_seconds);

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

// The grant leases of one store: where each grant's lease comes from and where it goes when the
// grant ends.
class GrantLeases {
 public:
  explicit GrantLeases(EtcdClient& client) : client_(client) {}
  GrantLeases(const GrantLeases&) = delete;
  GrantLeases& operator=(const GrantLeases&) = delete;

  // A lease for a grant of `ttl`: a pooled one (renewed before, or in parallel with, the Txn),
  // else a new one.
  GrantLease lease_for(std::chrono::milliseconds ttl);
  // The granting Txn on `grant`'s lease; a failed call abandons a parallel renewal (the lease
  // is then simply left to expire).
  etcdserverpb::TxnResponse txn_on(GrantLease& grant, const etcdserverpb::TxnRequest& request);
  // A grant was made on `grant`: remember its lease's life and say how long the grant is
  // certain to be held from counting_from (at most `ttl`); std::nullopt when the lease is gone,
  // and the grant with it.
  std::optional<std::chrono::milliseconds> believed_ttl(GrantLease& grant,
                                                        std::chrono::milliseconds ttl);
  // The Txn made no grant on `grant`: its lease goes back to the pool.
  void recycle_unused(GrantLease& grant);
  // Leases that hold nothing any more go back to the pool (or are revoked when it is full).
  // `released` is the lock key as its grant ended; its lease must hold nothing else. A
  // session-bound grant's lease (its session's) is left alone.
  void recycle_lease(const mvccpb::KeyValue& released);
  // Best effort: a lease that is not revoked expires by itself after its TTL anyway.
  void revoke_lease(std::int64_t lease_id);

  // An extend renewed `lease_id`: it lives at least until `alive_until`.
  void note_renewed(std::int64_t lease_id, SteadyClock::time_point alive_until) {
    book_.note(lease_id, alive_until);
  }
  // Until when `lease_id` is known to live, if this store renewed or granted it.
  std::optional<SteadyClock::time_point> known_alive_until(std::int64_t lease_id) {
    return book_.peek(lease_id);
  }

 private:
  // After the Txn: waits for a parallel renewal. Returns how long past counting_from the lease is
  // certain to live, std::nullopt when the renewal found it gone (and with it any key put on it).
  std::optional<std::chrono::milliseconds> settle(GrantLease& grant);
  void recycle_lease(std::int64_t lease_id, std::int64_t ttl_seconds,
                     std::optional<SteadyClock::time_point> alive_until);

  EtcdClient& client_;
  LeasePool leases_;
  LeaseBook book_;
};

}  // namespace dlock::store::etcd
