#pragma once

// The SQLite store's statements whose rows it reads, each with its result columns by name
// (util/sql_columns.h): the store reads them by name, and StatementCache compares them with the
// prepared statement's own. The raw benchmark path (bench/raw_paths.cc) sends some as they are.

#include <span>
#include <string_view>
#include <vector>

#include "util/sql_columns.h"

// The store's clock, in integer milliseconds since the Unix epoch. 'now' is fixed for the
// duration of one sqlite3_step, so every use inside one statement sees the same instant. The
// database is opened through a ClockVfs, so 'now' is StoreClock, not the host's wall clock: a
// step of that (NTP, an operator) would expire every lease at once or stretch every lease by the
// step (docs/adr/0013-sqlite-store-clock.md).
#define DLOCK_SQLITE_NOW "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"

// Whether the row of table `t` (`locks`, or `lock_holders` for the holder sets of
// docs/adr/0020-more-primitives-design.md) is a live grant: until its own expiry or,
// session-bound (expires_at NULL, docs/adr/0018-session-bound-locks.md), exactly while its
// session is. Never NULL.
// No `expires_at IS NULL` here or in DLOCK_SQLITE_COLUMNS_IN: these expressions are used in
// RETURNING clauses, where SQLite 3.38 to at least 3.40 (Debian 12) evaluates `x IS NULL` as false
// when the table's first column is NOT NULL (as lock_holders.key is).
#define DLOCK_SQLITE_LIVE_IN(t)                   \
  "coalesce(" t ".expires_at > " DLOCK_SQLITE_NOW \
  ", EXISTS (SELECT 1 FROM lock_session s "       \
  "WHERE s.session_id = " t ".session_id AND s.expires_at > " DLOCK_SQLITE_NOW "))"
#define DLOCK_SQLITE_LIVE_GRANT DLOCK_SQLITE_LIVE_IN("locks")
#define DLOCK_SQLITE_LIVE_HOLDER DLOCK_SQLITE_LIVE_IN("lock_holders")

// The expiry a grant reports: its own, or its session's (0 once the session row is gone).
#define DLOCK_SQLITE_GRANT_EXPIRY_IN(t)                    \
  "coalesce(" t                                            \
  ".expires_at, (SELECT s.expires_at FROM lock_session s " \
  "WHERE s.session_id = " t ".session_id), 0)"
#define DLOCK_SQLITE_GRANT_EXPIRY DLOCK_SQLITE_GRANT_EXPIRY_IN("locks")

// Lock-delay (C2 "Lock-delay", migrations/005_lock_delay.sql): the delay of the row of table `t`,
// its session's (0 once the session row is gone, which happens only with the row itself).
#define DLOCK_SQLITE_DELAY_IN(t)                                                 \
  "coalesce((SELECT s.lock_delay_ms FROM lock_session s WHERE s.session_id = " t \
  ".session_id), "                                                               \
  "0)"
// Whether the row of table `t`, which is not live, ended less than its lock-delay ago.
#define DLOCK_SQLITE_IN_DELAY_IN(t) \
  "(" DLOCK_SQLITE_GRANT_EXPIRY_IN(t) " + " DLOCK_SQLITE_DELAY_IN(t) " > " DLOCK_SQLITE_NOW ")"
// Whether a lock-delay keeps the name `k` (an SQL expression) from every new grant: a delay
// recorded in `lock_delays` that is still running, or a row of either table that ended without a
// release less than its delay ago.
#define DLOCK_SQLITE_DELAYED_KEY(k) \
  "(EXISTS (SELECT 1 FROM lock_delays d WHERE d.key = " k " AND d.ends_at > " DLOCK_SQLITE_NOW \
  ") OR EXISTS (SELECT 1 FROM locks WHERE locks.key = " k " AND NOT " DLOCK_SQLITE_LIVE_GRANT   \
  " AND " DLOCK_SQLITE_IN_DELAY_IN("locks") ") OR EXISTS (SELECT 1 FROM lock_holders "          \
  "WHERE lock_holders.key = " k " AND NOT " DLOCK_SQLITE_LIVE_HOLDER                           \
  " AND " DLOCK_SQLITE_IN_DELAY_IN("lock_holders") "))"

// Whether the session of the row of table `t` is live.
#define DLOCK_SQLITE_LIVE_SESSION_IN(t)                          \
  "EXISTS (SELECT 1 FROM lock_session s WHERE s.session_id = " t \
  ".session_id "                                                 \
  "AND s.expires_at > " DLOCK_SQLITE_NOW ")"

// The columns a LockInfo is read from (lock_info_from, sql::kGrantRow): expiry is the expiry the
// grant reports, value an election leader's value (NULL for any other grant).
#define DLOCK_SQLITE_COLUMNS_IN(t, mode, limit, value)                             \
  t ".key AS key, " t ".owner_id AS owner_id, " t ".session_id AS session_id, " t  \
    ".fencing_token AS fencing_token, " t                                          \
    ".acquired_at AS acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY_IN(                  \
        t) " AS expiry, typeof(" t ".expires_at) = 'null' AS session_bound, " mode \
           " AS mode, " limit " AS permit_limit, " value " AS value"

namespace dlock::store::sqlite::sql {

using util::SqlColumns;

// The rows several statements share: a grant (DLOCK_SQLITE_COLUMNS_IN) and a session.
inline constexpr SqlColumns kGrantRow{"key",          "owner_id", "session_id",    "fencing_token",
                                      "acquired_at",  "expiry",   "session_bound", "mode",
                                      "permit_limit", "value"};
inline constexpr SqlColumns kSessionRow{"owner_id", "ttl_ms", "expires_at", "lock_delay_ms"};

inline constexpr const char* kNextToken =
    "UPDATE fencing_token_seq SET value = value + 1 WHERE id = 1 RETURNING value";
inline constexpr SqlColumns kNextTokenColumns{"value"};

// The restore floor (ADR-0010): at open the counter is raised to at least ?1, the microseconds
// since the Unix epoch by the process clock (the embedded store's clock; SQLite's own 'now' is
// the same clock in whole ms), so a file copied back from a backup cannot hand out again a token
// issued after that backup. Never lowers the counter.
inline constexpr const char* kRaiseTokenFloor =
    "UPDATE fencing_token_seq SET value = max(value, ?1) WHERE id = 1";

// Same shape as the PostgreSQL acquire statement (C1); the token bound as ?4 was taken from the
// durable counter in the same transaction, and both branches store it. ?5 is the TTL in ms, left
// unbound (NULL) for a session-bound grant, whose expires_at is then NULL. ?6 is an election
// leader's value (LockStore::try_grant of a leader), left unbound (NULL) for a plain lock; both
// branches store it, so a plain grant never keeps a leader's value (ADR-0020). Returns the token,
// acquired_at, the expiry the grant reports and the store's now.
// A live shared or permit holder of the key (`lock_holders`, ADR-0020), of any session, makes it
// "held" too: the trigger locks_held_by_holders_on_insert (migrations/005_lock_delay.sql) drops the
// row before either branch runs, as locks_session_alive_on_insert refuses a dead session.
// Lock-delay (C2): an ended row is taken over only once its end plus its session's lock-delay
// has passed (the ELSE branch; for a live row, only its own owner and session re-acquire), and
// the same trigger drops the row while a delay of the key runs in `lock_delays` or an ended
// holder's delay runs.
inline constexpr const char* kAcquire =
    "INSERT INTO locks (key, owner_id, session_id, fencing_token, acquired_at, expires_at, value) "
    "VALUES (?1, ?2, ?3, ?4, " DLOCK_SQLITE_NOW ", " DLOCK_SQLITE_NOW
    " + ?5, ?6) "
    "ON CONFLICT (key) DO UPDATE SET owner_id = excluded.owner_id, "
    "  session_id = excluded.session_id, fencing_token = excluded.fencing_token, "
    "  acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, "
    "  value = excluded.value "
    "WHERE CASE WHEN " DLOCK_SQLITE_LIVE_GRANT
    "   THEN locks.owner_id = excluded.owner_id AND locks.session_id = excluded.session_id "
    "   ELSE NOT " DLOCK_SQLITE_IN_DELAY_IN("locks") " END "
    "RETURNING fencing_token, acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY " AS expiry, "
    DLOCK_SQLITE_NOW " AS now";
inline constexpr SqlColumns kAcquireColumns{"fencing_token", "acquired_at", "expiry", "now"};

// proclaim (ADR-0020, "Leader election"): the value ?5 replaces the value of the live exclusive
// grant of key ?1 with owner ?2, session ?3 and token ?4; the token and expires_at stay. Returns
// the grant in DLOCK_SQLITE_COLUMNS_IN's columns (kGrantRow, so as read reports it); no
// row when no such grant lives.
inline constexpr const char* kProclaim =
    "UPDATE locks SET value = ?5 WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "
    "AND fencing_token = ?4 AND " DLOCK_SQLITE_LIVE_GRANT
    " RETURNING " DLOCK_SQLITE_COLUMNS_IN("locks", "'exclusive'", "0", "locks.value");
inline constexpr auto kProclaimColumns = kGrantRow;

// Release: deletes the grant only if it is still this holder's; one row saying whether it was
// still live. The same for a shared or permit holder, by its token. delay_ends is when the
// lock-delay of a grant that had already ended is over, if it is not yet (else 0): a late release
// does not cancel it (C2 "Lock-delay").
#define DLOCK_SQLITE_DELETE_IF_OWNER_IN(t) \
  "DELETE FROM " t                                                                         \
  " WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "                                 \
  "AND fencing_token = ?4 RETURNING " DLOCK_SQLITE_LIVE_IN(t) " AS live, "                \
  "CASE WHEN " DLOCK_SQLITE_LIVE_IN(t) " THEN 0 WHEN " DLOCK_SQLITE_IN_DELAY_IN(t)       \
  " THEN " DLOCK_SQLITE_GRANT_EXPIRY_IN(t) " + " DLOCK_SQLITE_DELAY_IN(t)                 \
  " ELSE 0 END AS delay_ends"
inline constexpr const char* kDeleteIfOwner = DLOCK_SQLITE_DELETE_IF_OWNER_IN("locks");
inline constexpr const char* kDeleteHolderIfOwner = DLOCK_SQLITE_DELETE_IF_OWNER_IN("lock_holders");
inline constexpr SqlColumns kDeleteIfOwnerColumns{"live", "delay_ends"};

// What the grant of key ?1 with owner ?2, session ?3 and token ?4 is, live or not: 0 for an
// exclusive grant (locks), 1 for a shared or permit holder (lock_holders); no row for none. One
// counter mints every token, so at most one row.
inline constexpr const char* kGrantTableOf =
    "SELECT 0 AS holder FROM locks WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "
    "AND fencing_token = ?4 UNION ALL SELECT 1 FROM lock_holders WHERE key = ?1 "
    "AND owner_id = ?2 AND session_id = ?3 AND fencing_token = ?4";
inline constexpr SqlColumns kGrantTableOfColumns{"holder"};

// Sessions: open ?1 for owner ?2 with TTL ?3 ms and lock-delay ?4 ms (C2 "Lock-delay"); renew ?1
// if it is live; read ?1 if it is live. The last two return the columns session_from reads.
inline constexpr const char* kOpenSession =
    "INSERT INTO lock_session (session_id, owner_id, ttl_ms, created_at, expires_at, "
    "lock_delay_ms) VALUES (?1, ?2, ?3, " DLOCK_SQLITE_NOW ", " DLOCK_SQLITE_NOW
    " + ?3, ?4) RETURNING expires_at";
inline constexpr SqlColumns kOpenSessionColumns{"expires_at"};
inline constexpr const char* kHeartbeat =
    "UPDATE lock_session SET expires_at = " DLOCK_SQLITE_NOW
    " + ttl_ms WHERE session_id = ?1 AND expires_at > " DLOCK_SQLITE_NOW
    " RETURNING owner_id, ttl_ms, expires_at, lock_delay_ms";
inline constexpr auto kHeartbeatColumns = kSessionRow;
inline constexpr const char* kGetSession =
    "SELECT owner_id, ttl_ms, expires_at, lock_delay_ms FROM lock_session "
    "WHERE session_id = ?1 AND expires_at > " DLOCK_SQLITE_NOW;
inline constexpr auto kGetSessionColumns = kSessionRow;
// The live sessions of an owner prefix ?1 after the ID ?2, by ID, at most ?3 (C3 "Sessions").
inline constexpr const char* kListSessions =
    "SELECT owner_id, ttl_ms, expires_at, lock_delay_ms, session_id FROM lock_session "
    "WHERE expires_at > " DLOCK_SQLITE_NOW
    " AND substr(owner_id, 1, length(?1)) = ?1 "
    "AND session_id > ?2 ORDER BY session_id LIMIT ?3";
inline constexpr auto kListSessionsColumns = kSessionRow + SqlColumns{"session_id"};
// The reaper's and close_session's end of session rows.
inline constexpr const char* kReapSessions =
    "DELETE FROM lock_session WHERE expires_at <= " DLOCK_SQLITE_NOW " RETURNING session_id";
inline constexpr SqlColumns kReapSessionsColumns{"session_id"};
inline constexpr const char* kCloseSession =
    "DELETE FROM lock_session WHERE session_id = ?1 "
    "RETURNING expires_at > " DLOCK_SQLITE_NOW " AS live";
inline constexpr SqlColumns kCloseSessionColumns{"live"};

// handover: the grant of key ?1, owner ?2, session ?3 and token ?4 re-granted to owner ?5 and
// session ?6 with the token ?7 just taken from the counter and the TTL ?8 (unbound: bound to the
// next session). The next holder's grant is a plain one: a leader's value is dropped (ADR-0020).
inline constexpr const char* kHandover =
    "UPDATE locks SET owner_id = ?5, session_id = ?6, fencing_token = ?7, "
    "acquired_at = " DLOCK_SQLITE_NOW ", expires_at = " DLOCK_SQLITE_NOW
    " + ?8, value = NULL WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "
    "AND fencing_token = ?4 AND " DLOCK_SQLITE_LIVE_GRANT " RETURNING " DLOCK_SQLITE_GRANT_EXPIRY
    " AS expiry, " DLOCK_SQLITE_NOW " AS now";
inline constexpr SqlColumns kHandoverColumns{"expiry", "now"};

// resume_clock (docs/adr/0013-sqlite-store-clock.md): the latest instant an earlier run provably
// reached (its latest grant, session creation or keepalive; 0 when nothing is persisted), and
// whether any lease, session or lock-delay (C2 "Lock-delay") was live then.
inline constexpr const char* kLastReached =
    "WITH reached(t) AS (SELECT coalesce(max(t), 0) FROM ("
    "SELECT max(acquired_at) AS t FROM locks "
    "UNION ALL SELECT max(acquired_at) FROM lock_holders "
    "UNION ALL SELECT max(created_at) FROM lock_session "
    "UNION ALL SELECT max(expires_at - ttl_ms) FROM lock_session)) "
    "SELECT t AS reached, EXISTS (SELECT 1 FROM locks, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_holders, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_session, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_delays, reached WHERE ends_at > t) AS live "
    "FROM reached";
inline constexpr SqlColumns kLastReachedColumns{"reached", "live"};

// The statements of one table of grants: `locks` (exclusive) or `lock_holders` (shared and
// permit holders, ADR-0020). Both have the columns key, owner_id, session_id, fencing_token,
// acquired_at and expires_at with the same meaning, so each statement is written once for both
// and returns the same columns for both tables.
struct GrantTable {
  // extend of a TTL grant: key ?1, owner ?2, session ?3, token ?4, the TTL ?5 in ms.
  const char* extend;  // kExtendColumns
  // extend of a session-bound grant: a checked no-op answering the session's expiry (ADR-0018).
  const char* check_session_bound;  // kCheckSessionBoundColumns
  const char* reap;                 // the reaper's: expired, or its session not live; kGrantRow
  const char* close;                // the rows of session ?1; kCloseColumns
  const char* revoke;               // the rows of key ?1; kRevokeColumns
  // Lock-delay (sqlite_delays.h, keep_delays), each before the rows of reap, close and revoke go.
  const char* keep_delays_reaped;
  const char* keep_delays_of_session;  // its rows that had already ended
  const char* keep_delays_of_key;
};
inline constexpr SqlColumns kExtendColumns{"expires_at", "mode"};
inline constexpr SqlColumns kCheckSessionBoundColumns{"expiry", "now", "mode"};
inline constexpr auto kReapColumns = kGrantRow;
inline constexpr auto kCloseColumns = kGrantRow + SqlColumns{"live"};
inline constexpr SqlColumns kRevokeColumns{"fencing_token", "owner_id", "live"};

#define DLOCK_SQLITE_ENDED_IN(t) \
  "expires_at <= " DLOCK_SQLITE_NOW " OR NOT " DLOCK_SQLITE_LIVE_SESSION_IN(t)
// The end of the lock-delay of a row of table `t`: its own expiry or its session's, no later
// than now, plus its delay.
#define DLOCK_SQLITE_DELAY_END_IN(t) \
  "min(" DLOCK_SQLITE_GRANT_EXPIRY_IN(t) ", " DLOCK_SQLITE_NOW ") + " DLOCK_SQLITE_DELAY_IN(t)
// A later end never gives way to an earlier one.
#define DLOCK_SQLITE_KEEP_LATER_END \
  " ON CONFLICT (key) DO UPDATE SET ends_at = max(ends_at, excluded.ends_at)"
// Records in `lock_delays` the end of the lock-delay of each row of table `t` that satisfies
// `where`, for those whose delay is not over (keep_delays).
#define DLOCK_SQLITE_KEEP_DELAYS_IN(t, where)                                                \
  "INSERT INTO lock_delays (key, ends_at) SELECT " t ".key, max(" DLOCK_SQLITE_DELAY_END_IN( \
      t) ") FROM " t " WHERE (" where                                                        \
         ") AND " DLOCK_SQLITE_DELAY_END_IN(t) " > " DLOCK_SQLITE_NOW " GROUP BY " t         \
                                               ".key" DLOCK_SQLITE_KEEP_LATER_END
#define DLOCK_SQLITE_GRANT_TABLE(t, mode, limit, value)                                            \
  GrantTable {                                                                                     \
    "UPDATE " t " SET expires_at = " DLOCK_SQLITE_NOW                                              \
    " + ?5 WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "                                  \
    "AND fencing_token = ?4 AND expires_at > " DLOCK_SQLITE_NOW                                    \
    " AND " DLOCK_SQLITE_LIVE_SESSION_IN(t) " RETURNING expires_at AS expires_at, " mode           \
                                            " AS mode",                                            \
        "SELECT " DLOCK_SQLITE_GRANT_EXPIRY_IN(                                                    \
            t) " AS expiry, " DLOCK_SQLITE_NOW " AS now, " mode " AS mode FROM " t                 \
               " WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "                            \
               "AND fencing_token = ?4 AND expires_at IS NULL AND " DLOCK_SQLITE_LIVE_IN(t),       \
        "DELETE FROM " t " WHERE " DLOCK_SQLITE_ENDED_IN(t) " RETURNING " DLOCK_SQLITE_COLUMNS_IN( \
            t, mode, limit, value),                                                                \
        "DELETE FROM " t " WHERE session_id = ?1 RETURNING " DLOCK_SQLITE_COLUMNS_IN(              \
            t, mode, limit, value) ", " DLOCK_SQLITE_LIVE_IN(t) " AS live",                        \
        "DELETE FROM " t                                                                           \
        " WHERE key = ?1 RETURNING fencing_token, owner_id, " DLOCK_SQLITE_LIVE_IN(t) " AS live",  \
        DLOCK_SQLITE_KEEP_DELAYS_IN(t, DLOCK_SQLITE_ENDED_IN(t)),                                  \
        DLOCK_SQLITE_KEEP_DELAYS_IN(t, "session_id = ?1 AND NOT " DLOCK_SQLITE_LIVE_IN(t)),        \
        DLOCK_SQLITE_KEEP_DELAYS_IN(t, "key = ?1")                                                 \
  }
inline constexpr GrantTable kGrants =
    DLOCK_SQLITE_GRANT_TABLE("locks", "'exclusive'", "0", "locks.value");
inline constexpr GrantTable kHolders = DLOCK_SQLITE_GRANT_TABLE(
    "lock_holders", "lock_holders.mode", "lock_holders.permit_limit", "NULL");

// The live grants of both tables (the exclusive ones and the holders) that satisfy `where`
// (columns unqualified), each row in kGrantRow's columns, followed by `tail` (ORDER BY / LIMIT
// over the result columns key and fencing_token). An exclusive grant and live holders of one key
// never coexist (each grant checks for the other), so a key's rows come from one table.
#define DLOCK_SQLITE_LIVE_GRANTS(where, tail)                                              \
  "SELECT " DLOCK_SQLITE_COLUMNS_IN(                                                       \
      "locks", "'exclusive'", "0",                                                         \
      "locks.value") " FROM locks WHERE " where " AND " DLOCK_SQLITE_LIVE_GRANT            \
                     " UNION ALL SELECT " DLOCK_SQLITE_COLUMNS_IN(                         \
                         "lock_holders", "lock_holders.mode", "lock_holders.permit_limit", \
                         "NULL") " FROM lock_holders WHERE " where                         \
                                 " AND " DLOCK_SQLITE_LIVE_HOLDER " " tail
inline constexpr const char* kReadHolders =
    DLOCK_SQLITE_LIVE_GRANTS("key = ?1", "ORDER BY fencing_token");
inline constexpr auto kReadHoldersColumns = kGrantRow;
inline constexpr const char* kRead =
    DLOCK_SQLITE_LIVE_GRANTS("key = ?1", "ORDER BY fencing_token DESC LIMIT 1");
inline constexpr auto kReadColumns = kGrantRow;
// Keys compare as bytes (SQLite's BINARY collation), as the SPI's order says.
inline constexpr const char* kList = DLOCK_SQLITE_LIVE_GRANTS(
    "substr(key, 1, length(?1)) = ?1 AND (key > ?3 OR key = ?3 AND fencing_token > ?4)",
    "ORDER BY key, fencing_token LIMIT ?2");
inline constexpr auto kListColumns = kGrantRow;
inline constexpr const char* kSessionGrants =
    DLOCK_SQLITE_LIVE_GRANTS("session_id = ?1", "ORDER BY key, fencing_token");
inline constexpr auto kSessionGrantsColumns = kGrantRow;

// Holder sets (sqlite_holders.cc). Whether the session ?1 is live (a holder is never granted to a
// dead one).
inline constexpr const char* kSessionLive =
    "SELECT 1 AS live FROM lock_session s "
    "WHERE s.session_id = ?1 AND s.expires_at > " DLOCK_SQLITE_NOW;
inline constexpr SqlColumns kSessionLiveColumns{"live"};

// What the decision needs about `key` (?1) for a request of mode ?2 by session ?3 with limit ?4:
// whether a live exclusive grant holds it; how many live holders of another mode (of any session,
// this one's too: no change of mode in place) hold it; how many live holders of the same mode
// other sessions have; among those, a limit other than ?4 if any (NULL if none); and whether a
// lock-delay keeps the name from new grants (C2 "Lock-delay").
inline constexpr const char* kHoldersOfKey =
    "SELECT EXISTS (SELECT 1 FROM locks WHERE locks.key = ?1 AND " DLOCK_SQLITE_LIVE_GRANT
    ") AS exclusive_held, "
    "count(*) FILTER (WHERE mode <> ?2) AS other_mode, "
    "count(*) FILTER (WHERE mode = ?2 AND session_id <> ?3) AS others, "
    "max(permit_limit) FILTER (WHERE mode = ?2 AND session_id <> ?3 AND permit_limit <> "
    "?4) AS other_limit, " DLOCK_SQLITE_DELAYED_KEY(
        "?1") " AS in_delay FROM lock_holders WHERE key = ?1 AND " DLOCK_SQLITE_LIVE_HOLDER;
inline constexpr SqlColumns kHoldersOfKeyColumns{"exclusive_held", "other_mode", "others",
                                                 "other_limit", "in_delay"};

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
    "RETURNING " DLOCK_SQLITE_GRANT_EXPIRY_IN("lock_holders") " AS expiry, " DLOCK_SQLITE_NOW
                                                              " AS now";
inline constexpr SqlColumns kUpsertHolderColumns{"expiry", "now"};

// Lock-delay (sqlite_delays.cc). The delays that are over, removed by the reaper.
inline constexpr const char* kEndDelays =
    "DELETE FROM lock_delays WHERE ends_at <= " DLOCK_SQLITE_NOW " RETURNING key";
inline constexpr SqlColumns kEndDelaysColumns{"key"};
// Whether a lock-delay keeps the name ?1 from new grants.
inline constexpr const char* kKeyInDelay = "SELECT " DLOCK_SQLITE_DELAYED_KEY("?1") " AS in_delay";
inline constexpr SqlColumns kKeyInDelayColumns{"in_delay"};
// The rows of table `t` under the prefix ?1 that are no live grant, with the end of their delay.
#define DLOCK_SQLITE_ENDED_ROWS_IN(t)                                                      \
  "SELECT " t ".key AS key, " DLOCK_SQLITE_GRANT_EXPIRY_IN(t) " + " DLOCK_SQLITE_DELAY_IN( \
      t) " AS ends_at FROM " t " WHERE substr(" t                                          \
         ".key, 1, length(?1)) = ?1 AND NOT " DLOCK_SQLITE_LIVE_IN(t)
// LockStore::list_delays: the names under the prefix ?1 after ?3 in a delay, at most ?2, each
// with the end of its latest delay.
inline constexpr const char* kDelaysByPrefix =
    "SELECT key, max(ends_at) AS ends_at FROM (SELECT key, ends_at FROM lock_delays "
    "WHERE substr(key, 1, length(?1)) = ?1 UNION ALL " DLOCK_SQLITE_ENDED_ROWS_IN(
        "locks") " UNION ALL " DLOCK_SQLITE_ENDED_ROWS_IN("lock_holders")
    ") WHERE ends_at > " DLOCK_SQLITE_NOW " AND key > ?3 GROUP BY key ORDER BY key LIMIT ?2";
inline constexpr SqlColumns kDelaysByPrefixColumns{"key", "ends_at"};

// A statement whose rows the store reads, with its result columns.
struct CheckedStatement {
  const char* sql;
  std::span<const std::string_view> columns;
};

// Every statement above whose rows the store reads (sqlite_statement_columns_test prepares each
// and compares its columns).
inline std::vector<CheckedStatement> checked_statements() {
  std::vector<CheckedStatement> statements = {
      {kNextToken, kNextTokenColumns.list()},
      {kAcquire, kAcquireColumns.list()},
      {kProclaim, kProclaimColumns.list()},
      {kDeleteIfOwner, kDeleteIfOwnerColumns.list()},
      {kDeleteHolderIfOwner, kDeleteIfOwnerColumns.list()},
      {kGrantTableOf, kGrantTableOfColumns.list()},
      {kOpenSession, kOpenSessionColumns.list()},
      {kHeartbeat, kHeartbeatColumns.list()},
      {kGetSession, kGetSessionColumns.list()},
      {kListSessions, kListSessionsColumns.list()},
      {kReapSessions, kReapSessionsColumns.list()},
      {kCloseSession, kCloseSessionColumns.list()},
      {kHandover, kHandoverColumns.list()},
      {kLastReached, kLastReachedColumns.list()},
      {kReadHolders, kReadHoldersColumns.list()},
      {kRead, kReadColumns.list()},
      {kList, kListColumns.list()},
      {kSessionGrants, kSessionGrantsColumns.list()},
      {kSessionLive, kSessionLiveColumns.list()},
      {kHoldersOfKey, kHoldersOfKeyColumns.list()},
      {kUpsertHolder, kUpsertHolderColumns.list()},
      {kEndDelays, kEndDelaysColumns.list()},
      {kKeyInDelay, kKeyInDelayColumns.list()},
      {kDelaysByPrefix, kDelaysByPrefixColumns.list()},
  };
  for (const auto* table : {&kGrants, &kHolders}) {
    statements.push_back({table->extend, kExtendColumns.list()});
    statements.push_back({table->check_session_bound, kCheckSessionBoundColumns.list()});
    statements.push_back({table->reap, kReapColumns.list()});
    statements.push_back({table->close, kCloseColumns.list()});
    statements.push_back({table->revoke, kRevokeColumns.list()});
  }
  return statements;
}

}  // namespace dlock::store::sqlite::sql
