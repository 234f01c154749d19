#pragma once

// Reading grants out of, and binding leases into, the SQLite store's statements; shared by the
// exclusive path (sqlite_store.cc) and the holder sets (sqlite_holders.cc).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/types.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/store_clock.h"

namespace dlock::store::sqlite {

// "shared" -> kShared, "permit" -> kPermit, anything else -> kExclusive (a grant row's mode).
HoldMode mode_from(const std::string& text);

// Every time read from a row is reported as the host's wall clock reads it (StoreClock::wall_time,
// C3 "Times"): `clock` is the store's. Each reader is given the statement's columns
// (sql::k...Columns, sqlite_statements.h) and reads its columns by name.

// A LockInfo from a row with sql::kGrantRow's columns.
template <const auto& columns>
LockInfo lock_info_from(const Statement& row, const StoreClock& clock) {
  const auto offset = clock.wall_offset_ms();
  return LockInfo{row.column_text(columns["key"]),
                  row.column_text(columns["owner_id"]),
                  row.column_text(columns["session_id"]),
                  static_cast<FencingToken>(row.column_int64(columns["fencing_token"])),
                  StoreClock::wall_time(row.column_int64(columns["acquired_at"]), offset),
                  StoreClock::wall_time(row.column_int64(columns["expiry"]), offset),
                  row.column_int64(columns["session_bound"]) != 0,
                  mode_from(row.column_text(columns["mode"])),
                  static_cast<std::uint32_t>(row.column_int64(columns["permit_limit"])),
                  row.column_optional_text(columns["value"])};
}

// The handle of a grant from the grant's expiry and the store's now (store clock, ms).
LockHandle grant_handle(std::string_view key, std::string_view owner_id,
                        std::string_view session_id, FencingToken token, const LockLease& lease,
                        SteadyClock::time_point sent_at, std::int64_t expires_ms,
                        std::int64_t now_ms, const StoreClock& clock, HoldMode mode);

// The handle of a grant from a statement returning its expiry and the store's now (columns expiry
// and now): a session-bound grant's deadline is its session's, counted from `sent_at`.
template <const auto& columns>
LockHandle handle_from(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken token, const LockLease& lease, SteadyClock::time_point sent_at,
                       const Statement& row, const StoreClock& clock,
                       HoldMode mode = HoldMode::kExclusive) {
  return grant_handle(key, owner_id, session_id, token, lease, sent_at,
                      row.column_int64(columns["expiry"]), row.column_int64(columns["now"]), clock,
                      mode);
}

// A SessionInfo from a row with sql::kSessionRow's columns.
template <const auto& columns>
SessionInfo session_from(std::string_view session_id, const Statement& row,
                         const StoreClock& clock) {
  return SessionInfo{
      std::string(session_id), row.column_text(columns["owner_id"]),
      std::chrono::milliseconds(row.column_int64(columns["ttl_ms"])),
      StoreClock::wall_time(row.column_int64(columns["expires_at"]), clock.wall_offset_ms()),
      std::chrono::milliseconds(row.column_int64(columns["lock_delay_ms"]))};
}

// A TTL in ms for a TTL lease; a session-bound one leaves the parameter unbound (NULL).
void bind_lease(Statement& statement, int index, const LockLease& lease);

// The next token of the one durable counter (ADR-0004), inside the caller's write transaction.
FencingToken take_token(StatementCache& statements);

}  // namespace dlock::store::sqlite
