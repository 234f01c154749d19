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

std::vector<std::pair<std::string, std::int64_t>> delays_by_prefix(StatementCache& statements,
                                                                   std::string_view prefix,
                                                                   std::string_view after,
                                                                   std::int64_t limit) {
  // The rows of `table` under the prefix ?1 that are no live grant, with the end of their delay.
  const auto ended_rows = [](const sql::GrantTable& table) {
    const std::string name = table.name;
    return "SELECT " + name + ".key AS key, " + table.expiry + " + " + table.delay +
           " AS ends_at FROM " + name + " WHERE substr(" + name +
           ".key, 1, length(?1)) = ?1 AND NOT " + table.live;
  };
  static const std::string text =
      "SELECT key, max(ends_at) FROM (SELECT key, ends_at FROM lock_delays "
      "WHERE substr(key, 1, length(?1)) = ?1 UNION ALL " +
      ended_rows(sql::kGrants) + " UNION ALL " + ended_rows(sql::kHolders) +
      ") WHERE ends_at > " DLOCK_SQLITE_NOW " AND key > ?3 GROUP BY key ORDER BY key LIMIT ?2";
  Statement& select = statements.get(text);
  ResetGuard reset(select);
  select.bind(1, prefix).bind(2, limit).bind(3, after);
  std::vector<std::pair<std::string, std::int64_t>> delays;
  while (select.step()) delays.emplace_back(select.column_text(0), select.column_int64(1));
  return delays;
}

bool clear_delays_of(StatementCache& statements, std::string_view key) {
  Statement& check = statements.get("SELECT " DLOCK_SQLITE_DELAYED_KEY("?1"));
  bool delayed = false;
  {
    ResetGuard reset(check);
    check.bind(1, key);
    delayed = check.step() && check.column_int64(0) != 0;
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
