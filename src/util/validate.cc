#include "util/validate.h"

#include <string>

#include "dlock/lock_store.h"
#include "util/limits.h"

namespace dlock {

void check_ttl(std::chrono::milliseconds ttl, const TtlLimits& limits, const char* field) {
  if (ttl < limits.min_ttl || ttl > limits.max_ttl) {
    throw InvalidArgumentError(field, std::string(field) + " must be between " +
                                          std::to_string(limits.min_ttl.count()) + " and " +
                                          std::to_string(limits.max_ttl.count()) +
                                          " milliseconds, got " + std::to_string(ttl.count()));
  }
}

void check_lease(const LockLease& lease, const TtlLimits& limits) {
  if (!lease.session_bound()) check_ttl(lease.ttl(), limits, "ttl_ms");
}

void check_lock_delay(std::chrono::milliseconds delay, const TtlLimits& limits) {
  if (delay.count() < 0 || delay > limits.max_lock_delay) {
    throw InvalidArgumentError("lock_delay_ms", "lock_delay_ms must be between 0 and " +
                                                    std::to_string(limits.max_lock_delay.count()) +
                                                    " milliseconds (lock.max.delay), got " +
                                                    std::to_string(delay.count()));
  }
}

namespace util {
namespace {

constexpr std::size_t kMaxFieldBytes = limits::kMaxStoreFieldBytes;

bool valid_field(std::string_view value) {
  return !value.empty() && value.size() <= kMaxFieldBytes;
}

void check_field(std::string_view value, const char* field) {
  if (value.empty()) {
    throw InvalidArgumentError(field, std::string(field) + " must not be empty");
  }
  if (value.size() > kMaxFieldBytes) {
    throw InvalidArgumentError(field, std::string(field) + " must be at most " +
                                          std::to_string(kMaxFieldBytes) + " bytes");
  }
}

}  // namespace

void check_key(std::string_view key) { check_field(key, "key"); }
void check_owner(std::string_view owner_id) { check_field(owner_id, "owner"); }
void check_session_id(std::string_view session_id) { check_field(session_id, "session_id"); }
bool valid_session_id(std::string_view session_id) { return valid_field(session_id); }

void check_grant_ref(const GrantRef& grant) {
  check_key(grant.key);
  check_owner(grant.owner_id);
  check_session_id(grant.session_id);
}

void check_holder_inputs(std::string_view key, std::string_view owner_id,
                         std::string_view session_id, const TtlLimits& limits,
                         const GrantRequest& request) {
  check_key(key);
  check_owner(owner_id);
  check_session_id(session_id);
  check_lease(request.lease(), limits);
  check_hold_request(request);
}

void check_hold_request(const GrantRequest& request) {
  if (request.kind() != GrantRequest::Kind::kPermit) return;
  if (request.limit() < 1 || request.limit() > limits::kMaxSemaphoreLimit) {
    throw InvalidArgumentError("limit", "limit must be between 1 and " +
                                            std::to_string(limits::kMaxSemaphoreLimit) + ", got " +
                                            std::to_string(request.limit()));
  }
}

void check_leader_value(std::string_view value) {
  if (value.empty()) throw InvalidArgumentError("value", "value must not be empty");
  if (value.size() > limits::kMaxLeaderValueBytes) {
    throw InvalidArgumentError(
        "value",
        "value must be at most " + std::to_string(limits::kMaxLeaderValueBytes) + " bytes");
  }
  if (value.find('\0') != std::string_view::npos) {
    throw InvalidArgumentError("value", "value must not contain a NUL byte");
  }
}

}  // namespace util
}  // namespace dlock
