-- dlock PostgreSQL store, schema version 2 (contract C1, ADR-0010): the restore floor.
--
-- Raises fencing_token_seq to at least the microseconds since the Unix epoch by the database
-- clock (clock_timestamp()), never lowering it. Called by every dlockd when its store opens and
-- on every new pooled connection, so a database restored from an earlier backup (pg_dump /
-- pg_restore, base backup + PITR) cannot hand out again a token issued after that backup.
--
-- Race-free against concurrent nextval(): ALTER SEQUENCE takes ShareRowExclusiveLock on the
-- sequence, which conflicts with the RowExclusiveLock every nextval() takes (checked on
-- PostgreSQL 15: a nextval() in another session waits until this transaction ends). So
-- last_value cannot move between the read and the setval(); a plain "setval(greatest(...))"
-- without the lock can rewind the sequence past a nextval() that slips in between.
-- (LOCK TABLE refuses sequences.) OWNED BY NONE changes nothing: the sequence is owned by no
-- column; the statement is here for its lock. SECURITY DEFINER: ALTER SEQUENCE needs the
-- owner, and dlockd may run as a role that only uses the tables.
CREATE FUNCTION dlock_raise_token_floor() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  floor_us      bigint;
  current_value bigint;
BEGIN
  ALTER SEQUENCE fencing_token_seq OWNED BY NONE;
  floor_us := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  SELECT last_value INTO current_value FROM fencing_token_seq;
  IF current_value < floor_us THEN
    PERFORM setval('fencing_token_seq', floor_us, true);
    RETURN floor_us;
  END IF;
  RETURN current_value;
END
$$;
