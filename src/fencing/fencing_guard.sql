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

-- The guard's rule as functions, so that a program in any language calls one thing
-- (docs/fencing.md "The rule"). Call dlock_fence_admit (or _read) inside the
-- transaction that makes the fenced write, then write, then COMMIT: true = admitted, the row
-- stays locked until the transaction ends; false = stale (a greater token was accepted: roll
-- back, do not write). SQLSTATE DL001: the resource is bound to another lock key (a
-- configuration error, never a decision); DL002: a bad argument. Tokens are compared per lock
-- key only, so each resource is bound to the one key whose tokens it compares (NULL or '' =
-- not bound yet; the first key to write binds it).
CREATE OR REPLACE FUNCTION dlock_fence_check_(resource text, token bigint, lock_key text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
  IF resource IS NULL OR resource = '' THEN
    RAISE EXCEPTION 'fencing: the resource name is required' USING ERRCODE = 'DL002';
  END IF;
  IF lock_key IS NULL OR lock_key = '' THEN
    RAISE EXCEPTION 'fencing: the lock key the token belongs to is required'
      USING ERRCODE = 'DL002';
  END IF;
  IF token IS NULL OR token <= 0 THEN
    RAISE EXCEPTION 'fencing: token must be a positive fencing token, got %', token
      USING ERRCODE = 'DL002';
  END IF;
END $fn$;

-- Raises DL001 when `resource` is bound to a key other than `lock_key`.
CREATE OR REPLACE FUNCTION dlock_fence_same_key_(resource text, lock_key text)
RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_variable
DECLARE
  bound text;
BEGIN
  SELECT r.holder_key INTO bound FROM fencing_resource r WHERE r.resource = resource;
  IF COALESCE(bound, '') <> '' AND bound <> lock_key THEN
    RAISE EXCEPTION 'fencing: resource "%" is protected by lock key "%"; a token of lock key "%" is refused (tokens of different keys are not comparable)',
      resource, bound, lock_key USING ERRCODE = 'DL001';
  END IF;
END $fn$;

-- A writer: admitted when its token is not below the highest accepted write token nor below
-- any admitted reader's; the highest is then `token`. The same token may write repeatedly.
CREATE OR REPLACE FUNCTION dlock_fence_admit(resource text, token bigint, lock_key text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
#variable_conflict use_variable
BEGIN
  PERFORM dlock_fence_check_(resource, token, lock_key);
  INSERT INTO fencing_resource AS r (resource, highest_token, holder_key)
  VALUES (resource, token, lock_key)
  ON CONFLICT ON CONSTRAINT fencing_resource_pkey DO UPDATE
    SET highest_token = EXCLUDED.highest_token, holder_key = EXCLUDED.holder_key
    WHERE r.highest_token <= EXCLUDED.highest_token
      AND r.highest_read_token <= EXCLUDED.highest_token
      AND COALESCE(NULLIF(r.holder_key, ''), EXCLUDED.holder_key) = EXCLUDED.holder_key;
  IF FOUND THEN
    RETURN true;
  END IF;
  -- Zero rows: stale or another key. The conflicting row is locked either way.
  PERFORM dlock_fence_same_key_(resource, lock_key);
  RETURN false;
END $fn$;

-- A reader of a read-write lock: admitted unless a writer with a greater token has written;
-- raises the greatest reader token, never lowers it (readers come in any order).
CREATE OR REPLACE FUNCTION dlock_fence_admit_read(resource text, token bigint, lock_key text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
#variable_conflict use_variable
BEGIN
  PERFORM dlock_fence_check_(resource, token, lock_key);
  INSERT INTO fencing_resource AS r (resource, highest_token, holder_key, highest_read_token)
  VALUES (resource, 0, lock_key, token)
  ON CONFLICT ON CONSTRAINT fencing_resource_pkey DO UPDATE
    SET highest_read_token = greatest(r.highest_read_token, EXCLUDED.highest_read_token),
        holder_key = EXCLUDED.holder_key
    WHERE r.highest_token <= EXCLUDED.highest_read_token
      AND COALESCE(NULLIF(r.holder_key, ''), EXCLUDED.holder_key) = EXCLUDED.holder_key;
  IF FOUND THEN
    RETURN true;
  END IF;
  PERFORM dlock_fence_same_key_(resource, lock_key);
  RETURN false;
END $fn$;

-- Binds `resource` to `lock_key` ahead of its first write (closes the first-use window).
-- Idempotent; DL001 when it is bound to another key already (a binding never changes).
CREATE OR REPLACE FUNCTION dlock_fence_bind(resource text, lock_key text)
RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_variable
BEGIN
  PERFORM dlock_fence_check_(resource, 1, lock_key);
  INSERT INTO fencing_resource AS r (resource, highest_token, holder_key)
  VALUES (resource, 0, lock_key)
  ON CONFLICT ON CONSTRAINT fencing_resource_pkey DO UPDATE
    SET holder_key = EXCLUDED.holder_key
    WHERE COALESCE(NULLIF(r.holder_key, ''), EXCLUDED.holder_key) = EXCLUDED.holder_key;
  IF NOT FOUND THEN
    PERFORM dlock_fence_same_key_(resource, lock_key);
  END IF;
END $fn$;
