#pragma once

// The SQLite store's lock statements that the raw benchmark path (bench/raw_paths.cc) sends as
// they are, as PostgreSQL's are in store/pg/pg_statements.h. SQL text only.

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

// The columns a LockInfo is read from (lock_info_from): column 5 is the expiry the grant reports,
// column 6 whether it is session-bound, column 7 its mode, column 8 its permit limit, column 9 an
// election leader's value (NULL for any other grant).
#define DLOCK_SQLITE_COLUMNS_IN(t, mode_limit_and_value)              \
  t ".key, " t ".owner_id, " t ".session_id, " t ".fencing_token, " t \
    ".acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY_IN(                    \
        t) ", typeof(" t ".expires_at) = 'null', " mode_limit_and_value

namespace dlock::store::sqlite::sql {

inline constexpr const char* kNextToken =
    "UPDATE fencing_token_seq SET value = value + 1 WHERE id = 1 RETURNING value";

// The restore floor (ADR-0010): at open the counter is raised to at least ?1, the microseconds
// since the Unix epoch by the process clock (the embedded store's clock; SQLite's own 'now' is
// the same clock in whole ms), so a file copied back from a backup cannot hand out again a token
// issued after that backup. Never lowers the counter.
inline constexpr const char* kRaiseTokenFloor =
    "UPDATE fencing_token_seq SET value = max(value, ?1) WHERE id = 1";

// Same shape as the PostgreSQL acquire statement (C1); the token bound as ?4 was taken from the
// durable counter in the same transaction, and both branches store it. ?5 is the TTL in ms, left
// unbound (NULL) for a session-bound grant, whose expires_at is then NULL. ?6 is an election
// leader's value (LockStore::try_insert_leader), left unbound (NULL) for a plain lock; both
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
    "RETURNING fencing_token, acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY ", " DLOCK_SQLITE_NOW;

// proclaim (ADR-0020, "Leader election"): the value ?5 replaces the value of the live exclusive
// grant of key ?1 with owner ?2, session ?3 and token ?4; the token and expires_at stay. Returns
// the grant in DLOCK_SQLITE_COLUMNS_IN's columns (as kGrants.columns, so as read reports it); no
// row when no such grant lives.
inline constexpr const char* kProclaim =
    "UPDATE locks SET value = ?5 WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "
    "AND fencing_token = ?4 AND " DLOCK_SQLITE_LIVE_GRANT
    " RETURNING " DLOCK_SQLITE_COLUMNS_IN("locks", "'exclusive', 0, locks.value");

// Release: deletes the grant only if it is still this holder's; one row whose first value says
// whether it was still live. The same for a shared or permit holder, by its token. The second
// value is when the lock-delay of a grant that had already ended is over, if it is not yet (else
// 0): a late release does not cancel it (C2 "Lock-delay").
#define DLOCK_SQLITE_DELETE_IF_OWNER_IN(t) \
  "DELETE FROM " t                                                                               \
  " WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "                                       \
  "AND fencing_token = ?4 RETURNING " DLOCK_SQLITE_LIVE_IN(t) ", CASE WHEN " DLOCK_SQLITE_LIVE_IN( \
      t) " THEN 0 WHEN " DLOCK_SQLITE_IN_DELAY_IN(t) " THEN " DLOCK_SQLITE_GRANT_EXPIRY_IN(t)     \
      " + " DLOCK_SQLITE_DELAY_IN(t) " ELSE 0 END"
inline constexpr const char* kDeleteIfOwner = DLOCK_SQLITE_DELETE_IF_OWNER_IN("locks");
inline constexpr const char* kDeleteHolderIfOwner = DLOCK_SQLITE_DELETE_IF_OWNER_IN("lock_holders");

// Sessions: open ?1 for owner ?2 with TTL ?3 ms and lock-delay ?4 ms (C2 "Lock-delay"); renew ?1
// if it is live; read ?1 if it is live. The last two return the columns session_from reads.
inline constexpr const char* kOpenSession =
    "INSERT INTO lock_session (session_id, owner_id, ttl_ms, created_at, expires_at, "
    "lock_delay_ms) VALUES (?1, ?2, ?3, " DLOCK_SQLITE_NOW ", " DLOCK_SQLITE_NOW
    " + ?3, ?4) RETURNING expires_at";
inline constexpr const char* kHeartbeat =
    "UPDATE lock_session SET expires_at = " DLOCK_SQLITE_NOW
    " + ttl_ms WHERE session_id = ?1 AND expires_at > " DLOCK_SQLITE_NOW
    " RETURNING owner_id, ttl_ms, expires_at, lock_delay_ms";
inline constexpr const char* kGetSession =
    "SELECT owner_id, ttl_ms, expires_at, lock_delay_ms FROM lock_session "
    "WHERE session_id = ?1 AND expires_at > " DLOCK_SQLITE_NOW;

// resume_clock (docs/adr/0013-sqlite-store-clock.md): the latest instant an earlier run provably
// reached (its latest grant, session creation or keepalive; 0 when nothing is persisted), and
// whether any lease, session or lock-delay (C2 "Lock-delay") was live then.
inline constexpr const char* kLastReached =
    "WITH reached(t) AS (SELECT coalesce(max(t), 0) FROM ("
    "SELECT max(acquired_at) AS t FROM locks "
    "UNION ALL SELECT max(acquired_at) FROM lock_holders "
    "UNION ALL SELECT max(created_at) FROM lock_session "
    "UNION ALL SELECT max(expires_at - ttl_ms) FROM lock_session)) "
    "SELECT t, EXISTS (SELECT 1 FROM locks, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_holders, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_session, reached WHERE expires_at > t) "
    "OR EXISTS (SELECT 1 FROM lock_delays, reached WHERE ends_at > t) "
    "FROM reached";

// The SQL fragments of one table of grants: `locks` (exclusive) or `lock_holders` (shared and
// permit holders, ADR-0020). Both have the columns key, owner_id, session_id, fencing_token,
// acquired_at and expires_at with the same meaning, so most statements are written once for both.
struct GrantTable {
  const char* name;
  const char* live;          // DLOCK_SQLITE_LIVE_IN
  const char* expiry;        // DLOCK_SQLITE_GRANT_EXPIRY_IN
  const char* live_session;  // DLOCK_SQLITE_LIVE_SESSION_IN
  const char* columns;       // DLOCK_SQLITE_COLUMNS_IN
  const char* mode;          // the row's HoldMode, spelt as to_string(HoldMode) does
  const char* delay;         // DLOCK_SQLITE_DELAY_IN
};

#define DLOCK_SQLITE_GRANT_TABLE(t, mode, limit, value)                                           \
  GrantTable {                                                                                    \
    t, DLOCK_SQLITE_LIVE_IN(t), DLOCK_SQLITE_GRANT_EXPIRY_IN(t), DLOCK_SQLITE_LIVE_SESSION_IN(t), \
        DLOCK_SQLITE_COLUMNS_IN(t, mode ", " limit ", " value), mode, DLOCK_SQLITE_DELAY_IN(t)    \
  }
inline constexpr GrantTable kGrants =
    DLOCK_SQLITE_GRANT_TABLE("locks", "'exclusive'", "0", "locks.value");
inline constexpr GrantTable kHolders = DLOCK_SQLITE_GRANT_TABLE(
    "lock_holders", "lock_holders.mode", "lock_holders.permit_limit", "NULL");

}  // namespace dlock::store::sqlite::sql
