-- dlock fencing guard for PostgreSQL resources (docs/fencing.md).
-- One row per fenced resource: the highest fencing token the resource has accepted, and the
-- lock key bound to it (whose tokens alone it compares; NULL or '' = not bound yet).
-- Idempotent: safe to run at every start-up.
CREATE TABLE IF NOT EXISTS fencing_resource (
  resource      text   PRIMARY KEY,
  highest_token bigint NOT NULL,
  holder_key    text
);
