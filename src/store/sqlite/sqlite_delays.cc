#include "store/sqlite/sqlite_delays.h"

namespace dlock::store::sqlite {

void keep_delays(StatementCache& statements, const char* sql,
                 std::optional<std::string_view> parameter) {
  Statement& insert = statements.get(sql);
  ResetGuard reset(insert);
  if (parameter) insert.bind(1, *parameter);
  while (insert.step()) {
  }
}

void keep_delay(StatementCache& statements, std::string_view key, std::int64_t ends_at) {
  Statement& insert = statements.get(
      "INSERT INTO lock_delays (key, ends_at) VALUES (?1, ?2)" DLOCK_SQLITE_KEEP_LATER_END);
  ResetGuard reset(insert);
  insert.bind(1, key).bind(2, ends_at);
  insert.step();
}

std::vector<std::string> end_delays(StatementCache& statements) {
  Statement& remove = statements.get(sql::kEndDelays, sql::kEndDelaysColumns.list());
  ResetGuard reset(remove);
  std::vector<std::string> over;
  while (remove.step()) over.push_back(remove.column_text(sql::kEndDelaysColumns["key"]));
  return over;
}

std::vector<std::pair<std::string, std::int64_t>> delays_by_prefix(StatementCache& statements,
                                                                   std::string_view prefix,
                                                                   std::string_view after,
                                                                   std::int64_t limit) {
  constexpr const auto& columns = sql::kDelaysByPrefixColumns;
  Statement& select = statements.get(sql::kDelaysByPrefix, columns.list());
  ResetGuard reset(select);
  select.bind(1, prefix).bind(2, limit).bind(3, after);
  std::vector<std::pair<std::string, std::int64_t>> delays;
  while (select.step()) {
    delays.emplace_back(select.column_text(columns["key"]),
                        select.column_int64(columns["ends_at"]));
  }
  return delays;
}

bool clear_delays_of(StatementCache& statements, std::string_view key) {
  Statement& check = statements.get(sql::kKeyInDelay, sql::kKeyInDelayColumns.list());
  bool delayed = false;
  {
    ResetGuard reset(check);
    check.bind(1, key);
    delayed = check.step() && check.column_int64(sql::kKeyInDelayColumns["in_delay"]) != 0;
  }
  if (!delayed) return false;
  for (const char* sql :
       {"DELETE FROM lock_delays WHERE key = ?1",
        "DELETE FROM locks WHERE key = ?1 AND NOT " DLOCK_SQLITE_LIVE_GRANT,
        "DELETE FROM lock_holders WHERE key = ?1 AND NOT " DLOCK_SQLITE_LIVE_HOLDER}) {
    Statement& remove = statements.get(sql);
    ResetGuard reset(remove);
    remove.bind(1, key);
    while (remove.step()) {
    }
  }
  return true;
}

}  // namespace dlock::store::sqlite
