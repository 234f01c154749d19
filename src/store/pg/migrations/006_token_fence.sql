-- dlock PostgreSQL store, schema version 6 (docs/adr/0021-pg-token-order.md): every statement
-- that mints a token of a key takes the key's fence first, a transaction-scoped advisory lock on
-- hashtextextended(key, 0), so the grants of one key mint their tokens one transaction after the
-- other. The acquire and the hand-over take it in their statements (pg_statements.h,
-- DLOCK_PG_FENCED_TOKEN); the holder grant takes it here, before it locks the session or the
-- group row, so every fenced transaction takes the fence before a row lock of that key.
--
-- The grant function itself is unchanged: it is renamed and called after the fence.
ALTER FUNCTION dlock_grant_holder(text, text, text, bigint, text, integer)
  RENAME TO dlock_grant_holder_unfenced;

CREATE FUNCTION dlock_grant_holder(p_key text, p_owner text, p_session text, p_ttl_ms bigint,
                                   p_mode text, p_limit integer)
RETURNS TABLE (fencing_token bigint, acquired_us bigint, expiry_us bigint, now_us bigint)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  RETURN QUERY SELECT * FROM dlock_grant_holder_unfenced(p_key, p_owner, p_session, p_ttl_ms,
                                                         p_mode, p_limit);
END
$$;
