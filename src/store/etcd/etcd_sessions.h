#pragma once

// The session half of the etcd store (docs/adr/0006-etcd-store.md): a session is an etcd lease
// carrying the session's record, /dlock/_sessions/<id>. The ID is 128 random bits (C2), never
// the lease ID; the record, put on the lease, maps it to the lease and dies with it. Every
// dlockd sharing the etcd resolves an ID through the record; each caches what it resolved.
// A session's grants are found through their index entries.

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dlock/errors.h"
#include "dlock/lock_store.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_leases.h"
#include "store/etcd/etcd_records.h"

namespace dlock::store::etcd {

SessionNotFoundError session_not_found(std::string_view session_id);

class Sessions {
 public:
  Sessions(EtcdClient& client, GrantLeases& leases, const TtlLimits& limits)
      : client_(client), leases_(leases), limits_(limits) {}
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  SessionInfo open(std::string_view owner_id, std::chrono::milliseconds ttl,
                   std::chrono::milliseconds lock_delay);
  SessionInfo heartbeat(std::string_view session_id);
  std::optional<SessionInfo> get(std::string_view session_id);
  std::vector<LockInfo> close(std::string_view session_id);
  // Ends the grants whose session ended first (their own leases would keep them).
  ReapReport reap_expired();

  // The record of `session_id` (its owner, TTL and lease): from the cache, else from etcd.
  // std::nullopt when there is none (never opened, closed or expired).
  std::optional<SessionRecord> lookup(std::string_view session_id);
  // The lock-delay of `session_id` as far as this store knows without asking etcd: std::nullopt
  // when the session is not cached (a caller that must not miss a marker then assumes one).
  std::optional<std::chrono::milliseconds> cached_lock_delay(std::string_view session_id);
  // Evidence that the session ended: drop it from the cache.
  void forget(std::string_view session_id);
  // Until when the session's lease (and every session-bound grant on it) is certain to live: as
  // noted by an open or heartbeat through this store, else asked of etcd (whole seconds, rounded
  // down). std::nullopt when the lease is gone.
  std::optional<SteadyClock::time_point> alive_until(const SessionRecord& record);
  // For a session-bound grant: the live session's record and alive_until; SessionNotFoundError
  // when it is gone.
  struct LiveSession {
    SessionRecord record;
    SteadyClock::time_point until;
  };
  LiveSession live(std::string_view session_id);

 private:
  void remember(const std::string& session_id, const SessionRecord& record);
  // The session-bound grants of `record`'s session, read before its lease is revoked.
  std::vector<LockInfo> session_bound_grants(std::string_view session_id,
                                             const SessionRecord& record);

  EtcdClient& client_;
  GrantLeases& leases_;
  const TtlLimits limits_;
  std::mutex cache_mutex_;
  // Session ID -> its record. A record never changes while its lease lives, and a lease found
  // gone evicts it; bounded (one entry dropped when full), a miss only costs one Range.
  std::unordered_map<std::string, SessionRecord> cache_;
};

}  // namespace dlock::store::etcd
