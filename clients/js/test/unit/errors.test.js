// Error mapping (every C3 code to its typed error), retries, failover and cancellation, against
// scripted servers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as dlock from '../../src/index.js';
import { errorFromResponse } from '../../src/errors.js';
import { error, fakeServer, granting } from './fake_server.js';

const CODES = [
  [400, 'invalid_argument', dlock.InvalidArgument],
  [413, 'payload_too_large', dlock.InvalidArgument],
  [404, 'not_found', dlock.InvalidArgument],
  [405, 'method_not_allowed', dlock.InvalidArgument],
  [401, 'unauthenticated', dlock.Unauthenticated],
  [401, 'unauthorized', dlock.Unauthenticated],
  [403, 'permission_denied', dlock.PermissionDenied],
  [403, 'forbidden', dlock.PermissionDenied],
  [404, 'session_not_found', dlock.SessionNotFound],
  [409, 'lock_lost', dlock.LockLost],
  [404, 'lock_not_found', dlock.LockLost],
  [409, 'conflict', dlock.Conflict],
  [409, 'held', dlock.Held],
  [429, 'too_many_requests', dlock.ResourceExhausted],
  [500, 'internal', dlock.Internal],
  [503, 'unavailable', dlock.Unavailable],
  [503, 'not_leader', dlock.NotLeader],
];

test('errors: every C3 code maps to its typed error', () => {
  for (const [status, code, Kind] of CODES) {
    const body = JSON.stringify({ error: { code, message: 'm', field: 'limit' } });
    const mapped = errorFromResponse(status, body, 'acquire k', 'k');
    assert.ok(mapped instanceof Kind, `${code}: ${mapped.name}`);
    assert.ok(mapped instanceof dlock.DlockError);
  }
  // Unknown bodies fall back on the status.
  assert.ok(errorFromResponse(502, '<html>', 'x') instanceof dlock.Unavailable);
  assert.ok(errorFromResponse(418, '', 'x') instanceof dlock.InvalidArgument);
  assert.ok(errorFromResponse(500, '', 'x') instanceof dlock.Internal);
});

test('errors: outage: a 503 is unavailable, never held', () => {
  for (const code of ['unavailable', 'not_leader', '']) {
    const body = JSON.stringify({ error: { code, message: 'backend down' } });
    const mapped = errorFromResponse(503, body, 'acquire k', 'k');
    assert.ok(mapped instanceof dlock.Unavailable, mapped.name);
    assert.ok(!(mapped instanceof dlock.Held));
  }
});

async function withServer(handle, options, body) {
  const server = await fakeServer(handle);
  const client = new dlock.Client({ servers: server.url, retryBudget: '600ms',
    backoffInitial: '20ms', backoffMax: '100ms', ...options });
  try {
    return await body(client, server);
  } finally {
    client.close();
    await server.close();
  }
}

test('errors: outage: an acquire answered 503 until its budget rejects, never resolves held',
  async () => {
    const grant = granting();
    const outage = (seen) => (seen.url.includes('/acquire') ? error(503, 'unavailable')
      : grant(seen));
    await withServer(outage, {}, async (client, server) => {
      const session = await client.session();
      await assert.rejects(session.acquire('k'), dlock.Unavailable);
      await assert.rejects(session.lock('k', { wait: '200ms' }), dlock.Unavailable);
      assert.ok(server.requests.filter((r) => r.url.includes('/acquire')).length > 2,
        'retried');
      await session.close();
    });
  });

test('errors: outage: retried with back-off until the server is back', async () => {
  let failures = 3;
  const grant = granting({ token: 9 });
  await withServer((seen) => (seen.url.includes('/acquire') && failures-- > 0
    ? error(503, 'unavailable') : grant(seen)), { retryBudget: '5s' }, async (client) => {
    const session = await client.session();
    const lock = await session.acquire('k', { ttl: '10s' });
    assert.equal(lock.token, 9);
    await session.close();
  });
});

test('errors: 401 and 403 are not retried; the token is never shown', async () => {
  const token = 'dlk_secretsecretsecret';
  await withServer(() => error(401, 'unauthenticated'), { token }, async (client, server) => {
    await assert.rejects(client.session(), (e) => e instanceof dlock.Unauthenticated &&
      !e.message.includes(token));
    assert.equal(server.requests.length, 1);
    assert.equal(server.requests[0].headers.authorization, `Bearer ${token}`);
  });
  await withServer(() => error(403, 'permission_denied'), {}, async (client, server) => {
    await assert.rejects(client.session(), dlock.PermissionDenied);
    assert.equal(server.requests.length, 1);
  });
});

test('errors: a connection lost while opening a session is an unknown outcome, not repeated',
  async () => {
    await withServer(() => 'drop', { retryBudget: '5s' }, async (client, server) => {
      await assert.rejects(client.session(), dlock.UnknownOutcome);
      assert.equal(server.requests.length, 1);
    });
  });

test('errors: no server listening is unavailable after the budget', async () => {
  const client = new dlock.Client({ servers: 'http://127.0.0.1:9', retryBudget: '300ms' });
  await assert.rejects(client.session(), (e) => e instanceof dlock.Unavailable &&
    !(e instanceof dlock.UnknownOutcome));
  client.close();
});

test('failover: a 503 moves the call to the next server', async () => {
  const down = await fakeServer(() => error(503, 'unavailable'));
  const up = await fakeServer(granting({ token: 3 }));
  const client = new dlock.Client({ servers: [down.url, up.url], retryBudget: '2s' });
  try {
    const session = await client.session();
    const lock = await session.lock('k', { ttl: '5s' });
    assert.equal(lock.token, 3);
    assert.equal(down.requests.length, 1); // then it stays on the server that answers
    await session.close();
  } finally {
    client.close();
    await down.close();
    await up.close();
  }
});

test('cancel: aborting the signal ends a waiting acquire with Cancelled', async () => {
  const grant = granting();
  await withServer((seen) => (seen.url.includes('/acquire') ? 'hang' : grant(seen)), {},
    async (client) => {
      const session = await client.session();
      const controller = new AbortController();
      const waiting = session.acquire('k', { wait: '30s', signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      await assert.rejects(waiting, dlock.Cancelled);
      await session.close();
    });
});

test('lost: a revoked lock aborts its signal and calls onLost once', async () => {
  const grant = granting();
  await withServer((seen) => (seen.url.includes('/extend') ? error(409, 'lock_lost') : grant(seen)),
    {}, async (client) => {
      const session = await client.session();
      const reasons = [];
      const lock = await session.lock('k', { ttl: '300ms', onLost: (r) => reasons.push(r) });
      await new Promise((resolve) => lock.signal.addEventListener('abort', resolve));
      assert.ok(lock.signal.reason instanceof dlock.LockLost);
      assert.throws(() => lock.check(), dlock.LockLost);
      await assert.rejects(lock.release(), dlock.LockLost);
      assert.equal(reasons.length, 1);
      await session.close();
    });
});

test('tokens: option, file, DLOCK_TOKEN, DLOCK_TOKEN_FILE; a bad one names no secret', async () => {
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'dlock-js-'));
  const file = join(dir, 'token');
  writeFileSync(file, 'dlk_fromfile\n');
  const { resolveToken } = await import('../../src/core.js');
  assert.equal(resolveToken('dlk_option', file), 'dlk_option');
  assert.equal(resolveToken(undefined, file), 'dlk_fromfile');
  process.env.DLOCK_TOKEN = 'dlk_env';
  assert.equal(resolveToken(), 'dlk_env');
  delete process.env.DLOCK_TOKEN;
  process.env.DLOCK_TOKEN_FILE = file;
  assert.equal(resolveToken(), 'dlk_fromfile');
  delete process.env.DLOCK_TOKEN_FILE;
  assert.throws(() => resolveToken('not a token!'), (e) => e instanceof dlock.InvalidArgument &&
    !e.message.includes('not a token!'));
});
