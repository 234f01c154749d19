-- dlock PostgreSQL store, schema version 5 (docs/adr/0020-more-primitives-design.md, "Leader
-- election"): an election's leader is an exclusive grant of `locks` with a value.
--
-- `value` is NULL for every other row: the plain acquire and the hand-over write NULL (a plain
-- grant taking a leader's name over never inherits its value); the leader grant writes its value
-- in the same upsert (pg_statements.h, kAcquireLeader); proclaim replaces it under the grant's
-- token (kProclaim). A group row (schema version 4) taking over an expired leader's row keeps
-- the stale value unseen: only exclusive rows are read, and only statements naming `value`
-- (which all match mode = 'exclusive' or set it) can fire the trigger below.
ALTER TABLE locks ADD COLUMN value text;

-- A new leader or a new value is announced on channel dlock_release like a removed grant
-- (payload: the key), so an election's observers wake through watch_releases. Rows without a
-- value are filtered by the trigger's WHEN, evaluated in the executor without queueing an event
-- or calling a function: a plain lock grant notifies nobody and costs what it cost. UPDATE OF
-- value: an extend of a leader (which does not set `value`) does not notify either.
CREATE FUNCTION dlock_notify_leader() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('dlock_release', NEW.key);
  RETURN NULL;
END
$$;

CREATE TRIGGER locks_notify_leader AFTER INSERT OR UPDATE OF value ON locks
  FOR EACH ROW WHEN (NEW.value IS NOT NULL) EXECUTE FUNCTION dlock_notify_leader();
