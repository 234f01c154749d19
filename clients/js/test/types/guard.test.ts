// The guard's types as a TypeScript user meets them, and withFence's transaction flow, over a
// scripted connection (its SQL runs against a real PostgreSQL in test/guard.test.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Queryable, FenceKeyConflict, withFence } from 'dlock/guard';

function scripted(answer: (text: string) => unknown): Queryable & { seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    async query(text: string) {
      seen.push(text.split(' ')[0] + (text.includes('dlock_fence') ? ' fence' : ''));
      const value = answer(text);
      if (value instanceof Error) throw value;
      return { rows: [{ admitted: value }] };
    },
  };
}

test('withFence writes and commits when admitted, rolls back when stale', async () => {
  const admitted = scripted(() => true);
  let wrote = 0;
  assert.equal(await withFence(admitted, { resource: 'r', token: 3n, lockKey: 'k' },
    async () => { wrote += 1; }), true);
  assert.deepEqual(admitted.seen, ['BEGIN', 'SELECT fence', 'COMMIT']);
  const stale = scripted(() => false);
  assert.equal(await withFence(stale, { resource: 'r', token: 2, lockKey: 'k' },
    async () => { wrote += 1; }), false);
  assert.deepEqual(stale.seen, ['BEGIN', 'SELECT fence', 'ROLLBACK']);
  assert.equal(wrote, 1);
});

test('withFence maps SQLSTATE DL001 to FenceKeyConflict and rolls back', async () => {
  const bound = scripted((text) => (text.includes('dlock_fence')
    ? Object.assign(new Error('bound to another key'), { code: 'DL001' }) : true));
  await assert.rejects(withFence(bound, { resource: 'r', token: 1, lockKey: 'k' }, async () => {}),
    FenceKeyConflict);
  assert.deepEqual(bound.seen, ['BEGIN', 'SELECT fence', 'ROLLBACK']);
});
