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
