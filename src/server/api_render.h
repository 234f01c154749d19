#pragma once

// How the API handlers render grants and locks as JSON (contract C3): the answered lifetime
// (ADR-0011), the lease and mode, and what a caller may see of another's lock (C6).

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "auth/token_table.h"
#include "dlock/types.h"
#include "server/http_server.h"

namespace dlock::server {

// The lifetime answered for a grant (C3, docs/adr/0011-honest-lock-lifetimes.md): never more
// than was asked, and never more than the store says the lock is certain to live, counted from
// when this request arrived. A client counts it from its send time, which is earlier, so the
// deadline it computes is one the backend keeps -- even where the backend kept less than asked
// (an etcd lease renews for its first TTL, whatever an extend asks).
// A session-bound grant asked for no TTL: its lifetime is its session's (ADR-0018).
std::chrono::milliseconds honoured_ttl(const LockHandle& handle, std::chrono::milliseconds asked,
                                       SteadyClock::time_point received);

// A stored "<ns>/<key>" as the API shows it.
std::string api_key(const std::string& stored);

// A grant as its holder sees it. `limit`: a permit's semaphore size (0 for a lock), answered as
// "limit".
boost::json::object handle_json(const LockHandle& handle, std::chrono::milliseconds asked,
                                SteadyClock::time_point received, bool auth_enabled,
                                std::uint32_t limit = 0);

// A lock as `caller` may see it: session_id only for its own session or with admin on the
// namespace (C6).
boost::json::object info_json(const LockInfo& info, const auth::Principal* caller,
                              bool auth_enabled);

// An election's leader as its holder sees it (campaign, proclaim; C3 "Elections"): "name",
// "leader" {"owner", "value"}, the token, the session, the session's lifetime.
boost::json::object leader_json(const LockHandle& handle, const std::string& value,
                                SteadyClock::time_point received, bool auth_enabled);
// The same for a read (GET /v1/elections/{name}): session_id as info_json shows it.
boost::json::object leader_info_json(const LockInfo& info, const auth::Principal* caller,
                                     bool auth_enabled);

Response ok(unsigned status, const boost::json::object& body);
Response no_content();

}  // namespace dlock::server
