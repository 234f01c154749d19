#pragma once

// Lock-delay on the SQLite store (C2 "Lock-delay", docs/adr/0020-more-primitives-design.md): the
// writes that keep a delay when the row of a grant that ended without a release is removed, and
// the reaper's end of delays that are over. Each runs inside the store's write transaction
// (GroupCommit) on the store clock (ADR-0013), as every other write. migrations/005_lock_delay.sql
// says where the delays live.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_statements.h"

namespace dlock::store::sqlite {

// Before rows of a grant table are removed, runs `sql`, one of its GrantTable::keep_delays_*
// statements (?1 bound to `parameter` if given): records in `lock_delays` the end of each row's
// lock-delay, counted from its end or, if it has not ended, from now (a revoke, or the reaper
// removing a TTL grant with its dead session), for those whose delay is not over.
void keep_delays(StatementCache& statements, const char* sql,
                 std::optional<std::string_view> parameter = std::nullopt);

// Records that no grant of `key` is made before `ends_at` (store clock, ms), or later if a delay
// of the key already ends later.
void keep_delay(StatementCache& statements, std::string_view key, std::int64_t ends_at);

// Removes the delays that are over and returns their names (the reaper announces them).
std::vector<std::string> end_delays(StatementCache& statements);

// LockStore::list_delays: the names starting with `prefix` and greater than `after` in a delay,
// ordered by key, at most `limit`, with the end of the latest delay of each (store clock, ms): a
// delay of `lock_delays`, or a row of either table that ended without a release less than its
// delay ago.
std::vector<std::pair<std::string, std::int64_t>> delays_by_prefix(StatementCache& statements,
                                                                   std::string_view prefix,
                                                                   std::string_view after,
                                                                   std::int64_t limit);

// LockStore::clear_delay, inside the write transaction: removes `key`'s running delays -- its
// `lock_delays` row and its rows that are no longer live grants (their tokens stay spent: the
// counter is global) -- and returns whether one ran.
bool clear_delays_of(StatementCache& statements, std::string_view key);

}  // namespace dlock::store::sqlite
