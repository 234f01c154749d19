#pragma once

// The session half of the etcd store (docs/adr/0006-etcd-store.md): a session is an etcd lease
// carrying the session's record; its grants are found through their index entries.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
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

  SessionInfo open(std::string_view owner_id, std::chrono::milliseconds ttl);
  SessionInfo heartbeat(std::string_view session_id);
  std::optional<SessionInfo> get(std::string_view session_id);
  std::vector<LockInfo> close(std::string_view session_id);
  // Ends the grants whose session ended first (their own leases would keep them).
  ReapReport reap_expired();

 private:
  std::optional<SessionRecord> read_record(std::int64_t lease);

  EtcdClient& client_;
  GrantLeases& leases_;
  const TtlLimits limits_;
};

}  // namespace dlock::store::etcd
