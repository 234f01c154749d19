-- dlock embedded store, schema version 3 (docs/adr/0020-more-primitives-design.md): holder sets.
-- One row per (name, session) holding the name shared or as one of its `permit_limit` permits.
-- The exclusive grant of a name stays in `locks`; its acquire statement also checks this table,
-- and a holder is added only while no live exclusive grant holds the name (sqlite_holders.cc),
-- both inside SQLite's one write transaction at a time. Tokens come from fencing_token_seq, the
-- one counter of every grant (ADR-0004).
CREATE TABLE lock_holders (
  key           TEXT NOT NULL,
  session_id    TEXT NOT NULL,
  owner_id      TEXT NOT NULL,
  fencing_token INTEGER NOT NULL,
  mode          TEXT NOT NULL CHECK (mode IN ('shared', 'permit')),
  permit_limit  INTEGER NOT NULL,  -- a permit holder's number of permits of the name; shared: 0
  acquired_at   INTEGER NOT NULL,
  expires_at    INTEGER,           -- NULL: session-bound (ADR-0018)
  PRIMARY KEY (key, session_id)
);
CREATE INDEX lock_holders_session ON lock_holders (session_id);
CREATE INDEX lock_holders_expires ON lock_holders (expires_at);

-- The exclusive acquire (sqlite_statements.h kAcquire, unchanged) sees live holders through this
-- trigger: while a live shared or permit holder of any session holds the key, RAISE(IGNORE) drops
-- the acquire's row before its ON CONFLICT is considered, so neither the insert nor the takeover
-- runs, RETURNING yields nothing, and the answer is "held". A holder is live as in
-- DLOCK_SQLITE_LIVE_IN, at the acquire's own instant. It stands aside when the acquiring session
-- is dead, so locks_session_alive_on_insert still answers SessionNotFoundError whichever trigger
-- runs first. (The same check written into kAcquire as INSERT ... SELECT ... WHERE NOT EXISTS cost
-- about 0.6 ms of CPU per acquire on SQLite 3.40: the SELECT form goes through a temporary table.)
CREATE TRIGGER locks_held_by_holders_on_insert BEFORE INSERT ON locks
WHEN EXISTS (SELECT 1 FROM lock_holders h
             WHERE h.key = NEW.key
               AND coalesce(h.expires_at > NEW.acquired_at,
                            EXISTS (SELECT 1 FROM lock_session hs
                                    WHERE hs.session_id = h.session_id
                                      AND hs.expires_at > NEW.acquired_at)))
 AND EXISTS (SELECT 1 FROM lock_session s
             WHERE s.session_id = NEW.session_id AND s.expires_at > NEW.acquired_at)
BEGIN
  SELECT RAISE(IGNORE);
END;
