#include "store/sqlite/sqlite_holders.h"

#include <cstdint>

#include "store/sqlite/sqlite_delays.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_statements.h"

namespace dlock::store::sqlite {

namespace {

// Whether the session is live (a holder is never granted to a dead one).
inline constexpr const char* kSessionLive =
    "SELECT 1 FROM lock_session s WHERE s.session_id = ?1 AND s.expires_at > " DLOCK_SQLITE_NOW;

// What the decision needs about `key` (?1) for a request of mode ?2 by session ?3 with limit ?4:
// whether a live exclusive grant holds it; how many live holders of another mode (of any session,
// this one's too: no change of mode in place) hold it; how many live holders of the same mode
// other sessions have; among those, a limit other than ?4 if any; and whether a lock-delay keeps
// the name from new grants (C2 "Lock-delay").
inline constexpr const char* kHoldersOfKey =
    "SELECT EXISTS (SELECT 1 FROM locks WHERE locks.key = ?1 AND " DLOCK_SQLITE_LIVE_GRANT
    "), "
    "count(*) FILTER (WHERE mode <> ?2), "
    "count(*) FILTER (WHERE mode = ?2 AND session_id <> ?3), "
    "max(permit_limit) FILTER (WHERE mode = ?2 AND session_id <> ?3 AND permit_limit <> "
    "?4), " DLOCK_SQLITE_DELAYED_KEY(
        "?1") " FROM lock_holders WHERE key = ?1 AND " DLOCK_SQLITE_LIVE_HOLDER;

// The session's holder of `key`, new or replacing its earlier one (live or not) with the token ?4
// just taken from the counter. ?7 is the TTL in ms, NULL for a session-bound holder. Returns the
// expiry the holder reports and the store's now.
inline constexpr const char* kUpsertHolder =
    "INSERT INTO lock_holders (key, owner_id, session_id, fencing_token, mode, permit_limit, "
    "acquired_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, " DLOCK_SQLITE_NOW
    ", " DLOCK_SQLITE_NOW
    " + ?7) "
    "ON CONFLICT (key, session_id) DO UPDATE SET owner_id = excluded.owner_id, "
    "  fencing_token = excluded.fencing_token, mode = excluded.mode, "
    "  permit_limit = excluded.permit_limit, acquired_at = excluded.acquired_at, "
    "  expires_at = excluded.expires_at "
    "RETURNING " DLOCK_SQLITE_GRANT_EXPIRY_IN("lock_holders") ", " DLOCK_SQLITE_NOW;

}  // namespace

std::optional<LockHandle> grant_holder(StatementCache& statements, std::string_view key,
                                       std::string_view owner_id, std::string_view session_id,
                                       const LockLease& lease, const HoldRequest& request,
                                       SteadyClock::time_point sent_at, const StoreClock& clock) {
  {
    Statement& session = statements.get(kSessionLive);
    ResetGuard reset(session);
    session.bind(1, session_id);
    if (!session.step()) throw SessionNotFoundError("session not found or expired");
  }
  const std::string mode = to_string(request.mode);
  const auto limit = static_cast<std::int64_t>(request.limit);
  {
    Statement& holders = statements.get(kHoldersOfKey);
    ResetGuard reset(holders);
    holders.bind(1, key).bind(2, mode).bind(3, session_id).bind(4, limit);
    if (!holders.step()) throw InternalError("sqlite: holder count returned no row");
    const bool exclusive = holders.column_int64(0) != 0;
    const std::int64_t other_mode = holders.column_int64(1);
    const std::int64_t others = holders.column_int64(2);
    const std::int64_t agreed = holders.column_int64(3);  // 0 when NULL: none disagrees
    const bool delayed = holders.column_int64(4) != 0;
    if (exclusive || other_mode > 0 || delayed) return std::nullopt;
    if (request.mode == HoldMode::kPermit) {
      if (agreed != 0) {
        throw ConflictError("limit", "semaphore " + std::string(key) + " has " +
                                         std::to_string(agreed) + " permits, not " +
                                         std::to_string(request.limit));
      }
      if (others >= limit) return std::nullopt;
    }
  }
  const FencingToken token = take_token(statements);
  Statement& upsert = statements.get(kUpsertHolder);
  ResetGuard reset(upsert);
  upsert.bind(1, key).bind(2, owner_id).bind(3, session_id);
  upsert.bind(4, static_cast<std::int64_t>(token)).bind(5, mode).bind(6, limit);
  bind_lease(upsert, 7, lease);
  if (!upsert.step()) throw InternalError("sqlite: holder upsert returned no row");
  return handle_from(key, owner_id, session_id, token, lease, sent_at, upsert, 0, clock,
                     request.mode);
}

LockOutcome revoke_every_holder(StatementCache& statements, std::string_view key) {
  LockOutcome outcome;
  for (const auto* table : {&sql::kGrants, &sql::kHolders}) {
    keep_delays(statements, *table, "key = ?1", key);  // a revoke is no release (C2 "Lock-delay")
    Statement& remove =
        statements.get(std::string("DELETE FROM ") + table->name +
                       " WHERE key = ?1 RETURNING fencing_token, owner_id, " + table->live);
    ResetGuard reset(remove);
    remove.bind(1, key);
    while (remove.step()) {
      const auto token = static_cast<FencingToken>(remove.column_int64(0));
      if (remove.column_int64(2) == 0 ||
          (outcome.fencing_token && *outcome.fencing_token >= token)) {
        continue;
      }
      outcome = LockOutcome{true, token, remove.column_text(1)};
    }
  }
  return outcome;
}

std::string live_grants_sql(std::string_view where, std::string_view tail) {
  std::string sql;
  for (const auto* table : {&sql::kGrants, &sql::kHolders}) {
    if (!sql.empty()) sql += " UNION ALL ";
    sql += std::string("SELECT ") + table->columns + " FROM " + table->name + " WHERE ";
    sql.append(where);
    sql += std::string(" AND ") + table->live;
  }
  sql += ' ';
  sql.append(tail);
  return sql;
}

}  // namespace dlock::store::sqlite
