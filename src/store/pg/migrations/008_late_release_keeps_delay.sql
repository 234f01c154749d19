-- dlock PostgreSQL store, schema version 8 (C2 "Lock-delay": "A release of a grant that had
-- already expired does not cancel its delay"). Schema 7 kept that for exclusive grants
-- (kDeleteIfOwner, kReleaseSessionLocks); these two functions of schema 4 still deleted a shared
-- or permit holder that had ended and was in its delay, so a holder waking after its lease and
-- releasing late (the very holder lock-delay is for) ended the delay at once. Now:
-- - a release deletes a holder only while it is live, or when it has no delay (else: no row,
--   "not live", as for any late release, and the holder stays until the reaper ends its delay);
-- - close_session keeps, like kReleaseSessionLocks, a TTL holder that had expired and has a delay
--   (a session-bound holder of the closed session was live if its session was).
-- The bodies are schema 4's with that one condition added (a migration cannot edit them).
CREATE OR REPLACE FUNCTION dlock_release_holder(p_key text, p_owner text, p_session text,
                                                p_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_live boolean;
BEGIN
  PERFORM 1 FROM locks WHERE key = p_key AND mode <> 'exclusive' FOR UPDATE;
  DELETE FROM lock_holders h
    WHERE h.key = p_key AND h.session_id = p_session AND h.owner_id = p_owner
      AND h.fencing_token = p_token AND (h.lock_delay_ms = 0 OR dlock_holder_live(h))
    RETURNING dlock_holder_live(h) INTO v_live;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  PERFORM dlock_settle_group(p_key);
  RETURN v_live;
END
$$;

CREATE OR REPLACE FUNCTION dlock_release_session_holders(p_session text)
RETURNS SETOF dlock_holder_report LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_gone dlock_holder_report[];
BEGIN
  WITH gone AS (
    DELETE FROM lock_holders h WHERE h.session_id = p_session
        AND (h.lock_delay_ms = 0 OR h.expires_at IS NULL OR h.expires_at > now())
      RETURNING h.key, h.owner_id, h.session_id, h.fencing_token, dlock_us(h.acquired_at),
        dlock_us(dlock_holder_expiry(h)), h.expires_at IS NULL, h.mode, h.permit_limit,
        coalesce(h.expires_at > now(), true))
  SELECT coalesce(array_agg(ROW(g.*)::dlock_holder_report), '{}') INTO v_gone FROM gone g;
  RETURN QUERY SELECT * FROM dlock_settle_removed(v_gone);
END
$$;
