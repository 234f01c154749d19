// Deadline arithmetic (docs/client.md "Client deadlines", ADR-0012) and durations.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { test } from 'node:test';
import {
  Client, durationMs, InvalidArgument, leaseDeadline, trustedTtlMs,
} from '../../src/index.js';
import { parseClockDrift, resolveClockDrift } from '../../src/lease.js';
import { fakeServer, granting } from './fake_server.js';

test('deadline: the smaller of the TTL asked and answered is trusted', () => {
  assert.equal(trustedTtlMs(10_000, 30_000), 10_000);
  assert.equal(trustedTtlMs(10_000, 5_000), 5_000);
  assert.equal(trustedTtlMs(0, 30_000), 30_000); // the server's default was asked for
  assert.equal(trustedTtlMs(4_000, 0), 4_000);
});

test('deadline: send time + TTL - ceil(TTL x drift)', () => {
  assert.equal(leaseDeadline(1_000, 10_000, 0.01), 10_900);
  assert.equal(leaseDeadline(0, 4_000, 0.25), 3_000);
  assert.equal(leaseDeadline(0, 1, 0.01), 0); // the allowance rounds up
  assert.equal(leaseDeadline(500, 2_000, 0), 2_500);
});

test('deadline: a server answering more than asked does not lengthen the lock', async () => {
  const server = await fakeServer(granting({ ttlMs: 60_000 }));
  const client = new Client({ servers: server.url, clockDrift: 0.01 });
  try {
    const session = await client.session({ ttl: '10s' });
    const lock = await session.lock('k', { ttl: '2s', autoExtend: false });
    const after = performance.now(); // later than the acquire's send time
    assert.equal(lock.ttlMs, 2_000);
    assert.ok(lock.deadline <= after + 2_000 - 20, `trusted ${lock.deadline - after} ms`);
    assert.ok(lock.deadline <= session.deadline);
    await session.close();
  } finally {
    client.close();
    await server.close();
  }
});

test('deadline: a lock is never trusted past its session', async () => {
  const server = await fakeServer(granting());
  const client = new Client({ servers: server.url });
  try {
    const session = await client.session({ ttl: '1s' });
    const lock = await session.lock('k', { ttl: '60s', autoExtend: false });
    assert.ok(lock.deadline <= session.deadline, 'the lock outlives its session');
    await session.close();
  } finally {
    client.close();
    await server.close();
  }
});

test('durations', () => {
  assert.equal(durationMs('500ms'), 500);
  assert.equal(durationMs('10s'), 10_000);
  assert.equal(durationMs('1.5s'), 1_500);
  assert.equal(durationMs('5m'), 300_000);
  assert.equal(durationMs('1h'), 3_600_000);
  assert.equal(durationMs(2), 2_000);
  assert.equal(durationMs(undefined), 0);
  assert.throws(() => durationMs('ten seconds', 'ttl'), (e) => e instanceof InvalidArgument &&
    e.field === 'ttl');
  assert.throws(() => durationMs(-1), InvalidArgument);
});

test('clock drift: option, DLOCK_CLOCK_DRIFT, default', () => {
  assert.equal(parseClockDrift('0.02'), 0.02);
  assert.equal(parseClockDrift('5%'), 0.05);
  assert.throws(() => parseClockDrift('0.5'), InvalidArgument);
  assert.throws(() => parseClockDrift('lots'), InvalidArgument);
  const saved = process.env.DLOCK_CLOCK_DRIFT;
  try {
    process.env.DLOCK_CLOCK_DRIFT = '3%';
    assert.equal(resolveClockDrift(undefined), 0.03);
    assert.equal(resolveClockDrift(0.1), 0.1);
    delete process.env.DLOCK_CLOCK_DRIFT;
    assert.equal(resolveClockDrift(undefined), 0.01);
  } finally {
    if (saved === undefined) delete process.env.DLOCK_CLOCK_DRIFT;
    else process.env.DLOCK_CLOCK_DRIFT = saved;
  }
});
