// Every scenario of tests/clients/scenarios.json on each backend it names and that
// DLOCK_CLIENT_BACKENDS lists (comma-separated, default sqlite,pg,etcd), each against one harness
// (tests/clients/harness.cc) started once per backend. DLOCK_TEST_FILTER: a regular expression
// over the case names `<scenario>-<backend>`.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Harness } from './harness.js';
import { ScenarioRun } from './scenario_runner.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

// The environment variables the client reads must not leak from the shell into the tests.
for (const name of Object.keys(process.env)) {
  if (name.startsWith('DLOCK_') && !name.startsWith('DLOCK_CLIENT_') &&
      !name.startsWith('DLOCK_TEST_')) {
    delete process.env[name];
  }
}

const scenariosPath = process.env.DLOCK_CLIENT_SCENARIOS ||
  join(ROOT, 'tests/clients/scenarios.json');
const binary = process.env.DLOCK_CLIENT_HARNESS ||
  join(ROOT, 'build/tests/clients/dlock_client_harness');
const backends = (process.env.DLOCK_CLIENT_BACKENDS || 'sqlite,pg,etcd').split(',');
const filter = process.env.DLOCK_TEST_FILTER ? new RegExp(process.env.DLOCK_TEST_FILTER) : null;

const document = JSON.parse(readFileSync(scenariosPath, 'utf8'));
if (document.format !== 1) throw new Error('this runner reads format 1 of the scenario list');

const cases = [];
for (const scenario of document.scenarios) {
  for (const backend of scenario.backends) {
    const name = `${scenario.name}-${backend}`;
    if (backends.includes(backend) && (!filter || filter.test(name))) {
      cases.push({ name, scenario, backend });
    }
  }
}

const harnesses = new Map();
const tmp = mkdtempSync(join(tmpdir(), 'dlock-js-scenarios-'));
after(async () => {
  for (const harness of harnesses.values()) await (await harness).close();
  rmSync(tmp, { recursive: true, force: true });
});

if (filter && cases.length === 0) {
  // scripts/mutation-check reads this line: a row whose filter matches nothing is broken, not
  // caught.
  console.log('DLOCK_TEST_FILTER selected no test');
  test('DLOCK_TEST_FILTER selects a scenario', () => {
    throw new Error(`DLOCK_TEST_FILTER=${process.env.DLOCK_TEST_FILTER} selected no test`);
  });
}

const skip = existsSync(binary) ? false : `no harness at ${binary} (build dlock_client_harness)`;
for (const { name, scenario, backend } of cases) {
  test(name, { skip, timeout: 180_000 }, async () => {
    if (!harnesses.has(backend)) harnesses.set(backend, Harness.start(binary, backend));
    const harness = await harnesses.get(backend);
    const run = new ScenarioRun(harness, scenario, tmp);
    try {
      await run.run();
    } finally {
      try {
        await harness.bringBack(); // first: closing sessions needs a server
      } finally {
        await run.close();
      }
    }
  });
}
