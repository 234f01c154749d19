#pragma once

// Holder sets on the SQLite store (docs/adr/0020-more-primitives-design.md): shared holders and
// semaphore permits live in `lock_holders` (migrations/003_holders.sql), one row per (name,
// session); the exclusive grant of a name stays in `locks`.

#include <optional>
#include <string>
#include <string_view>

#include "dlock/lock_store.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/store_clock.h"

namespace dlock::store::sqlite {

// LockStore::try_grant's decision and write for a shared or permit holder, run inside the store's
// write transaction (GroupCommit): SQLite has one writer at a time, so what it reads there cannot
// change before it writes. std::nullopt: held (nothing written). Throws SessionNotFoundError and
// ConflictError("limit") as the SPI says. The arguments are checked by the ValidatingBackend the
// store is returned in.
std::optional<LockHandle> grant_holder(StatementCache& statements, std::string_view key,
                                       std::string_view owner_id, std::string_view session_id,
                                       const LockLease& lease, const GrantRequest& request,
                                       SteadyClock::time_point sent_at, const StoreClock& clock);

// LockStore::revoke's deletes, inside the store's write transaction: the exclusive grant of `key`
// and every holder of it; the outcome names the live one with the greatest token.
LockOutcome revoke_every_holder(StatementCache& statements, std::string_view key);

}  // namespace dlock::store::sqlite
