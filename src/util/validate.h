#pragma once

#include <string_view>

#include "dlock/lock_store.h"

namespace dlock::util {

// The checks of the store SPI's arguments, applied once for every store by ValidatingBackend
// (validating_backend.h); each throws InvalidArgumentError naming the field. The server applies
// stricter, documented limits (length, character set) first.
void check_key(std::string_view key);
void check_owner(std::string_view owner_id);
void check_session_id(std::string_view session_id);
// Whether check_session_id would pass.
bool valid_session_id(std::string_view session_id);
// A grant reference's key ("key"), owner ("owner") and session ("session_id"). Its token is not
// checked: a token no grant has (0 among them) names no live grant, which each operation answers.
void check_grant_ref(const GrantRef& grant);
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
