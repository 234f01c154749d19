#pragma once

// Holder sets on etcd (docs/adr/0020-more-primitives-design.md): shared holders and permit
// holders of a name, next to its exclusive lock key. Each holder is a key of its own under the
// name's holder range (etcd_keys.h) on its grant lease (ADR-0009) or, session-bound, on its
// session's lease (ADR-0018); its fencing token is the revision of the Txn that granted it, as for
// a lock. Every grant is one guarded Txn:
// - shared: lock key absent, no permit slot of the name, session alive -> Put the session's
//   shared key (a Put moves its mod revision: a re-acquire gets a new, greater token);
// - permit of L: a read shows the free slots of L, then one Txn guarded by the slot being absent
//   (or still the session's own), the lock key absent, no shared holder, no slot of another
//   limit and the session having no other holder of the name -> Put the slot; a lost race tries
//   again, no free slot is "held".
// The exclusive grant's Txn (etcd_store.cc, etcd_session_bound.cc) guards on the whole holder
// range being empty: one range compare.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_sessions.h"

namespace dlock::store::etcd {

class Holders {
 public:
  Holders(EtcdClient& client, GrantLeases& leases, Sessions& sessions)
      : client_(client), leases_(leases), sessions_(sessions) {}
  Holders(const Holders&) = delete;
  Holders& operator=(const Holders&) = delete;

  // LockStore::try_grant of a shared or permit holder; every argument already checked.
  std::optional<LockHandle> acquire(std::string_view key, std::string_view owner_id,
                                    std::string_view session_id, const GrantRequest& request);
  // The holder keys of `key` in one snapshot with its lock key (first, when it exists).
  std::vector<mvccpb::KeyValue> read(std::string_view key);
  // The reads that find the holder of `key` that `session_id` holds (its session index entry,
  // then the key's holder range), appended to `request`'s success operations; holder_in picks the
  // holder (key, owner, session, token) from their answers, which start at `first`, else
  // std::nullopt.
  static void add_holder_reads(etcdserverpb::TxnRequest& request, std::string_view key,
                               std::string_view session_id);
  static std::optional<mvccpb::KeyValue> holder_in(const etcdserverpb::TxnResponse& response,
                                                   int first, std::string_view owner_id,
                                                   std::string_view session_id, FencingToken token);
  // LockStore::delete_if_owner of a holder whose session index entry `entry` was read (it names
  // the holder key). False when it is not the live holder (key, owner, session, token).
  bool release(std::string_view owner_id, FencingToken token, const mvccpb::KeyValue& entry);
  // LockStore::revoke: the lock key and every holder of `key`, in one Txn.
  LockOutcome revoke(std::string_view key);

 private:
  std::optional<LockHandle> acquire_shared(std::string_view key, std::string_view owner_id,
                                           std::string_view session_id, LockLease lease);
  std::optional<LockHandle> acquire_permit(std::string_view key, std::string_view owner_id,
                                           std::string_view session_id, LockLease lease,
                                           std::uint32_t limit);
  // The granting Txn on the lease of `lease` (a grant lease, or the session's): `request` (the
  // caller's compares and failure reads) plus the Puts of the holder key `holder_key` and the
  // session's index entry. `handle` is empty when a compare failed (nothing written).
  struct Attempt {
    etcdserverpb::TxnResponse response;
    std::optional<LockHandle> handle;
  };
  Attempt grant(etcdserverpb::TxnRequest request, std::string_view key, std::string_view owner_id,
                std::string_view session_id, LockLease lease, HoldMode mode, std::uint32_t limit,
                const std::string& holder_key);

  // After a revoke deleted `kv` (a lock or holder key of `key`): its session index entry goes
  // with its grant lease, or alone when the grant was on its session's lease.
  void remove_index_of(std::string_view key, const mvccpb::KeyValue& kv);

  EtcdClient& client_;
  GrantLeases& leases_;
  Sessions& sessions_;
};

}  // namespace dlock::store::etcd
