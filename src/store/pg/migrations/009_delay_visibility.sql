-- dlock PostgreSQL store, schema version 9 (C2 "Lock-delay"): a running lock-delay can be seen
-- (LockStore::list_delays) and an administrator can end it (LockStore::clear_delay).
--
-- A delay is a row that is no live grant and whose lock_delay_ms has not run out since its end
-- (schema version 7): an exclusive row of `locks`, or a holder of `lock_holders`. A group row of
-- a holder set is no delay of its own: its holders are.

-- The names starting with `p_prefix` in a delay, ordered by key, at most `p_limit`, each with the
-- end of its latest delay. A session-bound row whose session row is gone has no end yet (the
-- reaper fixes it, dlock_delay_over waits for it): its delay is shown from now.
CREATE FUNCTION dlock_delays(p_prefix text, p_limit bigint)
RETURNS TABLE (key text, ends_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT d.key, max(d.ends_at) FROM (
    SELECT l.key, coalesce(l.expires_at, (SELECT s.expires_at FROM lock_session s
                                          WHERE s.session_id = l.session_id), now())
                    + l.lock_delay_ms * interval '1 millisecond' AS ends_at
      FROM locks l
      WHERE starts_with(l.key, p_prefix) AND l.mode = 'exclusive' AND l.lock_delay_ms > 0
        AND NOT dlock_lock_live(l)
    UNION ALL
    SELECT h.key, dlock_holder_expiry(h) + h.lock_delay_ms * interval '1 millisecond'
      FROM lock_holders h
      WHERE starts_with(h.key, p_prefix) AND h.lock_delay_ms > 0 AND NOT dlock_holder_live(h)
  ) d
  WHERE d.ends_at > now()
  GROUP BY d.key ORDER BY d.key LIMIT p_limit
$$;

-- Ends every delay of `p_key` running now, under the key's fence (ADR-0021): its ended rows keep
-- no delay (lock_delay_ms 0), so the acquire's takeover, a new holder and the reaper treat them
-- as ended grants without one. Live rows keep theirs: their own end still starts one. Announces
-- the key on dlock_release when a delay ran (waiters try again) and returns whether one did.
CREATE FUNCTION dlock_clear_delay(p_key text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_delayed boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  v_delayed := dlock_name_delayed(p_key);
  IF NOT v_delayed THEN
    RETURN false;
  END IF;
  UPDATE lock_holders h SET lock_delay_ms = 0
    WHERE h.key = p_key AND h.lock_delay_ms > 0 AND NOT dlock_holder_live(h);
  UPDATE locks l SET lock_delay_ms = 0
    WHERE l.key = p_key AND l.mode = 'exclusive' AND l.lock_delay_ms > 0
      AND NOT dlock_lock_live(l);
  PERFORM pg_notify('dlock_release', p_key);
  RETURN true;
END
$$;
