// The typed API as a TypeScript user writes it, compiled by tsc (npm test): `await using`
// releases a lock and closes its session when the block ends, also when the block throws.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client, Held, LockLost, type Lock } from 'dlock';
import { error, fakeServer, granting } from '../unit/fake_server.js';

test('await using releases the lock and closes its session', async () => {
  const server = await fakeServer(granting({ token: 42 }));
  try {
    await using client = new Client({ servers: [server.url] });
    let token = 0;
    {
      await using lock: Lock = await client.lock('payouts/batch-17', { ttl: '10s' });
      lock.check();
      token = lock.token;
      assert.equal(lock.signal.aborted, false);
    }
    assert.equal(token, 42);
    const deletes = server.requests.filter((r) => r.method === 'DELETE').map((r) => r.url);
    assert.match(deletes[0], /^\/v1\/locks\/payouts%2Fbatch-17\?session_id=s1&fencing_token=42/);
    assert.equal(deletes[1], '/v1/sessions/s1');
  } finally {
    await server.close();
  }
});

test('await using releases when the block throws', async () => {
  const server = await fakeServer(granting());
  try {
    const client = new Client({ servers: server.url });
    await assert.rejects(async () => {
      await using session = await client.session({ ttl: '10s' });
      await using lock = await session.lock('k');
      lock.check();
      throw new Error('the job failed');
    }, /the job failed/);
    assert.deepEqual(server.requests.filter((r) => r.method === 'DELETE').length, 2);
    client.close();
  } finally {
    await server.close();
  }
});

test('a lock lost while held throws LockLost when its block ends', async () => {
  let revoked = false;
  const grant = granting();
  const server = await fakeServer((seen) => (revoked && seen.method === 'DELETE' &&
    seen.url.startsWith('/v1/locks/') ? error(409, 'lock_lost') : grant(seen)));
  try {
    const client = new Client({ servers: server.url });
    await assert.rejects(async () => {
      await using lock = await client.lock('k', { ttl: '1s', autoExtend: false });
      revoked = true;
      await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
      assert.throws(() => lock.check(), LockLost);
    }, LockLost);
    client.close();
  } finally {
    await server.close();
  }
});

test('a held key: acquire gives null, lock throws Held', async () => {
  const grant = granting();
  const server = await fakeServer((seen) => (seen.url.includes('/acquire')
    ? error(409, 'held', { delayed_until: '2026-12-06T12:00:00Z' }) : grant(seen)));
  try {
    const client = new Client({ servers: server.url });
    await using session = await client.session();
    const lock: Lock | null = await session.acquire('k');
    assert.equal(lock, null);
    await assert.rejects(session.lock('k'), (e: unknown) =>
      e instanceof Held && e.delayedUntil === '2026-12-06T12:00:00Z');
    client.close();
  } finally {
    await server.close();
  }
});
