#pragma once

// Every SQL statement the PostgreSQL store runs, prepared once per pooled connection.
// Timestamps leave the database as integer microseconds since the epoch, computed from now():
// the lease clock is the database clock (C1 Warning 2). Nothing here takes a client time.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "store/pg/pg_connection.h"
#include "util/sql_columns.h"

#define DLOCK_PG_US(column) "(extract(epoch from " column ") * 1000000)::bigint"
#define DLOCK_PG_MS(param) param "::bigint * interval '1 millisecond'"
// Whether the row `t` is a live grant: until its own expiry or, session-bound (expires_at NULL,
// docs/adr/0018-session-bound-locks.md), exactly while its session is. Never NULL.
#define DLOCK_PG_LIVE(t)                                                    \
  "(CASE WHEN " t                                                           \
  ".expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s "          \
  "WHERE s.session_id = " t ".session_id AND s.expires_at > now()) ELSE " t \
  ".expires_at > now() "                                                    \
  "END)"
// The same, for statements that end a session-bound grant because its session is dead (acquire's
// takeover, the reap): the session row is read FOR SHARE whatever its expiry, so a heartbeat
// in flight is waited for and its renewed expiry seen (READ COMMITTED re-reads a locked row), and
// a heartbeat arriving later waits for this statement and then finds the session expired
// (kHeartbeat checks clock_timestamp()). A session cannot be renewed under a taken-over grant.
// A take-over compares with now(), the time expiries are set from (a grant's expiry is its
// batch's now() + TTL): judged against the later real time, a take-over could come before the
// deadline an extend promised (ExtendAnswersNoMoreThanTheBackendKeeps/pg).
#define DLOCK_PG_LIVE_LOCKING(t)                                    \
  "(CASE WHEN " t                                                   \
  ".expires_at IS NULL THEN coalesce((SELECT s.expires_at > now() " \
  "FROM lock_session s WHERE s.session_id = " t                     \
  ".session_id FOR SHARE), false) "                                 \
  "ELSE " t ".expires_at > now() END)"
// "Now" for a write that keeps or re-grants a row it may have waited for: clock_timestamp(), not
// now(). now() is its transaction's start -- a batch's (pg_batch.h), possibly before a revoke that
// ended the row (expires_at := the revoke's now(), in its lock-delay) and committed while this
// write waited for the row's lock. Compared with now(), READ COMMITTED's re-check of the revoked
// row finds it live: a release deleted it and its delay with it, an extend revived it, a
// re-entrant acquire or a hand-over re-granted it in its delay (tests/linearizability,
// found_release_racing_revoke_loses_delay.json; tests/store/pg_lock_delay_test.cc). Later than
// now(), so only ever sooner to find a grant ended, never later: used only where that ends the
// holder's own write (release, extend, hand-over, proclaim, a re-entrant acquire), never where it
// would let another session take the key over.
#define DLOCK_PG_NOW_LOCKED "clock_timestamp()"
// The expiry a grant reports: its own, or its session's (now() once the session row is gone).
#define DLOCK_PG_EXPIRY(t)                                 \
  "coalesce(" t                                            \
  ".expires_at, (SELECT s.expires_at FROM lock_session s " \
  "WHERE s.session_id = " t ".session_id), now())"
// The columns of sql::kLockRow: expires_us is the expiry the grant reports.
#define DLOCK_PG_LOCK_COLUMNS \
  "key, owner_id, session_id, fencing_token, " DLOCK_PG_US("acquired_at") " AS acquired_us, " \
  DLOCK_PG_US(DLOCK_PG_EXPIRY("locks")) " AS expires_us, "                    \
  "locks.expires_at IS NULL AS session_bound"

namespace dlock::store::pg {

// Every statement below under its name, as each pooled connection prepares them (pg_store.cc).
const std::vector<PreparedStatement>& prepared_statements();

}  // namespace dlock::store::pg

namespace dlock::store::pg::sql {

using util::SqlColumns;

// The result columns of each statement are named after it (util/sql_columns.h): the store reads
// them by name, and each pooled connection compares them with the prepared statement's own.
// The rows several statements share: a grant as DLOCK_PG_LOCK_COLUMNS returns it (the type
// dlock_holder_report of migrations/004_holder_sets.sql begins so), DLOCK_PG_GRANT_COLUMNS and
// DLOCK_PG_READ_COLUMNS.
inline constexpr SqlColumns kLockRow{"key",         "owner_id",   "session_id",   "fencing_token",
                                     "acquired_us", "expires_us", "session_bound"};
inline constexpr auto kGrantRow = kLockRow + SqlColumns{"mode", "permit_limit"};
inline constexpr auto kReadRow = kGrantRow + SqlColumns{"value"};
// A session as kHeartbeat, kGetSession and the start of kHeartbeatMany's and kListSessions' rows.
inline constexpr SqlColumns kSessionRow{"owner_id", "ttl_ms", "expires_us", "lock_delay_ms"};

// The literals `parts` joined into one, at compile time: two statements share their text without
// a macro.
template <std::size_t N>
struct SqlText {
  char text[N]{};
};
template <std::size_t... N>
constexpr auto join_sql(const char (&... parts)[N]) {
  SqlText<(N + ...) - sizeof...(N) + 1> joined;
  std::size_t at = 0;
  ((std::copy_n(parts, N - 1, joined.text + at), at += N - 1), ...);
  return joined;
}

// A new leader or a new value is announced on channel dlock_release like a removed grant (payload:
// the key $1; delivered at commit, to every dlockd LISTENing), so an election's observers wake
// through watch_releases. Written into the leader's statements, not a trigger on `locks`: even a
// trigger whose WHEN filters out rows without a value cost the plain acquire about 9k
// instructions (2.5 %) per call (measured, C1 "Elections"); a plain grant notifies nobody.
inline constexpr char kNotifyHead[] = "WITH written AS (";
inline constexpr char kNotifyTail[] =
    ") SELECT written.*, pg_notify('dlock_release', $1) FROM written";

// A token for `key`, minted under the key's fence (docs/adr/0021-pg-token-order.md): a
// transaction-scoped advisory lock on the key's 64-bit hash, taken before nextval. Every
// statement that mints a token of a key takes it first (dlock_grant_holder too, migration 006),
// so the grants of one key are minted one transaction after the other and a later grant always
// has the greater token. Without it, the acquire's insert path can use a token it took before it
// waited for a conflicting row that then vanished, while a grant with a greater token committed
// in between (the subquery with OFFSET 0 is evaluated as written: lock first, then nextval).
#define DLOCK_PG_FENCED_TOKEN(key)                                                                \
  "(SELECT nextval('fencing_token_seq') FROM (SELECT pg_advisory_xact_lock(hashtextextended(" key \
  ", 0)) OFFSET 0) AS fence)"

// C1 acquire: one statement, one round trip. One row -> granted, zero rows -> held.
// C1 Warning 1: BOTH tokens are required. Without the one in DO UPDATE a takeover of an expired
// lease (and a re-entrant re-acquire) re-issues the previous token. VALUES is evaluated before
// the conflict check, so the fence is held before any row lock; DO UPDATE's nextval runs under it.
// $4 is the TTL in ms, or 0 for a session-bound grant (never a valid TTL): expires_at NULL.
// `value` (migrations/005_elections.sql) is the leader's value for kAcquireLeader and NULL for
// kAcquire: every grant writes it, so a plain takeover or re-acquire of a leader's row drops it.
// Lock-delay (migrations/007_lock_delay.sql): the WHERE decides on the row's liveness once (a
// CASE): a live row is re-acquired by its own session only; a row that is no live grant is taken
// over once its delay is over (dlock_delay_over: an exclusive row's end plus its delay, a group
// row's holders out of theirs), by its own session too. A row without a delay pays one
// comparison; the one function call is set up at each execution (callgrind: the acquire costs
// ~5k instructions, ~1.5 %, more than before lock-delay -- a subquery for the delay in this
// statement cost ~20k, a second liveness test ~16k). The session trigger,
// which already reads the granted session, raises the row's lock_delay_ms (0 here and by
// default) to the session's when it has one.
// Returns the token, acquired_at, the expiry the grant reports and now().
inline constexpr char kAcquireHead[] =
    "INSERT INTO locks AS l (key, owner_id, session_id, value, fencing_token, acquired_at, "
    "expires_at) VALUES ($1, $2, $3, ";
inline constexpr char kAcquireTail[] =
    ", " DLOCK_PG_FENCED_TOKEN("$1") ", now(), "
    "now() + nullif($4::bigint, 0) * interval '1 millisecond') "
    "ON CONFLICT (key) DO UPDATE "
    "SET mode = 'exclusive', permit_limit = 0, value = EXCLUDED.value, "
    "owner_id = EXCLUDED.owner_id, session_id = EXCLUDED.session_id, "
    "lock_delay_ms = 0, acquired_at = EXCLUDED.acquired_at, "
    "expires_at = EXCLUDED.expires_at, "
    "fencing_token = nextval('fencing_token_seq') "
    "WHERE CASE WHEN " DLOCK_PG_LIVE_LOCKING("l") " "
    "THEN (l.owner_id, l.session_id) = (EXCLUDED.owner_id, EXCLUDED.session_id) "
    "AND (l.expires_at IS NULL OR l.expires_at > " DLOCK_PG_NOW_LOCKED ") "
    "ELSE l.lock_delay_ms = 0 OR dlock_delay_over(l) END "
    "RETURNING fencing_token, " DLOCK_PG_US("acquired_at") " AS acquired_us, " DLOCK_PG_US(
        DLOCK_PG_EXPIRY("l")) " AS expiry_us, " DLOCK_PG_US("now()") " AS now_us";
inline constexpr SqlColumns kAcquireColumns{"fencing_token", "acquired_us", "expiry_us", "now_us"};
inline constexpr auto kAcquireText = join_sql(kAcquireHead, "NULL", kAcquireTail);
inline constexpr const char* kAcquire = kAcquireText.text;
// An election's leader (ADR-0020): the same one statement, $5 the value, announced when granted.
// Columns as kAcquire's, then pg_notify's (void).
inline constexpr auto kAcquireLeaderText =
    join_sql(kNotifyHead, kAcquireHead, "$5", kAcquireTail, kNotifyTail);
inline constexpr const char* kAcquireLeader = kAcquireLeaderText.text;
inline constexpr auto kAcquireLeaderColumns = kAcquireColumns + SqlColumns{"pg_notify"};

// kRead, kReadHolders and kList see every grant: the exclusive rows of `locks` and the holders
// of `lock_holders` (never a group row, which is no grant), as one relation named `locks`.
// Columns as sql::kReadRow: the value is NULL but for a leader (migrations/005_elections.sql).
#define DLOCK_PG_GRANT_FIELDS \
  "key, owner_id, session_id, fencing_token, acquired_at, expires_at, mode, permit_limit"
#define DLOCK_PG_GRANTS(where)                                                              \
  "(SELECT " DLOCK_PG_GRANT_FIELDS ", value FROM locks WHERE mode = 'exclusive' AND " where \
  " UNION ALL SELECT " DLOCK_PG_GRANT_FIELDS ", NULL::text FROM lock_holders WHERE " where  \
  ") AS locks "                                                                             \
  "WHERE " DLOCK_PG_LIVE("locks")
#define DLOCK_PG_GRANT_COLUMNS DLOCK_PG_LOCK_COLUMNS ", mode, permit_limit"
#define DLOCK_PG_READ_COLUMNS DLOCK_PG_GRANT_COLUMNS ", value"

// The live grant with the greatest token (ADR-0020: of a holder set, its latest holder).
inline constexpr const char* kRead =
    "SELECT " DLOCK_PG_READ_COLUMNS
    " FROM " DLOCK_PG_GRANTS("key = $1") " ORDER BY fencing_token DESC LIMIT 1";
inline constexpr auto kReadColumns = kReadRow;

inline constexpr const char* kReadHolders =
    "SELECT " DLOCK_PG_READ_COLUMNS " FROM " DLOCK_PG_GRANTS("key = $1") " ORDER BY fencing_token";
inline constexpr auto kReadHoldersColumns = kReadRow;

// Pages (C2 "Paging") compare keys as bytes (COLLATE "C"), whatever the database's collation, so
// the order is every backend's and the cursor ($3, $4) picks up where the last page ended.
inline constexpr const char* kList = "SELECT " DLOCK_PG_READ_COLUMNS " FROM " DLOCK_PG_GRANTS(
    "starts_with(key, $1) AND (key COLLATE \"C\" > $3 OR key = $3 AND fencing_token > "
    "$4)") " ORDER BY key COLLATE \"C\", fencing_token LIMIT $2";
inline constexpr auto kListColumns = kReadRow;

// The grant of key $1, owner $2, session $3 and token $4, as the rows say what it is: the live
// exclusive TTL grant is extended to $5 ms from now. One row, (its new expiry, 'exclusive') when
// it was; (NULL, 'holder') when the token names a shared or permit holder (kExtendHolder's);
// (NULL, 'session_bound') for a session-bound exclusive grant (kCheckSessionBound's); no row
// when no grant has the token. One counter mints every token, so at most one row.
#define DLOCK_PG_GRANT_IS(t)                               \
  "SELECT 1 FROM " t                                       \
  " WHERE key = $1 AND owner_id = $2 AND session_id = $3 " \
  "AND fencing_token = $4"
inline constexpr const char* kExtend =
    "WITH extended AS (UPDATE locks SET expires_at = now() + " DLOCK_PG_MS("$5") " "
    "WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND expires_at > " DLOCK_PG_NOW_LOCKED " AND EXISTS (SELECT 1 FROM lock_session s "
    "WHERE s.session_id = locks.session_id AND s.expires_at > now()) "
    "RETURNING " DLOCK_PG_US("expires_at") " AS expiry) "
    "SELECT expiry AS expires_us, 'exclusive' AS kind FROM extended "
    "UNION ALL SELECT NULL, 'holder' WHERE EXISTS (" DLOCK_PG_GRANT_IS("lock_holders") ") "
    "UNION ALL SELECT NULL, 'session_bound' WHERE EXISTS (" DLOCK_PG_GRANT_IS(
        "locks") " AND expires_at IS NULL)";
inline constexpr SqlColumns kExtendColumns{"expires_us", "kind"};

// extend of a session-bound grant: a checked no-op answering the session's expiry (ADR-0018).
inline constexpr const char* kCheckSessionBound =
    "SELECT " DLOCK_PG_US(DLOCK_PG_EXPIRY("locks")) " AS expiry_us, "
    DLOCK_PG_US("now()") " AS now_us "
    "FROM locks WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND expires_at IS NULL AND " DLOCK_PG_LIVE("locks");
inline constexpr SqlColumns kCheckSessionBoundColumns{"expiry_us", "now_us"};

// `key`, once the key's fence (DLOCK_PG_FENCED_TOKEN) is held: the scan of a statement that
// compares a key with it cannot begin before the fence is taken (an InitPlan, as OFFSET 0 keeps
// it), so the statement takes the fence before any row lock of the key. A write that runs in a
// batch (pg_batch.h) keeps its row locks until COMMIT; a later write of the key in the same batch
// takes the fence, and a batch of another dlockd holding the fence and waiting for those rows
// would deadlock with it (ADR-0037).
#define DLOCK_PG_FENCED_KEY(key)                                                   \
  "(SELECT " key "::text FROM (SELECT pg_advisory_xact_lock(hashtextextended(" key \
  ", 0))) "                                                                        \
  "AS fence OFFSET 0)"

// A grant in its lock-delay (it ended without a release) is not released: it keeps the delay.
// The key's fence is taken first (DLOCK_PG_FENCED_KEY), for the exclusive row and for a holder.
// One row: whether it was live, for a deleted exclusive grant; what dlock_release_holder
// answered, when the token names a shared or permit holder, which that function releases in the
// same statement (ADR-0037; `locks` holds either the key's exclusive row or its group row, so
// the DELETE above and the function never touch one row); no row else.
inline constexpr const char* kDeleteIfOwner =
    "WITH deleted AS (DELETE FROM locks WHERE key = " DLOCK_PG_FENCED_KEY("$1") " "
    "AND owner_id = $2 AND session_id = $3 "
    "AND fencing_token = $4 AND mode = 'exclusive' "
    "AND (lock_delay_ms = 0 OR (expires_at IS NULL "
    "OR expires_at > " DLOCK_PG_NOW_LOCKED
    ") AND dlock_lock_live(locks)) "
    "RETURNING " DLOCK_PG_LIVE("locks") " AS live) "
    "SELECT live FROM deleted "
    "UNION ALL SELECT dlock_release_holder($1, $2, $3, $4) "
    "WHERE EXISTS (" DLOCK_PG_GRANT_IS("lock_holders") ")";
inline constexpr SqlColumns kDeleteIfOwnerColumns{"live"};

// Release and re-grant in one statement; the session trigger refuses a dead next session. Its
// token is fenced like the acquire's (the SET list is evaluated before the row is locked).
// $7 as kAcquire's $4: a TTL, or 0 for a grant bound to the next session. The next holder's grant
// is a plain one: a leader's value is dropped (ADR-0020). Announced on channel dlock_release with
// payload "<key>\t<new token>" (a key has no control character): the holder changed without a
// release (LockStore::watch_releases, ADR-0036).
inline constexpr const char* kHandover =
    "WITH written AS ("
    "UPDATE locks SET owner_id = $5, session_id = $6, value = NULL, "
    "lock_delay_ms = 0, "
    "fencing_token = " DLOCK_PG_FENCED_TOKEN("$1") ", acquired_at = now(), "
    "expires_at = now() + nullif($7::bigint, 0) * interval '1 millisecond' "
    "WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND mode = 'exclusive' AND " DLOCK_PG_LIVE("locks") " "
    "AND (lock_delay_ms = 0 OR expires_at IS NULL OR expires_at > " DLOCK_PG_NOW_LOCKED ") "
    "RETURNING fencing_token, "
    DLOCK_PG_US(DLOCK_PG_EXPIRY("locks")) " AS expiry_us, "
    DLOCK_PG_US("now()") " AS now_us) "
    "SELECT written.*, pg_notify('dlock_release', $1 || chr(9) || written.fencing_token) "
    "FROM written";
inline constexpr SqlColumns kHandoverColumns{"fencing_token", "expiry_us", "now_us", "pg_notify"};

// proclaim (ADR-0020): one guarded write of the value of the live exclusive grant that key, owner,
// session and token name, live as extend finds it (a TTL grant until its expiry, a session-bound
// one while its session is; either way its session live). Token, lease and expiry untouched.
// Announced as kAcquireLeader. Columns as kRead's, then pg_notify's (void).
inline constexpr char kProclaimUpdate[] =
    "UPDATE locks SET value = $5 "
    "WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND mode = 'exclusive' "
    "AND (expires_at IS NULL OR expires_at > " DLOCK_PG_NOW_LOCKED
    ") "
    "AND EXISTS (SELECT 1 FROM lock_session s "
    "WHERE s.session_id = locks.session_id AND s.expires_at > now()) "
    "RETURNING " DLOCK_PG_READ_COLUMNS;
inline constexpr auto kProclaimText = join_sql(kNotifyHead, kProclaimUpdate, kNotifyTail);
inline constexpr const char* kProclaim = kProclaimText.text;
inline constexpr auto kProclaimColumns = kReadRow + SqlColumns{"pg_notify"};

// Every holder of the key (migrations/004_holder_sets.sql; 007_lock_delay.sql: a live grant with a
// lock-delay ends and stays, in its delay): token, owner, live.
inline constexpr const char* kRevoke = "SELECT * FROM dlock_revoke($1)";
inline constexpr SqlColumns kRevokeColumns{"fencing_token", "owner_id", "live"};

// Lock-delay visibility (C2 "Lock-delay", migrations/009_delay_visibility.sql): the names in a
// delay by prefix (key, the end in microseconds since the epoch); an administrator's clear.
// dlock_delays with no limit (NULL), then the page: its key filter reaches into the inlined SQL
// function. Keys as bytes, as kList.
inline constexpr const char* kListDelays =
    "SELECT key, dlock_us(ends_at) AS ends_us FROM dlock_delays($1, NULL) "
    "WHERE key COLLATE \"C\" > $3 ORDER BY key COLLATE \"C\" LIMIT $2";
inline constexpr SqlColumns kListDelaysColumns{"key", "ends_us"};
inline constexpr const char* kClearDelay = "SELECT dlock_clear_delay($1) AS cleared";
inline constexpr SqlColumns kClearDelayColumns{"cleared"};

// Lock-delay (migrations/007_lock_delay.sql), before kReapLocks: a grant with a delay that ended
// with its session gets its end written: a session-bound one its session's expiry (now() once the
// session row is gone: later, never earlier), a TTL one of a dead session now(). It stays.
inline constexpr const char* kReapDelays =
    "UPDATE locks SET expires_at = CASE WHEN expires_at IS NULL THEN coalesce("
    "(SELECT s.expires_at FROM lock_session s WHERE s.session_id = locks.session_id), now()) "
    "ELSE now() END WHERE mode = 'exclusive' AND lock_delay_ms > 0 AND (expires_at IS NULL "
    "AND NOT " DLOCK_PG_LIVE_LOCKING("locks") " OR expires_at > now() AND NOT EXISTS ("
    "SELECT 1 FROM lock_session s WHERE s.session_id = locks.session_id AND s.expires_at > now()))";
inline constexpr SqlColumns<0> kReapDelaysColumns{};

// Expired grants, session-bound grants of dead sessions, and TTL grants of dead sessions, each
// once its lock-delay is over. Holders and their group rows: kReapHolders.
inline constexpr const char* kReapLocks =
    "DELETE FROM locks WHERE mode = 'exclusive' AND (NOT " DLOCK_PG_LIVE_LOCKING("locks") " OR "
    "(expires_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM lock_session s "
    "WHERE s.session_id = locks.session_id AND s.expires_at > now()))) "
    "AND (lock_delay_ms = 0 OR dlock_delay_over(locks)) "
    "RETURNING " DLOCK_PG_LOCK_COLUMNS;
inline constexpr auto kReapLocksColumns = kLockRow;

inline constexpr const char* kReapSessions =
    "DELETE FROM lock_session WHERE expires_at <= now() RETURNING session_id";
inline constexpr SqlColumns kReapSessionsColumns{"session_id"};

// $3: the session ID, minted by util::random_id() (128 bits from getrandom, contract C6):
// gen_random_uuid() has only 122 random bits.
// $4: the lock-delay in ms (migrations/007_lock_delay.sql).
inline constexpr const char* kOpenSession =
    "INSERT INTO lock_session (session_id, owner_id, ttl_ms, expires_at, lock_delay_ms) "
    "VALUES ($3, $1, $2, now() + " DLOCK_PG_MS("$2") ", $4) "
    "RETURNING session_id, " DLOCK_PG_US("expires_at") " AS expires_us";
inline constexpr SqlColumns kOpenSessionColumns{"session_id", "expires_us"};

// clock_timestamp(), not now(): re-evaluated after waiting for a statement that read the row
// FOR SHARE (DLOCK_PG_LIVE_LOCKING), so a session found dead there is never renewed here.
// dlock_heartbeat (migrations/004_holder_sets.sql) renews the session that way, then raises the
// group rows of its session-bound holders in the same transaction (ADR-0020).
// Returns owner_id, ttl_ms, the new expiry and the lock-delay (which never changes).
inline constexpr const char* kHeartbeat =
    "SELECT h.*, (SELECT s.lock_delay_ms FROM lock_session s WHERE s.session_id = $1) "
    "AS lock_delay_ms FROM dlock_heartbeat($1) h";
inline constexpr auto kHeartbeatColumns = kSessionRow;

// The heartbeats of one batch in one statement (docs/adr/0027-pg-heartbeats-in-one-statement.md):
// dlock_heartbeat over the array $1 of session IDs, one row per session renewed (none for one
// not found or expired, as kHeartbeat), kHeartbeat's columns with the session ID and `false`
// after them. A group row shared by several of these sessions is raised to the latest of their
// expiries, as their heartbeats one by one would. A session row another transaction has locked
// (a takeover's FOR SHARE, an operator) is skipped, not waited for, and answered with a row of
// its session ID and `true`: its heartbeat runs again alone, and waits there (ADR-0028), so one
// locked row does not hold up its batch mates.
inline constexpr const char* kHeartbeatMany =
    "WITH target AS ("
    "SELECT session_id FROM lock_session WHERE session_id = ANY($1::text[]) "
    "FOR UPDATE SKIP LOCKED), "
    "renewed AS ("
    "UPDATE lock_session s SET expires_at = now() + s.ttl_ms * interval '1 millisecond' "
    "FROM target t WHERE s.session_id = t.session_id AND s.expires_at > clock_timestamp() "
    "RETURNING s.session_id, s.owner_id, s.ttl_ms, s.expires_at, s.lock_delay_ms), "
    "raised AS ("
    "UPDATE locks l SET expires_at = m.expires_at "
    "FROM (SELECT h.key, max(r.expires_at) AS expires_at FROM lock_holders h "
    "JOIN renewed r ON r.session_id = h.session_id WHERE h.expires_at IS NULL "
    "GROUP BY h.key) m "
    "WHERE l.key = m.key AND l.mode <> 'exclusive' AND l.expires_at < m.expires_at) "
    "SELECT r.owner_id, r.ttl_ms, " DLOCK_PG_US("r.expires_at") " AS expires_us, r.lock_delay_ms, "
    "r.session_id, false AS skipped FROM renewed r "
    "UNION ALL SELECT NULL, NULL, NULL, NULL, s.session_id, true FROM lock_session s "
    "WHERE s.session_id = ANY($1::text[]) "
    "AND NOT EXISTS (SELECT 1 FROM target t WHERE t.session_id = s.session_id)";
// A renewed session's row is read as kHeartbeat's (pg_batch.cc slices it out for its heartbeat).
inline constexpr auto kHeartbeatManyColumns =
    kHeartbeatColumns + SqlColumns{"session_id", "skipped"};
static_assert(kHeartbeatManyColumns.starts_with(kHeartbeatColumns));

// Visibility (C3 "Sessions"): the live sessions of an owner prefix after an ID, by ID; and a
// session's live grants, by key.
inline constexpr const char* kListSessions =
    "SELECT owner_id, ttl_ms, " DLOCK_PG_US("expires_at") " AS expires_us, lock_delay_ms, "
    "session_id FROM lock_session WHERE expires_at > now() AND starts_with(owner_id, $1) "
    "AND session_id > $2 ORDER BY session_id LIMIT $3";
inline constexpr auto kListSessionsColumns = kSessionRow + SqlColumns{"session_id"};
inline constexpr const char* kSessionGrants =
    "SELECT " DLOCK_PG_READ_COLUMNS
    " FROM " DLOCK_PG_GRANTS("session_id = $1") " ORDER BY key, fencing_token";
inline constexpr auto kSessionGrantsColumns = kReadRow;

inline constexpr const char* kGetSession =
    "SELECT owner_id, ttl_ms, " DLOCK_PG_US("expires_at") " AS expires_us, lock_delay_ms "
    "FROM lock_session WHERE session_id = $1 AND expires_at > now()";
inline constexpr auto kGetSessionColumns = kSessionRow;

// Only a live session is closed: an expired one stays for the reaper, which first writes the end
// of its session-bound grants from its expiry (kReapDelays), so their lock-delays run from there.
inline constexpr const char* kCloseSession =
    "DELETE FROM lock_session WHERE session_id = $1 AND expires_at > now() "
    "RETURNING expires_at > now() AS live";
inline constexpr SqlColumns kCloseSessionColumns{"live"};

// After kCloseSession (no new grant can follow): a session-bound grant was live if its session
// was, which kCloseSession reports. A TTL grant that had expired keeps its lock-delay.
inline constexpr const char* kReleaseSessionLocks =
    "DELETE FROM locks WHERE session_id = $1 AND (lock_delay_ms = 0 OR expires_at IS NULL OR "
    "expires_at + lock_delay_ms * interval '1 millisecond' <= now() OR expires_at > now()) "
    "RETURNING " DLOCK_PG_LOCK_COLUMNS ", coalesce(expires_at > now(), true) AS live";
inline constexpr auto kReleaseSessionLocksColumns = kLockRow + SqlColumns{"live"};

// Holder sets (docs/adr/0020-more-primitives-design.md), PL/pgSQL functions of
// migrations/004_holder_sets.sql, one round trip each. Batched like the exclusive writes
// (ADR-0037); they judge time at statement_timestamp(), the start of their statement in the batch
// (migrations/010_holder_statement_time.sql).
// $4 a TTL in ms or 0 (session-bound), $5 "shared" or "permit", $6 the limit. No rows: held.
// Returns the token, acquired_at, the expiry the holder reports and now().
inline constexpr const char* kGrantHolder =
    "SELECT * FROM dlock_grant_holder($1, $2, $3, $4, $5, $6)";
inline constexpr auto kGrantHolderColumns = kAcquireColumns;
// $5 the TTL in ms. Returns the expiry, now(), whether the holder is session-bound, its mode.
inline constexpr const char* kExtendHolder =
    "SELECT * FROM dlock_extend_holder($1, $2, $3, $4, $5)";
inline constexpr SqlColumns kExtendHolderColumns{"expiry_us", "now_us", "session_bound", "mode"};
// Columns as DLOCK_PG_GRANT_COLUMNS, then whether the holder was live.
inline constexpr const char* kReapHolders = "SELECT * FROM dlock_reap_holders()";
inline constexpr auto kReapHoldersColumns = kGrantRow + SqlColumns{"live"};
inline constexpr const char* kReleaseSessionHolders =
    "SELECT * FROM dlock_release_session_holders($1)";
inline constexpr auto kReleaseSessionHoldersColumns = kReapHoldersColumns;

}  // namespace dlock::store::pg::sql
