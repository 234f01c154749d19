-- dlock PostgreSQL store, schema version 3 (docs/adr/0018-session-bound-locks.md): session-bound
-- grants. A lock row whose expires_at is NULL has no TTL of its own: it is live exactly while its
-- session is (pg_statements.h, DLOCK_PG_LIVE).
ALTER TABLE locks ALTER COLUMN expires_at DROP NOT NULL;
