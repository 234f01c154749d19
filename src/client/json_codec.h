#pragma once

// Decoding C3 response bodies and RFC 3339 timestamps. A body that does not have the promised
// shape is an InternalError: the server (or whatever answered) broke the contract.

#include <boost/json/object.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "dlock/client.h"
#include "dlock/types.h"

namespace dlock::client::detail {

// "2024-05-01T12:00:00Z", "2024-05-01T12:00:00.250+02:00". Throws InternalError.
WallClock::time_point parse_rfc3339(std::string_view text);
// UTC with millisecond precision: "2024-05-01T10:00:00.250Z".
std::string format_rfc3339(WallClock::time_point time);

boost::json::object parse_object(std::string_view body, const std::string& what);

std::string string_member(const boost::json::object& object, std::string_view name,
                          bool required = true);
// An unsigned 64-bit JSON number (tokens may exceed 2^53; a double would lose digits).
std::uint64_t uint_member(const boost::json::object& object, std::string_view name);
std::chrono::milliseconds millis_member(const boost::json::object& object, std::string_view name);
// Missing or null -> epoch (the field is informational).
WallClock::time_point time_member(const boost::json::object& object, std::string_view name);

// "mode": "exclusive", "shared" or "permit"; missing or null -> `fallback` (a server that
// predates modes). Anything else: InternalError.
HoldMode mode_member(const boost::json::object& object, HoldMode fallback);
// "limit" (a semaphore's number of permits, 1..2^32-1); missing or null -> `fallback`.
std::uint32_t limit_member(const boost::json::object& object, std::uint32_t fallback);

SessionInfo decode_session(const boost::json::object& object);
LockInfo decode_lock_info(const boost::json::object& object);
LockOutcome decode_outcome(const boost::json::object& object);
// An election read or campaign answer: {"name", "leader": {"owner", "value"}, "fencing_token",
// "acquired_at"?, "expires_at"?, "session_id"?}; `name` when the answer names none.
client::LeaderInfo decode_leader_info(const boost::json::object& object, const std::string& name);

}  // namespace dlock::client::detail
