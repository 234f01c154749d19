#pragma once

// The one place the store SPI's arguments are checked (lock_store.h, "Who checks what"): a
// BackendWrapper that checks every argument of a call once, with the checks of validate.h, and
// forwards the call only when all pass. Each make_*_store returns its store wrapped in one, so
// no store is reached with an argument of the wrong shape or out of the store's TtlLimits, and
// every store refuses the same arguments naming the same field.

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/lock_store.h"
#include "util/backend_wrapper.h"

namespace dlock::util {

class ValidatingBackend final : public BackendWrapper {
 public:
  // `limits`: the target's TTL and lock-delay bounds (its options' TtlLimits).
  ValidatingBackend(BackendPtr target, const TtlLimits& limits)
      : BackendWrapper(std::move(target)), limits_(limits) {}

  // Checked: key, owner, session_id, the lease's TTL ("ttl_ms"), a permit's limit ("limit"), a
  // leader's value ("value").
  std::optional<LockHandle> try_grant(std::string_view key, std::string_view owner_id,
                                      std::string_view session_id,
                                      const GrantRequest& request) override;
  // The grant reference's key, owner and session_id, then the value.
  LockInfo proclaim(const GrantRef& grant, std::string_view value) override;
  std::vector<LockInfo> read_holders(std::string_view key) override;
  std::optional<LockInfo> read(std::string_view key) override;
  bool clear_delay(std::string_view key) override;
  // The grant reference, then the TTL ("ttl_ms"; checked for a session-bound grant too).
  LockHandle extend(const GrantRef& grant, std::chrono::milliseconds ttl) override;
  bool delete_if_owner(const GrantRef& grant) override;
  // The grant reference, the next owner ("owner") and session ("session_id"), the lease's TTL.
  std::optional<LockHandle> handover(const GrantRef& from, std::string_view next_owner_id,
                                     std::string_view next_session_id, LockLease lease) override;
  LockOutcome revoke(std::string_view key) override;
  ReleaseSubscriptionPtr watch_releases(std::string_view key, ReleaseCallback on_released) override;

  using SessionRegistry::open_session;
  // owner, the TTL ("ttl_ms"), the lock-delay ("lock_delay_ms").
  SessionInfo open_session(std::string_view owner_id, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds lock_delay) override;
  SessionInfo heartbeat(std::string_view session_id) override;
  // A session_id heartbeat would refuse: false (nothing started), so the caller's heartbeat
  // throws the error.
  bool try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) override;
  std::optional<SessionInfo> get_session(std::string_view session_id) override;
  std::vector<LockInfo> session_grants(std::string_view session_id) override;
  std::vector<LockInfo> close_session(std::string_view session_id) override;

  // Not checked, forwarded as they are: list, list_delays and list_sessions (any prefix, any
  // cursor and any page size are a valid question), reap_expired and backend_id (no arguments).

 private:
  const TtlLimits limits_;
};

}  // namespace dlock::util
