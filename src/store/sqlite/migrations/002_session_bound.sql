-- dlock embedded store, schema version 2 (docs/adr/0018-session-bound-locks.md): session-bound
-- grants. A lock row whose expires_at is NULL has no TTL of its own: it is live exactly while its
-- session is. SQLite cannot drop a NOT NULL constraint in place, so `locks` is rebuilt with the
-- same columns and rows, and its indexes and triggers are re-created as in version 1.

CREATE TABLE locks_v2 (
  key           TEXT PRIMARY KEY,
  owner_id      TEXT NOT NULL,
  session_id    TEXT NOT NULL,
  fencing_token INTEGER NOT NULL,
  acquired_at   INTEGER NOT NULL,
  expires_at    INTEGER            -- NULL: session-bound
);
INSERT INTO locks_v2 (key, owner_id, session_id, fencing_token, acquired_at, expires_at)
  SELECT key, owner_id, session_id, fencing_token, acquired_at, expires_at FROM locks;
DROP TABLE locks;
ALTER TABLE locks_v2 RENAME TO locks;
CREATE INDEX locks_session ON locks (session_id);
CREATE INDEX locks_expires ON locks (expires_at);

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
