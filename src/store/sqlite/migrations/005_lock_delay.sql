-- dlock embedded store, schema version 5 (docs/adr/0020-more-primitives-design.md, "Lock-delay";
-- C2 "Lock-delay"). A session's lock-delay is kept on its row; a grant row (`locks`,
-- `lock_holders`) carries the delay of its session_id, which is the session it was granted or
-- handed over to (the session row lives as long as its grants: the reaper and close_session
-- delete both in one transaction). A grant row that ended without a release -- its TTL or its
-- session expired -- keeps its name from every new grant until its end plus that delay, while
-- the row is still there; when a revoke, the reaper or a late release removes such a row, the end
-- of its delay moves to `lock_delays`, which the reaper empties (and announces) once it is over.
ALTER TABLE lock_session ADD COLUMN lock_delay_ms INTEGER NOT NULL DEFAULT 0;

CREATE TABLE lock_delays (
  key   TEXT PRIMARY KEY,
  ends_at INTEGER NOT NULL  -- no grant of `key` before this instant (store clock, ms)
);
CREATE INDEX lock_delays_ends ON lock_delays (ends_at);

-- The exclusive acquire (sqlite_statements.h kAcquire) sees delays through this trigger, as it
-- sees live holders through locks_held_by_holders_on_insert: a delay of the key still running in
-- `lock_delays`, or a shared or permit holder of it whose TTL or session expired less than its
-- session's lock-delay ago, drops the acquire's row before its ON CONFLICT is considered ("held").
-- kAcquire's own ON CONFLICT ... WHERE keeps an ended exclusive row's delay. As the holders'
-- trigger, it stands aside when the acquiring session is dead (SessionNotFoundError).
CREATE TRIGGER locks_delayed_on_insert BEFORE INSERT ON locks
WHEN (EXISTS (SELECT 1 FROM lock_delays d WHERE d.key = NEW.key AND d.ends_at > NEW.acquired_at)
      OR EXISTS (SELECT 1 FROM lock_holders h JOIN lock_session hs
                   ON hs.session_id = h.session_id
                 WHERE h.key = NEW.key AND hs.lock_delay_ms > 0
                   AND coalesce(h.expires_at, hs.expires_at) <= NEW.acquired_at
                   AND coalesce(h.expires_at, hs.expires_at) + hs.lock_delay_ms
                       > NEW.acquired_at))
 AND EXISTS (SELECT 1 FROM lock_session s
             WHERE s.session_id = NEW.session_id AND s.expires_at > NEW.acquired_at)
BEGIN
  SELECT RAISE(IGNORE);
END;
