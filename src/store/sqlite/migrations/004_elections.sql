-- dlock embedded store, schema version 4 (docs/adr/0020-more-primitives-design.md, "Leader
-- election"): an election's leader is an exclusive grant with a value. `value` is NULL for every
-- other grant: the exclusive acquire (sqlite_statements.h kAcquire) writes the value it is given,
-- NULL for a plain lock, on insert and on takeover alike, and a handover writes NULL; only
-- proclaim changes it in place (same token, same expiry). Holders (`lock_holders`) have none.
ALTER TABLE locks ADD COLUMN value TEXT;
