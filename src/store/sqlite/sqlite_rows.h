#pragma once

// Reading grants out of, and binding leases into, the SQLite store's statements; shared by the
// exclusive path (sqlite_store.cc) and the holder sets (sqlite_holders.cc).

#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/types.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/store_clock.h"

namespace dlock::store::sqlite {

// "shared" -> kShared, "permit" -> kPermit, anything else -> kExclusive (GrantTable::mode).
HoldMode mode_from(const std::string& text);

// Every time read from a row is reported as the host's wall clock reads it (StoreClock::wall_time,
// C3 "Times"): `clock` is the store's.

// A LockInfo from a row of DLOCK_SQLITE_COLUMNS_IN's ten columns.
LockInfo lock_info_from(const Statement& row, const StoreClock& clock);

// The handle of a grant from a statement returning its expiry (column `expiry`) and the store's
// now (the next column): a session-bound grant's deadline is its session's, counted from `sent_at`.
LockHandle handle_from(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken token, const LockLease& lease, SteadyClock::time_point sent_at,
                       const Statement& row, int expiry, const StoreClock& clock,
                       HoldMode mode = HoldMode::kExclusive);

// A SessionInfo from a row of owner_id, ttl_ms, expires_at and lock_delay_ms.
SessionInfo session_from(std::string_view session_id, const Statement& row,
                         const StoreClock& clock);

// A TTL in ms for a TTL lease; a session-bound one leaves the parameter unbound (NULL).
void bind_lease(Statement& statement, int index, const LockLease& lease);

// The next token of the one durable counter (ADR-0004), inside the caller's write transaction.
FencingToken take_token(StatementCache& statements);

}  // namespace dlock::store::sqlite
