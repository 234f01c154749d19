-- dlock PostgreSQL store, schema version 10 (docs/adr/0037-pg-batched-holder-writes.md): the
-- holder writes (grant, release, extend) join the batches of pg_batch.h, whose statements share
-- one transaction. now() is that transaction's start, which may be before a revoke that ended a
-- holder and committed while a later statement of the batch waited for the key's fence or group
-- row; judged at now(), the revoked holder (expires_at := the revoke's now()) would look live, and
-- a release would delete it and its lock-delay, an extend revive it, a grant join its set
-- (tests/store/pg_lock_delay_test.cc, PgHolderRevokeRaceTest). So the holder functions and the
-- holder helpers judge time at statement_timestamp(): the start of the statement in the batch,
-- which is the transaction's start for an autocommitted statement (unchanged there), and which a
-- revoke that began before it and committed first is never later than. Expiries and acquired_at
-- are counted from it too. The exclusive statements (pg_statements.h) keep now() and
-- DLOCK_PG_NOW_LOCKED.
--
-- The bodies are those of schema versions 4 and 7 with now() replaced (a migration cannot edit
-- them), and one change of cost: the holder grant asks dlock_name_delayed only when a row of the
-- key has a delay at all. That call is an SQL function planned at every call (it cannot be
-- inlined into PL/pgSQL's IF), so two index probes for a delay decide whether it runs at all.

CREATE OR REPLACE FUNCTION dlock_holder_live(h lock_holders) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN h.expires_at IS NULL THEN EXISTS (SELECT 1 FROM lock_session s
              WHERE s.session_id = h.session_id AND s.expires_at > statement_timestamp())
         ELSE h.expires_at > statement_timestamp() END
$$;

CREATE OR REPLACE FUNCTION dlock_holder_expiry(h lock_holders) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT coalesce(h.expires_at, (SELECT s.expires_at FROM lock_session s
                                 WHERE s.session_id = h.session_id), statement_timestamp())
$$;

CREATE OR REPLACE FUNCTION dlock_holder_delay_over(h lock_holders) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT h.lock_delay_ms = 0
         OR dlock_holder_expiry(h) + h.lock_delay_ms * interval '1 millisecond'
            <= statement_timestamp()
$$;

CREATE OR REPLACE FUNCTION dlock_name_delayed(p_key text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM locks l WHERE l.key = p_key AND l.lock_delay_ms > 0
                 AND l.mode = 'exclusive' AND NOT (CASE WHEN l.expires_at IS NULL
                   THEN EXISTS (SELECT 1 FROM lock_session s WHERE s.session_id = l.session_id
                                AND s.expires_at > statement_timestamp())
                   ELSE l.expires_at > statement_timestamp() END)
                 AND NOT dlock_delay_over(l))
         OR dlock_holders_delayed(p_key)
$$;

CREATE OR REPLACE FUNCTION dlock_grant_holder(p_key text, p_owner text, p_session text,
                                              p_ttl_ms bigint, p_mode text, p_limit integer)
RETURNS TABLE (fencing_token bigint, acquired_us bigint, expiry_us bigint, now_us bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_delay bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  IF (EXISTS (SELECT 1 FROM locks l WHERE l.key = p_key AND l.lock_delay_ms > 0)
      OR EXISTS (SELECT 1 FROM lock_holders h WHERE h.key = p_key AND h.lock_delay_ms > 0))
     AND dlock_name_delayed(p_key) THEN
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

-- try_insert_holder: one round trip. No rows: held. SQLSTATE DLS01: dead session; DLS02: the
-- live permit holders of other sessions agreed on another limit (the message names it).
-- p_ttl_ms 0 asks for a session-bound holder.
CREATE OR REPLACE FUNCTION dlock_grant_holder_unfenced(p_key text, p_owner text, p_session text,
                                                       p_ttl_ms bigint, p_mode text,
                                                       p_limit integer)
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
    WHERE s.session_id = p_session AND s.expires_at > statement_timestamp() FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'DLS01',
      MESSAGE = 'session not found or expired: ' || p_session;
  END IF;
  v_expiry := CASE WHEN p_ttl_ms = 0 THEN v_session_expiry
                   ELSE statement_timestamp() + p_ttl_ms * interval '1 millisecond' END;

  -- The group row: created, taken over when its grant is gone, and in every case locked until
  -- COMMIT (ON CONFLICT DO UPDATE locks the row even when its WHERE is false).
  INSERT INTO locks AS l (key, owner_id, session_id, fencing_token, acquired_at, expires_at, mode,
                          permit_limit)
    VALUES (p_key, '', '', 0, statement_timestamp(), v_expiry, p_mode, p_limit)
    ON CONFLICT (key) DO UPDATE
      SET owner_id = '', session_id = '', acquired_at = statement_timestamp(),
          expires_at = EXCLUDED.expires_at,
          mode = EXCLUDED.mode, permit_limit = EXCLUDED.permit_limit
      WHERE NOT (CASE WHEN l.expires_at IS NULL
                      THEN coalesce((SELECT s.expires_at > statement_timestamp()
                                     FROM lock_session s
                                     WHERE s.session_id = l.session_id FOR SHARE), false)
                      ELSE l.expires_at > statement_timestamp() END);
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
    VALUES (p_key, p_session, p_owner, v_token, statement_timestamp(),
            CASE WHEN p_ttl_ms = 0 THEN NULL ELSE v_expiry END, p_mode, p_limit)
    ON CONFLICT (key, session_id) DO UPDATE
      SET owner_id = EXCLUDED.owner_id, fencing_token = EXCLUDED.fencing_token,
          acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
          mode = EXCLUDED.mode, permit_limit = EXCLUDED.permit_limit;
  -- The latest of the others and this one (which may replace a longer lease of its own).
  UPDATE locks SET expires_at = greatest(v_others_latest, v_expiry), fencing_token = v_token
    WHERE key = p_key;
  RETURN QUERY SELECT v_token, dlock_us(statement_timestamp()), dlock_us(v_expiry),
                      dlock_us(statement_timestamp());
END
$$;

-- extend of a holder: a TTL holder gets statement_timestamp() + p_ttl_ms and raises its group
-- row; a session-bound one is a checked no-op (ADR-0018). No rows: not the live holder. Else its
-- expiry, statement_timestamp(), whether it is session-bound and its mode.
CREATE OR REPLACE FUNCTION dlock_extend_holder(p_key text, p_owner text, p_session text,
                                               p_token bigint, p_ttl_ms bigint)
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
  UPDATE lock_holders h
    SET expires_at = statement_timestamp() + p_ttl_ms * interval '1 millisecond'
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token AND h.expires_at > statement_timestamp()
      AND EXISTS (SELECT 1 FROM lock_session s
                  WHERE s.session_id = h.session_id AND s.expires_at > statement_timestamp())
    RETURNING h.expires_at, h.mode INTO v_expiry, v_mode;
  IF FOUND THEN
    -- A new statement after the lock: the latest live holder (this one's lease may be shorter).
    UPDATE locks SET expires_at = (SELECT max(dlock_holder_expiry(h)) FROM lock_holders h
                                   WHERE h.key = p_key AND dlock_holder_live(h))
      WHERE key = p_key;
    RETURN QUERY SELECT dlock_us(v_expiry), dlock_us(statement_timestamp()), false, v_mode;
    RETURN;
  END IF;
  RETURN QUERY SELECT dlock_us(dlock_holder_expiry(h)), dlock_us(statement_timestamp()), true,
                      h.mode
    FROM lock_holders h
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token AND h.expires_at IS NULL AND dlock_holder_live(h);
END
$$;
