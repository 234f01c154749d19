-- dlock PostgreSQL store, schema version 1 (contract C1). Applied by the server at start-up
-- under an advisory lock (pg_store.cc), once, whatever the number of servers starting.

-- The one token source for every key: gaps are legal, decreases are not.
CREATE SEQUENCE fencing_token_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE lock_session (
  session_id text        PRIMARY KEY,
  owner_id   text        NOT NULL,
  ttl_ms     bigint      NOT NULL CHECK (ttl_ms > 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX lock_session_expires_idx ON lock_session (expires_at);

CREATE TABLE locks (
  key           text        PRIMARY KEY,  -- "<namespace>/<key>"
  owner_id      text        NOT NULL,
  session_id    text        NOT NULL,
  fencing_token bigint      NOT NULL,
  acquired_at   timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL
);
CREATE INDEX locks_session_idx ON locks (session_id);
CREATE INDEX locks_expires_idx ON locks (expires_at);

-- A grant to a session that does not exist or has expired is refused inside the granting
-- statement itself (SQLSTATE DLS01), so acquire stays one statement and a dead session is
-- never granted. It fires for the INSERT of every acquire and for a hand-over's UPDATE.
CREATE FUNCTION dlock_check_session_alive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM lock_session s
                 WHERE s.session_id = NEW.session_id AND s.expires_at > now()) THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS01',
      MESSAGE = 'session not found or expired: ' || NEW.session_id;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER locks_session_alive BEFORE INSERT OR UPDATE OF session_id ON locks
  FOR EACH ROW EXECUTE FUNCTION dlock_check_session_alive();

-- Every removed grant is announced on channel dlock_release (payload: the key), delivered at
-- commit to every dlockd LISTENing on the database: waiters wake without polling.
CREATE FUNCTION dlock_notify_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('dlock_release', OLD.key);
  RETURN NULL;
END
$$;

CREATE TRIGGER locks_notify_release AFTER DELETE ON locks
  FOR EACH ROW EXECUTE FUNCTION dlock_notify_release();
