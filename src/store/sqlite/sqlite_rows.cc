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

LockHandle grant_handle(std::string_view key, std::string_view owner_id,
                        std::string_view session_id, FencingToken token, const LockLease& lease,
                        SteadyClock::time_point sent_at, std::int64_t expires_ms,
                        std::int64_t now_ms, const StoreClock& clock, HoldMode mode) {
  const auto lifetime =
      lease.session_bound() ? std::chrono::milliseconds(expires_ms - now_ms) : lease.ttl();
  return LockHandle{
      std::string(key),        std::string(owner_id),
      std::string(session_id), token,
      sent_at + lifetime,      StoreClock::wall_time(expires_ms, clock.wall_offset_ms()),
      lease.session_bound(),   mode};
}

void bind_lease(Statement& statement, int index, const LockLease& lease) {
  if (!lease.session_bound()) statement.bind(index, std::int64_t{lease.ttl().count()});
}

FencingToken take_token(StatementCache& statements) {
  Statement& next_token = statements.get(sql::kNextToken, sql::kNextTokenColumns.list());
  ResetGuard reset(next_token);
  if (!next_token.step()) throw InternalError("sqlite: fencing_token_seq row is missing");
  return static_cast<FencingToken>(next_token.column_int64(sql::kNextTokenColumns["value"]));
}

}  // namespace dlock::store::sqlite
