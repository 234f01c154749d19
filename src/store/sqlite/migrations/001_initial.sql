-- dlock embedded store, schema version 1. Mirrors the PostgreSQL schema (C1); times are
-- integer milliseconds since the Unix epoch taken from SQLite's clock in the statement itself.

-- The durable token counter: one row, only ever incremented, inside the granting transaction.
CREATE TABLE fencing_token_seq (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  value INTEGER NOT NULL
);
INSERT INTO fencing_token_seq (id, value) VALUES (1, 0);

CREATE TABLE lock_session (
  session_id TEXT PRIMARY KEY,
  owner_id   TEXT NOT NULL,
  ttl_ms     INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX lock_session_expires ON lock_session (expires_at);

CREATE TABLE locks (
  key           TEXT PRIMARY KEY,
  owner_id      TEXT NOT NULL,
  session_id    TEXT NOT NULL,
  fencing_token INTEGER NOT NULL,
  acquired_at   INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL
);
CREATE INDEX locks_session ON locks (session_id);
CREATE INDEX locks_expires ON locks (expires_at);

-- A grant to a session that does not exist or has expired is refused inside the granting
-- statement itself, so acquire stays one statement and a dead session is never granted.
CREATE TRIGGER locks_session_alive_on_insert BEFORE INSERT ON locks
WHEN NOT EXISTS (SELECT 1 FROM lock_session s
                 WHERE s.session_id = NEW.session_id AND s.expires_at > NEW.acquired_at)
BEGIN
  SELECT RAISE(ABORT, 'dlock_session_not_found');
END;

CREATE TRIGGER locks_session_alive_on_update BEFORE UPDATE OF session_id ON locks
WHEN NOT EXISTS (SELECT 1 FROM lock_session s
                 WHERE s.session_id = NEW.session_id AND s.expires_at > NEW.acquired_at)
BEGIN
  SELECT RAISE(ABORT, 'dlock_session_not_found');
END;
