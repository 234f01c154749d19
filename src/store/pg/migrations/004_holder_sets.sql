-- dlock PostgreSQL store, schema version 4 (docs/adr/0020-more-primitives-design.md): holder sets,
-- shared holders (the read side of a read-write lock) and permits (a counting semaphore).
--
-- A name held by shared or permit holders has a *group row* in `locks`: mode 'shared' or
-- 'permit', owner_id and session_id '' (never valid for a real grant, so the exclusive acquire's
-- re-entrant clause never matches it and the session trigger skips it), expires_at no earlier
-- than the latest expiry of its live holders. The exclusive acquire (pg_statements.h, kAcquire)
-- therefore keeps its one statement: a live group row is a live holder to it. The holders
-- themselves live in `lock_holders`, one row per (name, session).
--
-- The READ COMMITTED hazard (ADR-0020): one statement sees the rows as of its start, also after
-- it waited for a row lock. So every decision about the holders of a name (count them, recompute
-- the group expiry, delete them) is a statement of its own AFTER the statement that locked the
-- group row. Each statement of a (volatile) PL/pgSQL function takes a new snapshot.
--
-- Lock order, to keep deadlocks out: session row (FOR SHARE, grants), then group row, then
-- holder rows. A heartbeat updates its session row, then raises the group rows of its
-- session-bound holders (dlock_heartbeat).

ALTER TABLE locks
  ADD COLUMN mode text NOT NULL DEFAULT 'exclusive'
    CHECK (mode IN ('exclusive', 'shared', 'permit')),
  ADD COLUMN permit_limit integer NOT NULL DEFAULT 0;

CREATE TABLE lock_holders (
  key           text        NOT NULL,
  session_id    text        NOT NULL,
  owner_id      text        NOT NULL,
  fencing_token bigint      NOT NULL,
  acquired_at   timestamptz NOT NULL,
  expires_at    timestamptz,  -- NULL: session-bound (ADR-0018)
  mode          text        NOT NULL CHECK (mode IN ('shared', 'permit')),
  permit_limit  integer     NOT NULL,
  PRIMARY KEY (key, session_id)
);
CREATE INDEX lock_holders_session_idx ON lock_holders (session_id);

-- A group row has no session of its own: only exclusive grants are checked (schema version 1).
CREATE OR REPLACE FUNCTION dlock_check_session_alive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.mode = 'exclusive' AND NOT EXISTS (SELECT 1 FROM lock_session s
                 WHERE s.session_id = NEW.session_id AND s.expires_at > now()) THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS01',
      MESSAGE = 'session not found or expired: ' || NEW.session_id;
  END IF;
  RETURN NEW;
END
$$;

-- A removed holder wakes the waiters like a removed lock (schema version 1).
CREATE TRIGGER lock_holders_notify_release AFTER DELETE ON lock_holders
  FOR EACH ROW EXECUTE FUNCTION dlock_notify_release();

-- Whether holder `h` is live: until its own expiry or, session-bound, while its session is.
CREATE FUNCTION dlock_holder_live(h lock_holders) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN h.expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s
              WHERE s.session_id = h.session_id AND s.expires_at > now())
         ELSE h.expires_at > now() END
$$;

-- The expiry holder `h` reports: its own, or its session's (now() once the session is gone).
CREATE FUNCTION dlock_holder_expiry(h lock_holders) RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT coalesce(h.expires_at, (SELECT s.expires_at FROM lock_session s
                                 WHERE s.session_id = h.session_id), now())
$$;

CREATE FUNCTION dlock_us(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT (extract(epoch FROM t) * 1000000)::bigint
$$;

-- After the holders of `p_key` changed: lock the group row, THEN (a new statement, so holders
-- committed while this waited are seen) lower its expiry to the latest live holder's, or delete
-- it when none is left.
CREATE FUNCTION dlock_settle_group(p_key text) RETURNS void LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_latest timestamptz;
BEGIN
  PERFORM 1 FROM locks WHERE key = p_key AND mode <> 'exclusive' FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT max(dlock_holder_expiry(h)) INTO v_latest
    FROM lock_holders h WHERE h.key = p_key AND dlock_holder_live(h);
  IF v_latest IS NULL THEN
    DELETE FROM locks WHERE key = p_key;
  ELSE
    UPDATE locks SET expires_at = v_latest WHERE key = p_key;
  END IF;
END
$$;

-- try_insert_holder: one round trip. No rows: held. SQLSTATE DLS01: dead session; DLS02: the
-- live permit holders of other sessions agreed on another limit (the message names it).
-- p_ttl_ms 0 asks for a session-bound holder.
CREATE FUNCTION dlock_grant_holder(p_key text, p_owner text, p_session text, p_ttl_ms bigint,
                                   p_mode text, p_limit integer)
RETURNS TABLE (fencing_token bigint, acquired_us bigint, expiry_us bigint, now_us bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_session_expiry timestamptz;
  v_expiry timestamptz;
  v_fresh integer;
  v_mode text;
  v_others integer;
  v_other_mode boolean;
  v_other_limit integer;
  v_others_latest timestamptz;
  v_token bigint;
BEGIN
  -- FOR SHARE: a heartbeat of this session waits for this grant, then raises the group row
  -- over the holder it can now see (dlock_heartbeat); close_session waits too, then finds it.
  SELECT s.expires_at INTO v_session_expiry FROM lock_session s
    WHERE s.session_id = p_session AND s.expires_at > now() FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS01', MESSAGE = 'session not found or expired: ' || p_session;
  END IF;
  v_expiry := CASE WHEN p_ttl_ms = 0 THEN v_session_expiry
                   ELSE now() + p_ttl_ms * interval '1 millisecond' END;

  -- The group row: created, taken over when its grant is gone, and in every case locked until
  -- COMMIT (ON CONFLICT DO UPDATE locks the row even when its WHERE is false).
  INSERT INTO locks AS l (key, owner_id, session_id, fencing_token, acquired_at, expires_at, mode,
                          permit_limit)
    VALUES (p_key, '', '', 0, now(), v_expiry, p_mode, p_limit)
    ON CONFLICT (key) DO UPDATE
      SET owner_id = '', session_id = '', acquired_at = now(), expires_at = EXCLUDED.expires_at,
          mode = EXCLUDED.mode, permit_limit = EXCLUDED.permit_limit
      WHERE NOT (CASE WHEN l.expires_at IS NULL
                      THEN coalesce((SELECT s.expires_at > now() FROM lock_session s
                                     WHERE s.session_id = l.session_id FOR SHARE), false)
                      ELSE l.expires_at > now() END);
  GET DIAGNOSTICS v_fresh = ROW_COUNT;
  IF v_fresh = 1 THEN
    -- A new holder set: what is left of an earlier one is expired.
    DELETE FROM lock_holders h WHERE h.key = p_key AND NOT dlock_holder_live(h);
  END IF;
  SELECT l.mode INTO v_mode FROM locks l WHERE l.key = p_key;
  IF v_mode <> p_mode THEN
    RETURN;  -- a live exclusive grant or holders of the other mode
  END IF;

  -- A new statement after the lock: sees every holder committed while we waited for it.
  SELECT count(*) FILTER (WHERE h.session_id <> p_session),
         coalesce(bool_or(h.mode <> p_mode), false),
         max(h.permit_limit) FILTER (WHERE h.session_id <> p_session
                                     AND h.permit_limit <> p_limit),
         max(dlock_holder_expiry(h)) FILTER (WHERE h.session_id <> p_session)
    INTO v_others, v_other_mode, v_other_limit, v_others_latest
    FROM lock_holders h WHERE h.key = p_key AND dlock_holder_live(h);
  IF v_other_mode THEN
    RETURN;
  END IF;
  IF p_mode = 'permit' AND v_other_limit IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS02', MESSAGE = 'semaphore ' || p_key || ' has '
      || v_other_limit || ' permits, not ' || p_limit;
  END IF;
  IF p_mode = 'permit' AND v_others >= p_limit THEN
    RETURN;
  END IF;

  v_token := nextval('fencing_token_seq');
  INSERT INTO lock_holders AS h (key, session_id, owner_id, fencing_token, acquired_at,
                                 expires_at, mode, permit_limit)
    VALUES (p_key, p_session, p_owner, v_token, now(),
            CASE WHEN p_ttl_ms = 0 THEN NULL ELSE v_expiry END, p_mode, p_limit)
    ON CONFLICT (key, session_id) DO UPDATE
      SET owner_id = EXCLUDED.owner_id, fencing_token = EXCLUDED.fencing_token,
          acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
          mode = EXCLUDED.mode, permit_limit = EXCLUDED.permit_limit;
  -- The latest of the others and this one (which may replace a longer lease of its own).
  UPDATE locks SET expires_at = greatest(v_others_latest, v_expiry), fencing_token = v_token
    WHERE key = p_key;
  RETURN QUERY SELECT v_token, dlock_us(now()), dlock_us(v_expiry), dlock_us(now());
END
$$;

-- delete_if_owner of a holder. NULL: no such holder; else whether it was live.
CREATE FUNCTION dlock_release_holder(p_key text, p_owner text, p_session text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_live boolean;
BEGIN
  PERFORM 1 FROM locks WHERE key = p_key AND mode <> 'exclusive' FOR UPDATE;
  DELETE FROM lock_holders h
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token
    RETURNING dlock_holder_live(h) INTO v_live;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  PERFORM dlock_settle_group(p_key);
  RETURN v_live;
END
$$;

-- extend of a holder: a TTL holder gets now() + p_ttl_ms and raises its group row; a
-- session-bound one is a checked no-op (ADR-0018). No rows: not the live holder. Else its expiry,
-- now(), whether it is session-bound and its mode.
CREATE FUNCTION dlock_extend_holder(p_key text, p_owner text, p_session text, p_token bigint,
                                    p_ttl_ms bigint)
RETURNS TABLE (expiry_us bigint, now_us bigint, session_bound boolean, mode text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_expiry timestamptz;
  v_mode text;
BEGIN
  PERFORM 1 FROM locks WHERE key = p_key AND mode <> 'exclusive' FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE lock_holders h SET expires_at = now() + p_ttl_ms * interval '1 millisecond'
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token AND h.expires_at > now()
      AND EXISTS (SELECT 1 FROM lock_session s
                  WHERE s.session_id = h.session_id AND s.expires_at > now())
    RETURNING h.expires_at, h.mode INTO v_expiry, v_mode;
  IF FOUND THEN
    -- A new statement after the lock: the latest live holder (this one's lease may be shorter).
    UPDATE locks SET expires_at = (SELECT max(dlock_holder_expiry(h)) FROM lock_holders h
                                   WHERE h.key = p_key AND dlock_holder_live(h))
      WHERE key = p_key;
    RETURN QUERY SELECT dlock_us(v_expiry), dlock_us(now()), false, v_mode;
    RETURN;
  END IF;
  RETURN QUERY SELECT dlock_us(dlock_holder_expiry(h)), dlock_us(now()), true, h.mode
    FROM lock_holders h
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token AND h.expires_at IS NULL AND dlock_holder_live(h);
END
$$;

-- revoke: removes the row of `p_key` (exclusive grant or group row), then, in a new statement,
-- every holder granted before it. One row (token, owner, live) naming the live grant with the
-- greatest token, or none.
CREATE FUNCTION dlock_revoke(p_key text)
RETURNS TABLE (fencing_token bigint, owner_id text, live boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_row locks%ROWTYPE;
BEGIN
  DELETE FROM locks l WHERE l.key = p_key RETURNING * INTO v_row;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_row.mode = 'exclusive' THEN
    RETURN QUERY SELECT v_row.fencing_token, v_row.owner_id,
      CASE WHEN v_row.expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s
             WHERE s.session_id = v_row.session_id AND s.expires_at > now())
           ELSE v_row.expires_at > now() END;
    RETURN;
  END IF;
  -- Holders granted after the group row went are a new set's: their tokens are greater.
  RETURN QUERY WITH gone AS (
      DELETE FROM lock_holders h WHERE h.key = p_key AND h.fencing_token <= v_row.fencing_token
      RETURNING h.fencing_token, h.owner_id, dlock_holder_live(h) AS live)
    SELECT g.fencing_token, g.owner_id, g.live FROM gone g WHERE g.live
    ORDER BY g.fencing_token DESC LIMIT 1;
END
$$;

-- The holders reap_expired and close_session remove, as the store reports them.
CREATE TYPE dlock_holder_report AS (
  key text, owner_id text, session_id text, fencing_token bigint, acquired_us bigint,
  expires_us bigint, session_bound boolean, mode text, permit_limit integer, live boolean);

-- Settles the group rows of the removed holders `p_gone` (each its own statements, after the
-- deletes) and returns them, as reap_expired and close_session report them.
CREATE FUNCTION dlock_settle_removed(p_gone dlock_holder_report[])
RETURNS SETOF dlock_holder_report LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_key text;
BEGIN
  FOR v_key IN SELECT DISTINCT g.key FROM unnest(p_gone) g LOOP
    PERFORM dlock_settle_group(v_key);
  END LOOP;
  RETURN QUERY SELECT * FROM unnest(p_gone);
END
$$;

-- reap_expired of holders: expired ones, session-bound ones of dead sessions, TTL ones of dead
-- sessions; then their group rows are settled, and group rows left expired are removed.
CREATE FUNCTION dlock_reap_holders() RETURNS SETOF dlock_holder_report LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_gone dlock_holder_report[];
BEGIN
  WITH gone AS (
    DELETE FROM lock_holders h
      WHERE NOT dlock_holder_live(h) OR (h.expires_at IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM lock_session s WHERE s.session_id = h.session_id AND s.expires_at > now()))
      RETURNING h.key, h.owner_id, h.session_id, h.fencing_token, dlock_us(h.acquired_at),
        dlock_us(dlock_holder_expiry(h)), h.expires_at IS NULL, h.mode, h.permit_limit, false)
  SELECT coalesce(array_agg(ROW(g.*)::dlock_holder_report), '{}') INTO v_gone FROM gone g;
  RETURN QUERY SELECT * FROM dlock_settle_removed(v_gone);
  DELETE FROM locks WHERE mode <> 'exclusive' AND expires_at <= now();
END
$$;

-- close_session's holders, after the session row is gone (no new grant can follow).
CREATE FUNCTION dlock_release_session_holders(p_session text)
RETURNS SETOF dlock_holder_report LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_gone dlock_holder_report[];
BEGIN
  WITH gone AS (
    DELETE FROM lock_holders h WHERE h.session_id = p_session
      RETURNING h.key, h.owner_id, h.session_id, h.fencing_token, dlock_us(h.acquired_at),
        dlock_us(dlock_holder_expiry(h)), h.expires_at IS NULL, h.mode, h.permit_limit,
        coalesce(h.expires_at > now(), true))
  SELECT coalesce(array_agg(ROW(g.*)::dlock_holder_report), '{}') INTO v_gone FROM gone g;
  RETURN QUERY SELECT * FROM dlock_settle_removed(v_gone);
END
$$;

-- heartbeat: renews the session, THEN (a new statement: sees every holder granted while it
-- waited for the session row, which grants read FOR SHARE) raises the group rows of its
-- session-bound holders to the new expiry, in the same transaction. Same columns as before.
CREATE FUNCTION dlock_heartbeat(p_session text)
RETURNS TABLE (owner_id text, ttl_ms bigint, expires_us bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_owner text;
  v_ttl bigint;
  v_expiry timestamptz;
BEGIN
  -- clock_timestamp(), not now(): see kHeartbeat's comment in pg_statements.h.
  UPDATE lock_session s SET expires_at = now() + s.ttl_ms * interval '1 millisecond'
    WHERE s.session_id = p_session AND s.expires_at > clock_timestamp()
    RETURNING s.owner_id, s.ttl_ms, s.expires_at INTO v_owner, v_ttl, v_expiry;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE locks l SET expires_at = v_expiry
    FROM lock_holders h
    WHERE h.session_id = p_session AND h.expires_at IS NULL AND l.key = h.key
      AND l.mode <> 'exclusive' AND l.expires_at < v_expiry;
  RETURN QUERY SELECT v_owner, v_ttl, dlock_us(v_expiry);
END
$$;
