-- dlock PostgreSQL store, schema version 7 (docs/adr/0020-more-primitives-design.md, "Lock-delay";
-- C2 "Lock-delay"): a session's lock-delay, kept by every grant made for it.
--
-- A session has `lock_delay_ms`; every grant row copies it when it is made: an exclusive row in
-- the session trigger (below: the acquire, its takeover and the hand-over, which carries the NEW
-- session's delay), a holder in dlock_grant_holder. A grant that ends without a
-- release (its TTL or its session passed, or a revoke: expires_at := now()) stays in its table as
-- a *delayed* row until its end plus its delay, and is no grant (every reader filters on
-- liveness). The acquire's takeover (pg_statements.h, kAcquireTail) requires that delay to be
-- over; the reaper removes the row once it is, and the removal announces the key on
-- dlock_release as for every removed grant.
--
-- Holders: a group row whose set ever had a delayed holder has lock_delay_ms > 0, a flag meaning
-- "its holders may keep the name": while one of them is in its delay the group row is kept (its
-- removal re-inserts it, not live: dlock_notify_lock_release), an exclusive takeover of it is
-- refused (dlock_delay_over) and so is every new holder (dlock_grant_holder). A group row that
-- took over an exclusive row keeps that row's value as its flag: a needless check, no harm.
ALTER TABLE lock_session ADD COLUMN lock_delay_ms bigint NOT NULL DEFAULT 0
  CHECK (lock_delay_ms >= 0);
ALTER TABLE locks ADD COLUMN lock_delay_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE lock_holders ADD COLUMN lock_delay_ms bigint NOT NULL DEFAULT 0;

-- The session check of schema versions 1 and 4, which also gives an exclusive row it lets through
-- its session's delay: the granting statements write lock_delay_ms 0 (the default; the
-- acquire's takeover and the hand-over set it), raised here only when the session has a delay,
-- so a grant without one costs what it did (an assignment to NEW is not free). A group row keeps
-- its flag.
CREATE OR REPLACE FUNCTION dlock_check_session_alive() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_delay bigint;
BEGIN
  IF NEW.mode <> 'exclusive' THEN
    RETURN NEW;
  END IF;
  SELECT s.lock_delay_ms INTO v_delay FROM lock_session s
    WHERE s.session_id = NEW.session_id AND s.expires_at > now();
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS01',
      MESSAGE = 'session not found or expired: ' || NEW.session_id;
  END IF;
  IF v_delay <> 0 THEN
    NEW.lock_delay_ms := v_delay;
  END IF;
  RETURN NEW;
END
$$;

-- Whether the exclusive row `l` is a live grant (pg_statements.h, DLOCK_PG_LIVE). The acquire's
-- re-entrant clause and the release call it behind `lock_delay_ms = 0 OR`: PL/pgSQL, so never
-- inlined, so a row without a delay costs them no subquery set up at every execution.
CREATE FUNCTION dlock_lock_live(l locks) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN CASE WHEN l.expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s
              WHERE s.session_id = l.session_id AND s.expires_at > now())
         ELSE l.expires_at > now() END;
END
$$;

-- Whether holder `h`'s delay is over (or it has none). Meaningful for a holder that ended; its
-- end is its expiry, or its session's (now() while the session row is gone and the reaper has
-- not fixed the end: the delay never starts early).
CREATE FUNCTION dlock_holder_delay_over(h lock_holders) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT h.lock_delay_ms = 0
         OR dlock_holder_expiry(h) + h.lock_delay_ms * interval '1 millisecond' <= now()
$$;

-- Whether a holder of `p_key` ended without a release less than its delay ago. VOLATILE: it reads
-- the holders with a snapshot of its own, so the acquire's takeover, which may have waited for
-- the group row's lock (or the fence) while a revoke ended holders, sees them as committed
-- (the READ COMMITTED hazard of schema version 4), not as of before it waited.
CREATE FUNCTION dlock_holders_delayed(p_key text) RETURNS boolean LANGUAGE sql VOLATILE AS $$
  SELECT EXISTS (SELECT 1 FROM lock_holders h WHERE h.key = p_key AND h.lock_delay_ms > 0
                 AND NOT dlock_holder_live(h) AND NOT dlock_holder_delay_over(h))
$$;

-- Whether the delay of the row `l` of `locks`, which is no live grant, is over: an exclusive
-- row's end (its expiry, or its session's) plus its delay has passed; no holder of a group row is
-- in its delay. Unknown (a session-bound row whose session row is gone): not over, until the
-- reaper fixes its end.
CREATE FUNCTION dlock_delay_over(l locks) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT l.lock_delay_ms = 0 OR CASE WHEN l.mode = 'exclusive' THEN coalesce(
           coalesce(l.expires_at, (SELECT s.expires_at FROM lock_session s
                                   WHERE s.session_id = l.session_id))
             + l.lock_delay_ms * interval '1 millisecond' <= now(), false)
         ELSE NOT dlock_holders_delayed(l.key) END
$$;

-- Whether `p_key` is in a delay: its exclusive row ended and its delay is not over, or one of its
-- holders is in its delay.
CREATE FUNCTION dlock_name_delayed(p_key text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM locks l WHERE l.key = p_key AND l.lock_delay_ms > 0
                 AND l.mode = 'exclusive' AND NOT (CASE WHEN l.expires_at IS NULL
                   THEN EXISTS (SELECT 1 FROM lock_session s
                                WHERE s.session_id = l.session_id AND s.expires_at > now())
                   ELSE l.expires_at > now() END)
                 AND NOT dlock_delay_over(l))
         OR dlock_holders_delayed(p_key)
$$;

-- Schema version 1's announcement of a removed row, for `locks`: a group row removed while one
-- of its holders is in its delay is put back, not live, and nothing is announced (the name is
-- not free). The reaper removes it, announced, once the delay is over (dlock_reap_holders).
CREATE FUNCTION dlock_notify_lock_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.mode <> 'exclusive' AND OLD.lock_delay_ms > 0 AND dlock_holders_delayed(OLD.key) THEN
    INSERT INTO locks (key, owner_id, session_id, fencing_token, acquired_at, expires_at, mode,
                       permit_limit, lock_delay_ms)
      VALUES (OLD.key, '', '', OLD.fencing_token, OLD.acquired_at, least(OLD.expires_at, now()),
              OLD.mode, OLD.permit_limit, OLD.lock_delay_ms)
      ON CONFLICT (key) DO NOTHING;
    RETURN NULL;
  END IF;
  PERFORM pg_notify('dlock_release', OLD.key);
  RETURN NULL;
END
$$;
DROP TRIGGER locks_notify_release ON locks;
CREATE TRIGGER locks_notify_release AFTER DELETE ON locks
  FOR EACH ROW EXECUTE FUNCTION dlock_notify_lock_release();

-- The holder grant of schema version 6, fence first, then: no new holder while the name is in a
-- delay (a new statement after the fence, which every statement that can start a delay of this
-- key but expiry itself -- the acquire, the hand-over, revoke -- also takes, and now() is this
-- transaction's: a holder found live here is live for dlock_grant_holder_unfenced too); and the
-- granted holder, and its group row's flag, carry its session's delay.
CREATE OR REPLACE FUNCTION dlock_grant_holder(p_key text, p_owner text, p_session text,
                                              p_ttl_ms bigint, p_mode text, p_limit integer)
RETURNS TABLE (fencing_token bigint, acquired_us bigint, expiry_us bigint, now_us bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_delay bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  IF dlock_name_delayed(p_key) THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM dlock_grant_holder_unfenced(p_key, p_owner, p_session, p_ttl_ms,
                                                         p_mode, p_limit);
  IF FOUND THEN
    SELECT s.lock_delay_ms INTO v_delay FROM lock_session s WHERE s.session_id = p_session;
    IF v_delay > 0 THEN
      UPDATE lock_holders h SET lock_delay_ms = v_delay
        WHERE h.key = p_key AND h.session_id = p_session;
      UPDATE locks l SET lock_delay_ms = greatest(l.lock_delay_ms, v_delay)
        WHERE l.key = p_key AND l.mode <> 'exclusive';
    END IF;
  END IF;
END
$$;

-- revoke (schema version 4) under the key's fence: a live grant with a delay ends now and stays
-- (expires_at := now()), in its delay; a row already in its delay is no grant and stays. One row
-- (token, owner, live) naming the live grant with the greatest token, or none.
CREATE OR REPLACE FUNCTION dlock_revoke(p_key text)
RETURNS TABLE (fencing_token bigint, owner_id text, live boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_row locks%ROWTYPE;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  SELECT * INTO v_row FROM locks l WHERE l.key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_row.mode = 'exclusive' AND v_row.lock_delay_ms > 0 THEN
    -- New statements after the lock.
    UPDATE locks l SET expires_at = now()
      WHERE l.key = p_key AND (CASE WHEN l.expires_at IS NULL THEN EXISTS (
        SELECT 1 FROM lock_session s WHERE s.session_id = l.session_id AND s.expires_at > now())
        ELSE l.expires_at > now() END)
      RETURNING * INTO v_row;
    IF FOUND THEN
      RETURN QUERY SELECT v_row.fencing_token, v_row.owner_id, true;
      RETURN;
    END IF;
    IF dlock_name_delayed(p_key) THEN
      RETURN;
    END IF;
  END IF;
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
  -- Holders granted after the group row went are a new set's: their tokens are greater. A live
  -- holder with a delay ends now and stays; one in its delay stays.
  RETURN QUERY WITH gone AS (
      DELETE FROM lock_holders h WHERE h.key = p_key AND h.fencing_token <= v_row.fencing_token
        AND (h.lock_delay_ms = 0 OR NOT dlock_holder_live(h) AND dlock_holder_delay_over(h))
      RETURNING h.fencing_token, h.owner_id, dlock_holder_live(h) AS live),
    ended AS (
      UPDATE lock_holders h SET expires_at = now()
        WHERE h.key = p_key AND h.fencing_token <= v_row.fencing_token AND h.lock_delay_ms > 0
          AND dlock_holder_live(h)
        RETURNING h.fencing_token, h.owner_id, true AS live)
    SELECT g.fencing_token, g.owner_id, g.live
    FROM (SELECT * FROM gone UNION ALL SELECT * FROM ended) g WHERE g.live
    ORDER BY g.fencing_token DESC LIMIT 1;
  -- A new statement: the holders just ended are in their delay; the group row stays, not live.
  IF dlock_holders_delayed(p_key) THEN
    INSERT INTO locks (key, owner_id, session_id, fencing_token, acquired_at, expires_at, mode,
                       permit_limit, lock_delay_ms)
      VALUES (p_key, '', '', v_row.fencing_token, v_row.acquired_at, now(), v_row.mode,
              v_row.permit_limit, greatest(v_row.lock_delay_ms, 1))
      ON CONFLICT (key) DO NOTHING;
  END IF;
END
$$;

-- reap_expired of holders (schema version 4), keeping every holder in its delay: first the end
-- of a holder that ended with its session is fixed (its session's expiry; now() for a TTL holder
-- the reaper ends with its dead session), then holders whose delay is over are removed, their
-- group rows settled, and group rows left expired with no holder in its delay removed.
CREATE OR REPLACE FUNCTION dlock_reap_holders() RETURNS SETOF dlock_holder_report
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_gone dlock_holder_report[];
BEGIN
  UPDATE lock_holders h
    SET expires_at = CASE WHEN h.expires_at IS NULL THEN dlock_holder_expiry(h) ELSE now() END
    WHERE h.lock_delay_ms > 0 AND NOT EXISTS (SELECT 1 FROM lock_session s
      WHERE s.session_id = h.session_id AND s.expires_at > now())
      AND (h.expires_at IS NULL OR h.expires_at > now());
  WITH gone AS (
    DELETE FROM lock_holders h
      WHERE (NOT dlock_holder_live(h) OR (h.expires_at IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM lock_session s WHERE s.session_id = h.session_id AND s.expires_at > now())))
        AND dlock_holder_delay_over(h)
      RETURNING h.key, h.owner_id, h.session_id, h.fencing_token, dlock_us(h.acquired_at),
        dlock_us(dlock_holder_expiry(h)), h.expires_at IS NULL, h.mode, h.permit_limit, false)
  SELECT coalesce(array_agg(ROW(g.*)::dlock_holder_report), '{}') INTO v_gone FROM gone g;
  RETURN QUERY SELECT * FROM dlock_settle_removed(v_gone);
  DELETE FROM locks l WHERE l.mode <> 'exclusive' AND l.expires_at <= now()
    AND (l.lock_delay_ms = 0 OR NOT dlock_holders_delayed(l.key));
END
$$;
