#pragma once

#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::util {

// Input checks every store applies at its boundary; each throws InvalidArgumentError naming
// the field. The server applies stricter, documented limits (length, character set) first.
void check_key(std::string_view key);
void check_owner(std::string_view owner_id);
void check_session_id(std::string_view session_id);
// A permit request has a limit of 1..limits::kMaxSemaphoreLimit ("limit").
void check_hold_request(const GrantRequest& request);
// Every input of LockStore::try_grant for a shared or permit holder, in one place for every
// store: key, owner, session_id, the lease's TTL within `limits` ("ttl_ms"), and the request.
void check_holder_inputs(std::string_view key, std::string_view owner_id,
                         std::string_view session_id, const TtlLimits& limits,
                         const GrantRequest& request);

// A leader's value (LockStore::try_grant of a leader, proclaim): 1..limits::kMaxLeaderValueBytes
// bytes, no NUL ("value").
void check_leader_value(std::string_view value);

}  // namespace dlock::util
