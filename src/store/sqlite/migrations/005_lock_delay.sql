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
) WITHOUT ROWID;
CREATE INDEX lock_delays_ends ON lock_delays (ends_at);

-- The exclusive acquire (sqlite_statements.h kAcquire) sees holders and delays through this
-- trigger, which replaces version 3's of the same name (one trigger, so the plain acquire pays for
-- one trigger and one more index probe, of `lock_delays`): while a shared or permit holder of the
-- key is live or ended less than its session's lock-delay ago (its expiry, or its session's, plus
-- that delay, is still ahead: this covers a live holder, as in DLOCK_SQLITE_LIVE_IN), or a delay
-- of the key runs in `lock_delays`, RAISE(IGNORE) drops the acquire's row before its ON CONFLICT
-- is considered, and the answer is "held". kAcquire's own ON CONFLICT ... WHERE keeps an ended
-- exclusive row's delay. It still stands aside when the acquiring session is dead, so
-- locks_session_alive_on_insert answers SessionNotFoundError whichever trigger runs first.
DROP TRIGGER locks_held_by_holders_on_insert;
CREATE TRIGGER locks_held_by_holders_on_insert BEFORE INSERT ON locks
WHEN (EXISTS (SELECT 1 FROM lock_holders h
              WHERE h.key = NEW.key
                AND coalesce(h.expires_at, (SELECT hs.expires_at FROM lock_session hs
                                            WHERE hs.session_id = h.session_id))
                    + coalesce((SELECT hs.lock_delay_ms FROM lock_session hs
                                WHERE hs.session_id = h.session_id), 0) > NEW.acquired_at)
      OR EXISTS (SELECT 1 FROM lock_delays d
                 WHERE d.key = NEW.key AND d.ends_at > NEW.acquired_at))
 AND EXISTS (SELECT 1 FROM lock_session s
             WHERE s.session_id = NEW.session_id AND s.expires_at > NEW.acquired_at)
BEGIN
  SELECT RAISE(IGNORE);
END;
