#include "store/sqlite/sqlite_delays.h"

namespace dlock::store::sqlite {

namespace {

// A later end never gives way to an earlier one.
#define DLOCK_SQLITE_KEEP_LATER_END \
  " ON CONFLICT (key) DO UPDATE SET ends_at = max(ends_at, excluded.ends_at)"

}  // namespace

void keep_delays(StatementCache& statements, const sql::GrantTable& table, std::string_view where,
                 std::optional<std::string_view> parameter) {
  const std::string name = table.name;
  // The end: the row's own expiry or its session's, no later than now.
  const std::string ends_at =
      "min(" + std::string(table.expiry) + ", " DLOCK_SQLITE_NOW ") + " + table.delay;
  std::string sql = "INSERT INTO lock_delays (key, ends_at) SELECT " + name + ".key, max(" +
                    ends_at + ") FROM " + name + " WHERE (";
  sql.append(where);
  sql += ") AND " + ends_at + " > " DLOCK_SQLITE_NOW " GROUP BY " + name +
         ".key" DLOCK_SQLITE_KEEP_LATER_END;
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
  Statement& remove =
      statements.get("DELETE FROM lock_delays WHERE ends_at <= " DLOCK_SQLITE_NOW " RETURNING key");
  ResetGuard reset(remove);
  std::vector<std::string> over;
  while (remove.step()) over.push_back(remove.column_text(0));
  return over;
}

}  // namespace dlock::store::sqlite
