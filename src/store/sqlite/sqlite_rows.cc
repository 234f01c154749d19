#include "store/sqlite/sqlite_rows.h"

#include <chrono>
#include <string>

#include "dlock/errors.h"
#include "store/sqlite/sqlite_statements.h"

namespace dlock::store::sqlite {

HoldMode mode_from(const std::string& text) {
  if (text == "shared") return HoldMode::kShared;
  if (text == "permit") return HoldMode::kPermit;
  return HoldMode::kExclusive;
}

LockInfo lock_info_from(const Statement& row, const StoreClock& clock) {
  const auto offset = clock.wall_offset_ms();
  return LockInfo{row.column_text(0),
                  row.column_text(1),
                  row.column_text(2),
                  static_cast<FencingToken>(row.column_int64(3)),
                  StoreClock::wall_time(row.column_int64(4), offset),
                  StoreClock::wall_time(row.column_int64(5), offset),
                  row.column_int64(6) != 0,
                  mode_from(row.column_text(7)),
                  static_cast<std::uint32_t>(row.column_int64(8)),
                  row.column_optional_text(9)};
}

LockHandle handle_from(std::string_view key, std::string_view owner_id, std::string_view session_id,
                       FencingToken token, const LockLease& lease, SteadyClock::time_point sent_at,
                       const Statement& row, int expiry, const StoreClock& clock, HoldMode mode) {
  const std::int64_t expires_ms = row.column_int64(expiry);
  const auto lifetime = lease.session_bound()
                            ? std::chrono::milliseconds(expires_ms - row.column_int64(expiry + 1))
                            : lease.ttl();
  return LockHandle{
      std::string(key),        std::string(owner_id),
      std::string(session_id), token,
      sent_at + lifetime,      StoreClock::wall_time(expires_ms, clock.wall_offset_ms()),
      lease.session_bound(),   mode};
}

SessionInfo session_from(std::string_view session_id, const Statement& row,
                         const StoreClock& clock) {
  return SessionInfo{std::string(session_id), row.column_text(0),
                     std::chrono::milliseconds(row.column_int64(1)),
                     StoreClock::wall_time(row.column_int64(2), clock.wall_offset_ms()),
                     std::chrono::milliseconds(row.column_int64(3))};
}

void bind_lease(Statement& statement, int index, const LockLease& lease) {
  if (!lease.session_bound()) statement.bind(index, std::int64_t{lease.ttl().count()});
}

FencingToken take_token(StatementCache& statements) {
  Statement& next_token = statements.get(sql::kNextToken);
  ResetGuard reset(next_token);
  if (!next_token.step()) throw InternalError("sqlite: fencing_token_seq row is missing");
  return static_cast<FencingToken>(next_token.column_int64(0));
}

}  // namespace dlock::store::sqlite
