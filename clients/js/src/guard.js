// The fencing guard (docs/fencing.md) over the PostgreSQL functions of
// src/fencing/fencing_guard.sql, called through the caller's own node-postgres (`pg`) client or
// any object with the same `query(text, values)`: the driver is the caller's, never a
// dependency of this package.
//
//   await db.query('BEGIN');
//   if (await admit(db, 'ledger/payouts', lock.token, lock.key)) {
//     await db.query('INSERT INTO payouts …');      // the fenced write, same transaction
//     await db.query('COMMIT');
//   } else {
//     await db.query('ROLLBACK');                    // stale: a greater token was accepted
//   }
import { DlockError, InvalidArgument } from './errors.js';

/**
 * SQLSTATE DL001: the resource is bound to another lock key (a configuration error, never a
 * decision). Roll back.
 */
export class FenceKeyConflict extends DlockError {
  static code = 'fence_key_conflict';
}

function checkToken(token) {
  if ((typeof token === 'bigint' && token > 0n) || (Number.isSafeInteger(token) && token > 0)) {
    return String(token);
  }
  throw new InvalidArgument(`fencing: token must be a positive fencing token, got ${token}`,
    { field: 'token' });
}

async function call(db, sql, values) {
  try {
    return await db.query(sql, values);
  } catch (error) {
    if (error?.code === 'DL001') throw new FenceKeyConflict(error.message, { cause: error });
    if (error?.code === 'DL002') {
      throw new InvalidArgument(error.message, { field: 'fencing', cause: error });
    }
    throw error;
  }
}

async function decide(db, fn, resource, token, lockKey) {
  const result = await call(db, `SELECT ${fn}($1::text, $2::bigint, $3::text) AS admitted`,
    [resource, checkToken(token), lockKey]);
  const admitted = result.rows?.[0]?.admitted;
  if (typeof admitted !== 'boolean') {
    throw new DlockError(`fencing: ${fn} answered ${JSON.stringify(admitted)}, not a boolean`);
  }
  return admitted;
}

/**
 * Whether a writer holding `token` of lock `lockKey` may write `resource`: call it inside the
 * transaction that makes the write. true: admitted (write, then COMMIT; the resource's row stays
 * locked until then); false: stale, a greater token was accepted (roll back, do not write).
 */
export function admit(db, resource, token, lockKey) {
  return decide(db, 'dlock_fence_admit', resource, token, lockKey);
}

/**
 * The reader form (a shared hold of a read-write lock): readers are not ordered among
 * themselves, and a writer must be above every admitted reader's token.
 */
export function admitRead(db, resource, token, lockKey) {
  return decide(db, 'dlock_fence_admit_read', resource, token, lockKey);
}

/** Binds `resource` to the lock key whose tokens it compares (FenceKeyConflict if another). */
export async function bind(db, resource, lockKey) {
  await call(db, 'SELECT dlock_fence_bind($1::text, $2::text)', [resource, lockKey]);
}

/**
 * One fenced transaction on `db` (one connection, e.g. a pg.Client or a pool's client):
 * BEGIN, admit (or admitRead with `read: true`), then `write(db)` and COMMIT when admitted;
 * ROLLBACK when stale or when anything throws. Resolves to whether the write was admitted.
 */
export async function withFence(db, { resource, token, lockKey, read = false }, write) {
  await db.query('BEGIN');
  try {
    const admitted = await (read ? admitRead : admit)(db, resource, token, lockKey);
    if (!admitted) {
      await db.query('ROLLBACK');
      return false;
    }
    await write(db);
    await db.query('COMMIT');
    return true;
  } catch (error) {
    await db.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
