-- dlock fencing guard for PostgreSQL resources (docs/fencing.md).
-- One row per fenced resource: the highest fencing token the resource has accepted, and the
-- lock key bound to it (whose tokens alone it compares; NULL or '' = not bound yet).
-- Idempotent: safe to run at every start-up.
CREATE TABLE IF NOT EXISTS fencing_resource (
  resource      text   PRIMARY KEY,
  highest_token bigint NOT NULL,
  holder_key    text
);
-- Read-write locks (docs/adr/0020-more-primitives-design.md): the highest token a *reader* has
-- presented. A writer is admitted only with a token above it too (a writer's token orders it
-- after every reader before it), so a writer whose lease ended is refused once a later reader
-- has read; readers among themselves are not ordered.
ALTER TABLE fencing_resource ADD COLUMN IF NOT EXISTS highest_read_token bigint NOT NULL DEFAULT 0;
