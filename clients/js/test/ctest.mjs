// What CTest runs (tests/clients/CMakeLists.txt):
//   node test/ctest.mjs deps        npm ci, once per package-lock.json (a stamp in node_modules)
//   node test/ctest.mjs unit        tsc over the typed tests, then node --test on the unit tests
//   node test/ctest.mjs scenarios   the scenario list (test/scenarios.test.js)
//   node test/ctest.mjs guard       the fencing guard against a real PostgreSQL
//   node test/ctest.mjs install     npm install of this directory into a scratch project, as
//                                   the README says, then import it from there alone
// DLOCK_TEST_FILTER (scripts/mutation-check): a regular expression over test names; one that
// selects nothing prints "DLOCK_TEST_FILTER selected no test" and fails.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync }
  from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');
const filter = process.env.DLOCK_TEST_FILTER ?? '';

function run(command, args, cwd = HERE) {
  const result = spawnSync(command, args, { cwd, stdio: 'inherit' });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

/** node --test on `files`; its TAP output shown, and the filter's selection checked. */
function nodeTest(files, nameFilter) {
  const args = ['--test', '--test-reporter=tap'];
  if (nameFilter) args.push(`--test-name-pattern=${nameFilter}`);
  const result = spawnSync(process.execPath, [...args, ...files],
    { cwd: HERE, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 << 20 });
  process.stdout.write(result.stdout ?? '');
  const count = (name) =>
    Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(result.stdout ?? '')?.[1] ?? 0);
  if (nameFilter && count('pass') + count('fail') === 0) {
    console.log('DLOCK_TEST_FILTER selected no test');
    return 1;
  }
  return result.status ?? 1;
}

const what = process.argv[2];
let status;
if (what === 'deps') {
  const lock = createHash('sha256').update(readFileSync(join(HERE, 'package-lock.json')))
    .digest('hex');
  const stamp = join(HERE, 'node_modules', '.dlock-package-lock.sha256');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === lock) {
    console.log('node_modules matches package-lock.json: npm ci not needed');
    status = 0;
  } else {
    status = run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund']);
    if (status === 0) writeFileSync(stamp, lock);
  }
} else if (what === 'unit') {
  status = run(process.execPath, [join(HERE, 'node_modules/typescript/bin/tsc'), '-p',
    'test/types']);
  if (status === 0) status = nodeTest(['test/unit/', 'test/build/'], filter);
} else if (what === 'scenarios') {
  status = nodeTest(['test/scenarios.test.js'], ''); // the runner applies the filter itself
} else if (what === 'guard') {
  status = nodeTest(['test/guard.test.js'], filter);
} else if (what === 'install') {
  // A copy (--install-links), so that package.json's "files" must hold everything it needs.
  const project = mkdtempSync(join(tmpdir(), 'dlock-js-install-'));
  try {
    writeFileSync(join(project, 'package.json'), '{"name": "scratch", "private": true}\n');
    status = run('npm', ['install', '--install-links', '--offline', '--no-audit', '--no-fund',
      HERE], project);
    const installed = readdirSync(join(project, 'node_modules')).filter((n) => !n.startsWith('.'));
    if (status === 0 && installed.join() !== 'dlock') {
      console.error(`run-time dependencies came with it: ${installed.join(', ')}`);
      status = 1;
    }
    const check = "import { Client, Held, LockLost } from 'dlock';" +
      "import { admit, withFence } from 'dlock/guard';" +
      "new Client({ servers: 'http://127.0.0.1:7070' }).close();" +
      "if (typeof admit !== 'function' || !(new Held('k') instanceof Error)) process.exit(1);" +
      "console.log('import dlock: ok');";
    if (status === 0) status = run(process.execPath, ['--input-type=module', '-e', check], project);
    for (const file of ['index.d.ts', 'guard.d.ts']) {
      if (status === 0 && !existsSync(join(project, 'node_modules/dlock', file))) {
        console.error(`${file} is not installed`);
        status = 1;
      }
    }
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
} else {
  console.error('usage: node test/ctest.mjs deps|unit|scenarios|guard|install');
  status = 2;
}
process.exit(status);
