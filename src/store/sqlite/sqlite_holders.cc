#include "store/sqlite/sqlite_holders.h"

#include <cstdint>

#include "store/sqlite/sqlite_delays.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_statements.h"

namespace dlock::store::sqlite {

std::optional<LockHandle> grant_holder(StatementCache& statements, std::string_view key,
                                       std::string_view owner_id, std::string_view session_id,
                                       const LockLease& lease, const GrantRequest& request,
                                       SteadyClock::time_point sent_at, const StoreClock& clock) {
  {
    Statement& session = statements.get(sql::kSessionLive, sql::kSessionLiveColumns.list());
    ResetGuard reset(session);
    session.bind(1, session_id);
    if (!session.step()) throw SessionNotFoundError("session not found or expired");
  }
  const std::string mode = to_string(request.mode());
  const auto limit = static_cast<std::int64_t>(request.limit());
  {
    constexpr const auto& columns = sql::kHoldersOfKeyColumns;
    Statement& holders = statements.get(sql::kHoldersOfKey, columns.list());
    ResetGuard reset(holders);
    holders.bind(1, key).bind(2, mode).bind(3, session_id).bind(4, limit);
    if (!holders.step()) throw InternalError("sqlite: holder count returned no row");
    const bool exclusive = holders.column_int64(columns["exclusive_held"]) != 0;
    const std::int64_t other_mode = holders.column_int64(columns["other_mode"]);
    const std::int64_t others = holders.column_int64(columns["others"]);
    const std::int64_t agreed = holders.column_int64(columns["other_limit"]);  // 0 when NULL
    const bool delayed = holders.column_int64(columns["in_delay"]) != 0;
    if (exclusive || other_mode > 0 || delayed) return std::nullopt;
    if (request.mode() == HoldMode::kPermit) {
      if (agreed != 0) {
        throw ConflictError("limit", "semaphore " + std::string(key) + " has " +
                                         std::to_string(agreed) + " permits, not " +
                                         std::to_string(request.limit()));
      }
      if (others >= limit) return std::nullopt;
    }
  }
  const FencingToken token = take_token(statements);
  Statement& upsert = statements.get(sql::kUpsertHolder, sql::kUpsertHolderColumns.list());
  ResetGuard reset(upsert);
  upsert.bind(1, key).bind(2, owner_id).bind(3, session_id);
  upsert.bind(4, static_cast<std::int64_t>(token)).bind(5, mode).bind(6, limit);
  bind_lease(upsert, 7, lease);
  if (!upsert.step()) throw InternalError("sqlite: holder upsert returned no row");
  return handle_from<sql::kUpsertHolderColumns>(key, owner_id, session_id, token, lease, sent_at,
                                                upsert, clock, request.mode());
}

LockOutcome revoke_every_holder(StatementCache& statements, std::string_view key) {
  LockOutcome outcome;
  for (const auto* table : {&sql::kGrants, &sql::kHolders}) {
    keep_delays(statements, table->keep_delays_of_key, key);  // a revoke is no release (C2)
    constexpr const auto& columns = sql::kRevokeColumns;
    Statement& remove = statements.get(table->revoke, columns.list());
    ResetGuard reset(remove);
    remove.bind(1, key);
    while (remove.step()) {
      const auto token = static_cast<FencingToken>(remove.column_int64(columns["fencing_token"]));
      if (remove.column_int64(columns["live"]) == 0 ||
          (outcome.fencing_token && *outcome.fencing_token >= token)) {
        continue;
      }
      outcome = LockOutcome{true, token, remove.column_text(columns["owner_id"])};
    }
  }
  return outcome;
}

}  // namespace dlock::store::sqlite
