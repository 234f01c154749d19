#pragma once

// The SQLite store's lock statements that the raw benchmark path (bench/raw_paths.cc) sends as
// they are, as PostgreSQL's are in store/pg/pg_statements.h. SQL text only.

// The store's clock, in integer milliseconds since the Unix epoch. 'now' is fixed for the
// duration of one sqlite3_step, so every use inside one statement sees the same instant. The
// database is opened through a ClockVfs, so 'now' is StoreClock, not the host's wall clock: a
// step of that (NTP, an operator) would expire every lease at once or stretch every lease by the
// step (docs/adr/0013-sqlite-store-clock.md).
#define DLOCK_SQLITE_NOW "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"

// Whether the row `locks` is a live grant: until its own expiry or, session-bound (expires_at
// NULL, docs/adr/0018-session-bound-locks.md), exactly while its session is. Never NULL.
#define DLOCK_SQLITE_LIVE_GRANT                                                    \
  "(CASE WHEN locks.expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s " \
  "WHERE s.session_id = locks.session_id AND s.expires_at > " DLOCK_SQLITE_NOW     \
  ") "                                                                             \
  "ELSE locks.expires_at > " DLOCK_SQLITE_NOW " END)"

// The expiry a grant reports: its own, or its session's (0 once the session row is gone).
#define DLOCK_SQLITE_GRANT_EXPIRY                                        \
  "coalesce(locks.expires_at, (SELECT s.expires_at FROM lock_session s " \
  "WHERE s.session_id = locks.session_id), 0)"

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
// unbound (NULL) for a session-bound grant, whose expires_at is then NULL. Returns the token,
// acquired_at, the expiry the grant reports and the store's now.
inline constexpr const char* kAcquire =
    "INSERT INTO locks (key, owner_id, session_id, fencing_token, acquired_at, expires_at) "
    "VALUES (?1, ?2, ?3, ?4, " DLOCK_SQLITE_NOW ", " DLOCK_SQLITE_NOW
    " + ?5) "
    "ON CONFLICT (key) DO UPDATE SET owner_id = excluded.owner_id, "
    "  session_id = excluded.session_id, fencing_token = excluded.fencing_token, "
    "  acquired_at = excluded.acquired_at, expires_at = excluded.expires_at "
    "WHERE NOT " DLOCK_SQLITE_LIVE_GRANT
    "   OR (locks.owner_id = excluded.owner_id AND locks.session_id = excluded.session_id) "
    "RETURNING fencing_token, acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY ", " DLOCK_SQLITE_NOW;

// Release: deletes the grant only if it is still this holder's; one row whose value says
// whether it was still live.
inline constexpr const char* kDeleteIfOwner =
    "DELETE FROM locks WHERE key = ?1 AND owner_id = ?2 AND session_id = ?3 "
    "AND fencing_token = ?4 RETURNING " DLOCK_SQLITE_LIVE_GRANT;

inline constexpr const char* kLiveSessionClause =
    "EXISTS (SELECT 1 FROM lock_session s WHERE s.session_id = locks.session_id "
    "AND s.expires_at > " DLOCK_SQLITE_NOW ")";

// Column 5 is the expiry the grant reports, column 6 whether it is session-bound.
inline constexpr const char* kLockColumns =
    "key, owner_id, session_id, fencing_token, acquired_at, " DLOCK_SQLITE_GRANT_EXPIRY
    ", locks.expires_at IS NULL";

}  // namespace dlock::store::sqlite::sql
