#pragma once

// Session-bound grants on etcd (docs/adr/0018-session-bound-locks.md): the lock key and its
// session index entry go on the *session's* lease in the one granting Txn, guarded by
// CreateRevision(lock) == 0 and the session record's existence. No grant lease, no pool, no
// keep-alive: the grant lives exactly as long as the session's lease. The token is the granting
// Txn's header revision, as for TTL grants (etcd_store.cc).

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "dlock/types.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_sessions.h"
#include "store/etcd/etcd_watch.h"

namespace dlock::store::etcd {

class SessionBoundGrants {
 public:
  SessionBoundGrants(EtcdClient& client, GrantLeases& leases, Sessions& sessions,
                     ReleaseWatches& watches,
                     std::function<void(std::string_view)> after_grant_for_test)
      : client_(client),
        leases_(leases),
        sessions_(sessions),
        watches_(watches),
        after_grant_for_test_(std::move(after_grant_for_test)) {}
  SessionBoundGrants(const SessionBoundGrants&) = delete;
  SessionBoundGrants& operator=(const SessionBoundGrants&) = delete;

  // LockStore::try_grant of an exclusive grant with LockLease::session(); `key` already checked.
  // With `leader_value`, of a leader (docs/adr/0020): the grant carries it.
  std::optional<LockHandle> acquire(std::string_view key, std::string_view owner_id,
                                    std::string_view session_id,
                                    std::optional<std::string_view> leader_value = std::nullopt);
  // LockStore::extend of a session-bound grant whose key is `etcd_key` (its lock key, or its
  // holder key): a checked no-op (LockLostError when not live). `mod_revision` is the key's as
  // last seen, when a proclaim moved it off the token (docs/adr/0020); 0 = the token.
  LockHandle extend(const GrantRef& grant, const std::string& etcd_key,
                    std::int64_t mod_revision = 0);
  // LockStore::handover to a session-bound grant of the next session. std::nullopt when the next
  // session is gone (`from` is then untouched: the caller releases it); LockLostError when
  // `from` is not the live grant. `mod_revision` as for extend.
  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id,
                                     std::int64_t mod_revision = 0);

 private:
  EtcdClient& client_;
  GrantLeases& leases_;
  Sessions& sessions_;
  ReleaseWatches& watches_;
  const std::function<void(std::string_view)> after_grant_for_test_;
};

}  // namespace dlock::store::etcd
