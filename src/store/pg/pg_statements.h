#pragma once

// Every SQL statement the PostgreSQL store runs, prepared once per pooled connection.
// Timestamps leave the database as integer microseconds since the epoch, computed from now():
// the lease clock is the database clock (C1 Warning 2). Nothing here takes a client time.

#define DLOCK_PG_US(column) "(extract(epoch from " column ") * 1000000)::bigint"
#define DLOCK_PG_MS(param) param "::bigint * interval '1 millisecond'"
#define DLOCK_PG_LOCK_COLUMNS                                                               \
  "key, owner_id, session_id, fencing_token, " DLOCK_PG_US("acquired_at") ", " DLOCK_PG_US( \
      "expires_at")

namespace dlock::store::pg::sql {

// C1 acquire: one statement, one round trip. One row -> granted, zero rows -> held.
// C1 Warning 1: BOTH nextval('fencing_token_seq') are required. Without the one in DO UPDATE a
// takeover of an expired lease (and a re-entrant re-acquire) re-issues the previous token.
inline constexpr const char* kAcquire =
    "INSERT INTO locks AS l (key, owner_id, session_id, fencing_token, acquired_at, expires_at) "
    "VALUES ($1, $2, $3, nextval('fencing_token_seq'), now(), now() + " DLOCK_PG_MS("$4") ") "
    "ON CONFLICT (key) DO UPDATE "
    "SET owner_id = EXCLUDED.owner_id, session_id = EXCLUDED.session_id, "
    "acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at, "
    "fencing_token = nextval('fencing_token_seq') "
    "WHERE l.expires_at <= now() "
    "OR (l.owner_id, l.session_id) = (EXCLUDED.owner_id, EXCLUDED.session_id) "
    "RETURNING fencing_token, " DLOCK_PG_US("acquired_at") ", " DLOCK_PG_US("expires_at");

inline constexpr const char* kRead =
    "SELECT " DLOCK_PG_LOCK_COLUMNS " FROM locks WHERE key = $1 AND expires_at > now()";

inline constexpr const char* kList = "SELECT " DLOCK_PG_LOCK_COLUMNS
                                     " FROM locks WHERE starts_with(key, $1) "
                                     "AND expires_at > now() ORDER BY key LIMIT $2";

inline constexpr const char* kExtend =
    "UPDATE locks SET expires_at = now() + " DLOCK_PG_MS("$5") " "
    "WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND expires_at > now() AND EXISTS (SELECT 1 FROM lock_session s "
    "WHERE s.session_id = locks.session_id AND s.expires_at > now()) "
    "RETURNING " DLOCK_PG_US("expires_at");

inline constexpr const char* kDeleteIfOwner =
    "DELETE FROM locks WHERE key = $1 AND owner_id = $2 AND session_id = $3 "
    "AND fencing_token = $4 RETURNING expires_at > now()";

// Release and re-grant in one statement; the session trigger refuses a dead next session.
inline constexpr const char* kHandover =
    "UPDATE locks SET owner_id = $5, session_id = $6, "
    "fencing_token = nextval('fencing_token_seq'), acquired_at = now(), "
    "expires_at = now() + " DLOCK_PG_MS("$7") " "
    "WHERE key = $1 AND owner_id = $2 AND session_id = $3 AND fencing_token = $4 "
    "AND expires_at > now() RETURNING fencing_token, " DLOCK_PG_US("expires_at");

inline constexpr const char* kRevoke =
    "DELETE FROM locks WHERE key = $1 RETURNING fencing_token, owner_id, expires_at > now()";

inline constexpr const char* kReapLocks =
    "DELETE FROM locks WHERE expires_at <= now() OR NOT EXISTS (SELECT 1 FROM lock_session s "
    "WHERE s.session_id = locks.session_id AND s.expires_at > now()) "
    "RETURNING " DLOCK_PG_LOCK_COLUMNS;

inline constexpr const char* kReapSessions =
    "DELETE FROM lock_session WHERE expires_at <= now() RETURNING session_id";

// $3: the session ID, minted by util::random_id() (128 bits from getrandom, contract C6):
// gen_random_uuid() has only 122 random bits.
inline constexpr const char* kOpenSession =
    "INSERT INTO lock_session (session_id, owner_id, ttl_ms, expires_at) "
    "VALUES ($3, $1, $2, now() + " DLOCK_PG_MS("$2") ") "
    "RETURNING session_id, " DLOCK_PG_US("expires_at");

inline constexpr const char* kHeartbeat =
    "UPDATE lock_session SET expires_at = now() + ttl_ms * interval '1 millisecond' "
    "WHERE session_id = $1 AND expires_at > now() "
    "RETURNING owner_id, ttl_ms, " DLOCK_PG_US("expires_at");

inline constexpr const char* kGetSession =
    "SELECT owner_id, ttl_ms, " DLOCK_PG_US("expires_at") " FROM lock_session "
    "WHERE session_id = $1 AND expires_at > now()";

inline constexpr const char* kCloseSession =
    "DELETE FROM lock_session WHERE session_id = $1 RETURNING expires_at > now()";

inline constexpr const char* kReleaseSessionLocks =
    "DELETE FROM locks WHERE session_id = $1 RETURNING " DLOCK_PG_LOCK_COLUMNS
    ", expires_at > now()";

}  // namespace dlock::store::pg::sql
