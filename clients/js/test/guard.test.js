// The fencing guard (src/guard.js) against a real PostgreSQL with src/fencing/fencing_guard.sql
// installed by executing the file's text. `pg` (node-postgres) is a dev dependency, the driver
// a user would bring.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { InvalidArgument } from '../src/errors.js';
import { FenceKeyConflict, admit, admitRead, bind, withFence } from '../src/guard.js';
import { postgresMissing, startPostgres } from './postgres.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const skip = postgresMissing() || false;
let server;
let db;

async function connect(url) {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return client;
}

before(async () => {
  if (skip) return;
  server = await startPostgres(async (url) => (await connect(url)).end());
  db = await connect(server.url);
  await db.query(readFileSync(join(ROOT, 'src/fencing/fencing_guard.sql'), 'utf8'));
});

after(async () => {
  await db?.end();
  await server?.stop();
});

/** admit (or admitRead) in a transaction of its own, committed when admitted. */
async function tryWrite(resource, token, key, read = false) {
  return withFence(db, { resource, token, lockKey: key, read }, async () => {});
}

test('guard: the same token may write again; a greater one is admitted; a smaller is stale',
  { skip }, async () => {
    assert.equal(await tryWrite('ledger/a', 5, 'payouts'), true);
    assert.equal(await tryWrite('ledger/a', 5, 'payouts'), true);
    assert.equal(await tryWrite('ledger/a', 8, 'payouts'), true);
    assert.equal(await tryWrite('ledger/a', 7, 'payouts'), false);
    assert.equal(await tryWrite('ledger/a', 8n, 'payouts'), true); // a bigint token
  });

test('guard: a stale write is never made', { skip }, async () => {
  await db.query('CREATE TABLE IF NOT EXISTS payouts (batch text, token bigint)');
  const write = (token) => withFence(db, { resource: 'ledger/b', token, lockKey: 'payouts' },
    (tx) => tx.query('INSERT INTO payouts VALUES ($1, $2)', ['b', token]));
  assert.equal(await write(10), true);
  assert.equal(await write(9), false);
  const { rows } = await db.query("SELECT token FROM payouts WHERE batch = 'b'");
  assert.deepEqual(rows.map((r) => Number(r.token)), [10]);
});

test('guard: a writer must be above every admitted reader', { skip }, async () => {
  assert.equal(await tryWrite('report/c', 3, 'report', true), true);
  assert.equal(await tryWrite('report/c', 6, 'report', true), true);
  assert.equal(await tryWrite('report/c', 4, 'report', true), true); // readers are not ordered
  assert.equal(await tryWrite('report/c', 5, 'report'), false);
  assert.equal(await tryWrite('report/c', 7, 'report'), true);
});

test('guard: a resource bound to another key is a typed error, never a decision', { skip },
  async () => {
    await bind(db, 'ledger/d', 'payouts');
    await assert.rejects(tryWrite('ledger/d', 100, 'other-key'), FenceKeyConflict);
    await db.query('BEGIN');
    await assert.rejects(admit(db, 'ledger/d', 1, 'other-key'), FenceKeyConflict);
    await db.query('ROLLBACK');
    await assert.rejects(bind(db, 'ledger/d', 'other-key'), FenceKeyConflict);
    assert.equal(await tryWrite('ledger/d', 1, 'payouts'), true);
  });

test('guard: bad arguments are InvalidArgument (SQLSTATE DL002 or before the query)', { skip },
  async () => {
    await assert.rejects(tryWrite('', 1, 'payouts'), InvalidArgument);
    await assert.rejects(tryWrite('ledger/e', 1, ''), InvalidArgument);
    await assert.rejects(tryWrite('ledger/e', 0, 'payouts'), InvalidArgument);
    await assert.rejects(admitRead(db, 'ledger/e', 1.5, 'payouts'), InvalidArgument);
  });

test('guard: the admitted row stays locked until the transaction ends', { skip }, async () => {
  const other = await connect(server.url);
  try {
    await db.query('BEGIN');
    assert.equal(await admit(db, 'ledger/f', 20, 'payouts'), true);
    await other.query('BEGIN');
    let decided = false;
    const racing = admit(other, 'ledger/f', 19, 'payouts').then((v) => {
      decided = true;
      return v;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(decided, false, 'the second writer did not wait for the first to commit');
    await db.query('COMMIT');
    assert.equal(await racing, false);
    await other.query('ROLLBACK');
  } finally {
    await other.end();
  }
});
