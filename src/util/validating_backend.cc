#include "util/validating_backend.h"

#include <functional>
#include <utility>

#include "util/validate.h"

namespace dlock::util {

std::optional<LockHandle> ValidatingBackend::try_grant(std::string_view key,
                                                       std::string_view owner_id,
                                                       std::string_view session_id,
                                                       const GrantRequest& request) {
  check_key(key);
  check_owner(owner_id);
  check_session_id(session_id);
  check_lease(request.lease(), limits_);
  check_hold_request(request);
  if (const auto value = request.leader_value()) check_leader_value(*value);
  return BackendWrapper::try_grant(key, owner_id, session_id, request);
}

LockInfo ValidatingBackend::proclaim(const GrantRef& grant, std::string_view value) {
  check_grant_ref(grant);
  check_leader_value(value);
  return BackendWrapper::proclaim(grant, value);
}

std::vector<LockInfo> ValidatingBackend::read_holders(std::string_view key) {
  check_key(key);
  return BackendWrapper::read_holders(key);
}

std::optional<LockInfo> ValidatingBackend::read(std::string_view key) {
  check_key(key);
  return BackendWrapper::read(key);
}

bool ValidatingBackend::clear_delay(std::string_view key) {
  check_key(key);
  return BackendWrapper::clear_delay(key);
}

LockHandle ValidatingBackend::extend(const GrantRef& grant, std::chrono::milliseconds ttl) {
  check_grant_ref(grant);
  check_ttl(ttl, limits_, "ttl_ms");
  return BackendWrapper::extend(grant, ttl);
}

bool ValidatingBackend::delete_if_owner(const GrantRef& grant) {
  check_grant_ref(grant);
  return BackendWrapper::delete_if_owner(grant);
}

std::optional<LockHandle> ValidatingBackend::handover(const GrantRef& from,
                                                      std::string_view next_owner_id,
                                                      std::string_view next_session_id,
                                                      LockLease lease) {
  check_grant_ref(from);
  check_owner(next_owner_id);
  check_session_id(next_session_id);
  check_lease(lease, limits_);
  return BackendWrapper::handover(from, next_owner_id, next_session_id, lease);
}

LockOutcome ValidatingBackend::revoke(std::string_view key) {
  check_key(key);
  return BackendWrapper::revoke(key);
}

ReleaseSubscriptionPtr ValidatingBackend::watch_releases(std::string_view key,
                                                         ReleaseCallback on_released) {
  check_key(key);
  return BackendWrapper::watch_releases(key, std::move(on_released));
}

SessionInfo ValidatingBackend::open_session(std::string_view owner_id,
                                            std::chrono::milliseconds ttl,
                                            std::chrono::milliseconds lock_delay) {
  check_owner(owner_id);
  check_ttl(ttl, limits_, "ttl_ms");
  check_lock_delay(lock_delay, limits_);
  return BackendWrapper::open_session(owner_id, ttl, lock_delay);
}

SessionInfo ValidatingBackend::heartbeat(std::string_view session_id) {
  check_session_id(session_id);
  return BackendWrapper::heartbeat(session_id);
}

bool ValidatingBackend::try_heartbeat_async(std::string_view session_id, HeartbeatDone& done) {
  if (!valid_session_id(session_id)) return false;
  return BackendWrapper::try_heartbeat_async(session_id, done);
}

std::optional<SessionInfo> ValidatingBackend::get_session(std::string_view session_id) {
  check_session_id(session_id);
  return BackendWrapper::get_session(session_id);
}

std::vector<LockInfo> ValidatingBackend::session_grants(std::string_view session_id) {
  check_session_id(session_id);
  return BackendWrapper::session_grants(session_id);
}

std::vector<LockInfo> ValidatingBackend::close_session(std::string_view session_id) {
  check_session_id(session_id);
  return BackendWrapper::close_session(session_id);
}

}  // namespace dlock::util
