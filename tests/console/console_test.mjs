// Browser tests of dlockd's web console (docs/console.md): Debian's chromium, headless, driven by
// playwright-core, against real dlockd processes on SQLite, PostgreSQL or etcd with real
// sessions, held locks, a waiter, shared holders, semaphore permits, an election and a lock-delay.
//
//   node console_test.mjs deps          npm ci of package-lock.json into $DLOCK_CONSOLE_WORK/deps,
//                                       once per lock file (a stamp holds its SHA-256)
//   node console_test.mjs run [BACKEND] the cases below on sqlite (default), pg or etcd;
//                                       screenshots in $DLOCK_CONSOLE_WORK/screenshots/BACKEND
//
// Environment: DLOCK_DLOCKD (the dlockd binary), DLOCK_CONSOLE_BACKEND (dlock_console_backend:
// starts PostgreSQL or etcd from the test fixtures, console_backend.cc), DLOCK_CONSOLE_WORK (a
// directory of the build tree), DLOCK_CHROMIUM (default /usr/bin/chromium), DLOCK_TEST_FILTER
// (a regular expression over case names; scripts/mutation-check sets it).

import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const work = process.env.DLOCK_CONSOLE_WORK || join(here, 'work');
const deps = join(work, 'deps');

if (process.argv[2] === 'deps') {
  mkdirSync(deps, { recursive: true });
  const lock = readFileSync(join(here, 'package-lock.json'));
  const want = createHash('sha256').update(lock).digest('hex');
  const stamp = join(deps, '.stamp');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) {
    console.log('console deps: node_modules matches package-lock.json');
    process.exit(0);
  }
  copyFileSync(join(here, 'package.json'), join(deps, 'package.json'));
  copyFileSync(join(here, 'package-lock.json'), join(deps, 'package-lock.json'));
  const npm = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: deps, stdio: 'inherit' });
  if (npm.status !== 0) process.exit(1);
  writeFileSync(stamp, want);
  process.exit(0);
}
const backend = process.argv[3] || 'sqlite';
if (process.argv[2] !== 'run' || !['sqlite', 'pg', 'etcd'].includes(backend)) {
  console.error('usage: node console_test.mjs deps|run [sqlite|pg|etcd]');
  process.exit(64);
}

const browser = process.env.DLOCK_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(browser)) {
  console.log(`FAIL: no ${browser} (Debian's chromium: scripts/setup installs it)`);
  process.exit(1);
}
const { chromium } = createRequire(join(deps, 'package.json'))('playwright-core');
const screenshots = join(work, 'screenshots', backend);
mkdirSync(screenshots, { recursive: true });
const scratch = mkdtempSync(join(tmpdir(), 'dlock-console-'));

// The string a key, an owner and an election value are named: markup that would run script if
// the console ever rendered it as HTML.
const MARKUP = '<img src=x onerror=alert(1)>';
// How soon a change made through the API must show in the open page: the console refreshes once a
// second (REFRESH_MS in app.js), so one period plus the refresh's own requests.
const LIVE_BOUND_MS = 1500;

// --- dlockd ---------------------------------------------------------------------------------

const newToken = () => 'dlk_' + randomBytes(32).toString('base64url').slice(0, 43);
const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const children = [];
// The environment of a child: no DLOCK_* variable of ours or the developer's shell leaks in.
const childEnv = (extra = []) => Object.fromEntries(Object.entries(process.env)
  .filter(([name]) => !name.startsWith('DLOCK_')).concat(extra));

// The backend (dlock_console_backend): its first line says how each dlockd reaches it; it tears
// the backend down when its stdin closes (at the end, or when this process dies).
async function startBackend() {
  const child = spawn(process.env.DLOCK_CONSOLE_BACKEND, [backend],
    { stdio: ['pipe', 'pipe', 'inherit'], env: childEnv() });
  let out = '';
  const hello = await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))));
    });
    child.on('exit', (code) => reject(new Error(`dlock_console_backend ${backend} exited with ${code}`)));
    child.on('error', reject);
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) { resolve(); return; }
    child.on('exit', resolve);
    child.stdin.end();
  });
  return { args: hello.dlockd_args, stop };
}

// `adminToken` goes in DLOCK_ADMIN_TOKEN (C6: not on the command line).
async function startDlockd(name, backendArgs, extra, adminToken) {
  const dir = join(scratch, name);
  mkdirSync(dir);
  const ready = join(dir, 'ready');
  const child = spawn(process.env.DLOCK_DLOCKD, [...backendArgs,
    '--server-listen', '127.0.0.1:0', '--server-ready-file', ready, '--log-level', 'warn', ...extra],
  { stdio: ['ignore', 'ignore', 'inherit'], env: childEnv([['DLOCK_ADMIN_TOKEN', adminToken]]) });
  children.push(child);
  for (let i = 0; i < 300; i++) {
    if (existsSync(ready) && readFileSync(ready, 'utf8').trim()) {
      return `http://${readFileSync(ready, 'utf8').trim()}`;
    }
    if (child.exitCode !== null) throw new Error(`dlockd ${name} exited with ${child.exitCode}`);
    await sleep(50);
  }
  throw new Error(`dlockd ${name} did not become ready`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function api(base, method, target, body, bearer) {
  const headers = {};
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const response = await fetch(base + target, { method, headers, body: body && JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

async function must(base, method, target, body, bearer, want = [200, 201, 204]) {
  const answer = await api(base, method, target, body, bearer);
  if (!want.includes(answer.status)) {
    throw new Error(`${method} ${target}: ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return answer.body;
}

const enc = encodeURIComponent;

// The state every view shows, on the plain server.
async function populate(base, adminToken) {
  const session = async (owner, extra = {}) =>
    (await must(base, 'POST', '/v1/sessions', { owner, ttl_ms: 120000, ...extra })).session_id;
  const acquire = (sid, key, extra = {}) =>
    must(base, 'POST', `/v1/locks/${enc(key)}/acquire`, { session_id: sid, ttl_ms: 120000, ...extra });
  const s = {
    alice: await session('alice'), bob: await session('bob'), carol: await session('carol'),
    dave: await session('dave'), markup: await session(MARKUP),
    tape: await session('tape-writer', { lock_delay_ms: 60000 }),
  };
  const payouts = await acquire(s.alice, 'payouts/batch-17');
  // bob waits for it (answered when alice releases, in the live case).
  const waiting = api(base, 'POST', `/v1/locks/${enc('payouts/batch-17')}/acquire`,
    { session_id: s.bob, ttl_ms: 120000, wait_ms: 60000 });
  waiting.catch(() => {});  // a run without the release case: dlockd's stop ends it
  await acquire(s.carol, 'reports', { mode: 'shared' });
  await acquire(s.dave, 'reports', { mode: 'shared' });
  for (const sid of [s.carol, s.dave]) {
    await must(base, 'POST', '/v1/semaphores/workers/acquire', { session_id: sid, limit: 3, ttl_ms: 120000 });
  }
  await must(base, 'POST', '/v1/elections/scheduler/campaign', { session_id: s.carol, value: '10.0.0.7:8080' });
  await acquire(s.markup, MARKUP);
  await must(base, 'POST', `/v1/elections/${enc('leader-' + MARKUP)}/campaign`, { session_id: s.markup, value: MARKUP });
  await acquire(s.dave, 'doomed');
  // A lock-delay: tape-drive's grant ends without a release (revoked).
  await acquire(s.tape, 'tape-drive');
  await must(base, 'POST', '/v1/admin/locks/tape-drive/revoke', null, adminToken);
  for (let i = 0; i < 100; i++) {  // bob is queued once the read shows him
    const read = await api(base, 'GET', `/v1/locks/${enc('payouts/batch-17')}`);
    if ((read.body.waiters || []).length === 1) break;
    await sleep(20);
  }
  return { sessions: s, payouts, waiting };
}

// --- checks ---------------------------------------------------------------------------------

class Failure extends Error {}
function check(ok, what) {
  if (!ok) throw new Failure(what);
}

// Every button, link, textbox and the like on the page has an accessible name (the browser's
// accessibility tree, as a screen reader gets it).
async function unnamedControls(page) {
  const cdp = await page.context().newCDPSession(page);
  const { nodes } = await cdp.send('Accessibility.getFullAXTree');
  await cdp.detach();
  const roles = new Set(['button', 'link', 'textbox', 'combobox', 'checkbox', 'searchbox', 'spinbutton', 'table', 'dialog']);
  return nodes.filter((n) => !n.ignored && n.role && roles.has(n.role.value) && !(n.name && n.name.value.trim()))
    .map((n) => n.role.value);
}

async function waitFor(page, description, predicate, arg, timeout = 5000) {
  try {
    await page.waitForFunction(predicate, arg, { timeout, polling: 25 });
  } catch {
    throw new Failure(`${description} (not within ${timeout} ms); page: ${(await page.textContent('main')).slice(0, 600)}`);
  }
}

// Defined in every page (addInitScript below): a row of the view has a cell of each text.
function rowWithInPage() {
  window.rowWith = (texts) => [...document.querySelectorAll('main tbody tr')]
    .some((row) => texts.every((t) => [...row.cells].some((c) => c.textContent === t)));
}

// No cell, fact or event of the view shows a field the backend's answer lacked or had in another
// shape (a view assuming one backend's fields): "undefined", "NaN", "Invalid Date", "null".
async function checkNoBrokenFields(page, label) {
  const broken = await page.evaluate(() => [...document.querySelectorAll('main td, main dd, main li, main h1')]
    .map((node) => node.textContent).filter((text) => /undefined|NaN|Invalid Date|\bnull\b|\[object/.test(text)));
  check(broken.length === 0, `${label}: fields shown broken: ${JSON.stringify(broken)}`);
}

async function view(page, base, hash, name) {
  await page.goto(`${base}/ui/${hash}`);
  await page.waitForSelector('main h1');
  await page.waitForFunction(() => document.querySelector('main').hasAttribute('data-refreshed'), null, { timeout: 5000 });
  if (name) await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
}

// --- the cases ------------------------------------------------------------------------------

const cases = [];
const test = (name, body) => cases.push({ name, body });

test('headers_are_strict_and_there_is_no_cors', async ({ plain }) => {
  for (const file of ['', 'index.html', 'app.js', 'api.js', 'dom.js', 'views.js', 'events.js', 'time.js', 'console.css']) {
    const answer = await fetch(`${plain}/ui/${file}`, { headers: { Origin: 'http://evil.example' } });
    check(answer.status === 200, `/ui/${file}: ${answer.status}`);
    const policy = answer.headers.get('content-security-policy') || '';
    for (const part of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
      "frame-ancestors 'none'", "require-trusted-types-for 'script'"]) {
      check(policy.includes(part), `/ui/${file}: the CSP lacks ${part}: ${policy}`);
    }
    check(!policy.includes('unsafe'), `/ui/${file}: the CSP allows ${policy}`);
    check(answer.headers.get('x-content-type-options') === 'nosniff', `/ui/${file}: no nosniff`);
    check(!answer.headers.has('access-control-allow-origin'), `/ui/${file}: a CORS header`);
  }
  const locks = await api(plain, 'GET', '/v1/locks');
  check(!locks.headers.has('access-control-allow-origin'), '/v1/locks: a CORS header');
  const moved = await fetch(`${plain}/ui`, { redirect: 'manual' });
  check(moved.status === 301 && moved.headers.get('location') === '/ui/', `/ui: ${moved.status}`);
  // No file is inline script or style; none loads anything from elsewhere.
  for (const file of ['index.html']) {
    const html = await (await fetch(`${plain}/ui/${file}`)).text();
    check(!/<script(?![^>]*\bsrc=)/.test(html) && !/<style|style=|\son[a-z]+=/.test(html), `${file}: inline script or style`);
    check(!/https?:\/\//.test(html), `${file}: an absolute URL`);
  }
});

test('the_browser_enforces_the_policy', async ({ page, plain }) => {
  await view(page, plain, '#/overview');
  const ran = await page.evaluate(() => {
    try {
      const script = document.createElement('script');
      script.textContent = 'window.injected = 1';
      document.body.appendChild(script);
    } catch { /* Trusted Types refuse the string */ }
    try {
      document.body.insertAdjacentHTML('beforeend', '<p id="injected">x</p>');
    } catch { /* refused likewise */ }
    return { script: window.injected === 1, html: Boolean(document.getElementById('injected')) };
  });
  check(!ran.script, 'an injected inline script ran');
  check(!ran.html, 'a string was parsed as HTML');
});

test('each_view_shows_the_state', async ({ page, plain, state }) => {
  await view(page, plain, '#/overview');
  await waitFor(page, `overview: backend ${backend}, its health and counts`, (name) => {
    const fact = (title) => [...document.querySelectorAll('main dt')]
      .find((dt) => dt.textContent === title)?.nextElementSibling.textContent;
    return fact('Backend') === name && fact('Health') === 'ok' && fact('Lock-delays') === '1'
      && fact('Waiters (first 25 names)') === '1' && fact('Elections with a leader') === '2';
  }, backend);
  await page.screenshot({ path: join(screenshots, 'overview.png'), fullPage: true });
  await checkNoBrokenFields(page, 'overview');

  await view(page, plain, '#/locks');
  const token = String(state.payouts.fencing_token);
  await waitFor(page, 'locks: alice holds payouts/batch-17 with bob waiting',
    (t) => [...document.querySelectorAll('main tbody tr')].some((r) => r.cells[0].textContent === 'payouts/batch-17'
      && r.cells[2].textContent === 'alice' && r.cells[3].textContent === t && r.cells[1].textContent === 'exclusive'
      && r.cells[7].textContent === '1' && /\d+s|\dm/.test(r.cells[5].textContent)), token);
  await waitFor(page, 'locks: two shared holders of reports', () =>
    [...document.querySelectorAll('main tbody tr')].filter((r) => r.cells[0].textContent === 'reports'
      && r.cells[1].textContent === 'shared').length === 2);
  // The remaining time counts down.
  const remaining = () => page.evaluate(() => [...document.querySelectorAll('main tbody tr')]
    .find((r) => r.cells[0].textContent === 'doomed').cells[5].textContent);
  const before = await remaining();
  await waitFor(page, 'locks: the remaining time counts down', (b) => [...document.querySelectorAll('main tbody tr')]
    .find((r) => r.cells[0].textContent === 'doomed').cells[5].textContent !== b, before, 3000);
  await page.screenshot({ path: join(screenshots, 'locks.png'), fullPage: true });
  await checkNoBrokenFields(page, 'locks');

  await page.click('a:text-is("payouts/batch-17")');
  await waitFor(page, 'lock: its holder and its queue', () => rowWith(['alice', 'exclusive'])
    && [...document.querySelectorAll('main tbody tr')].some((r) => r.cells[0].textContent === '1'
      && r.cells[1].textContent === 'bob'));
  check(page.url().endsWith('#/lock/default/payouts%2Fbatch-17'), `lock URL ${page.url()}`);
  await page.screenshot({ path: join(screenshots, 'lock.png'), fullPage: true });
  await checkNoBrokenFields(page, 'lock');

  await view(page, plain, '#/sessions');
  await waitFor(page, 'sessions: alice and bob', (ids) => ids.every((id) =>
    [...document.querySelectorAll('main tbody tr')].some((r) => r.cells[0].textContent === id)),
  [state.sessions.alice, state.sessions.bob]);
  await page.screenshot({ path: join(screenshots, 'sessions.png'), fullPage: true });
  await checkNoBrokenFields(page, 'sessions');
  await page.click(`a:text-is("${state.sessions.alice}")`);
  await waitFor(page, 'session: what alice holds', () => rowWith(['default', 'payouts/batch-17', 'exclusive']));
  await view(page, plain, `#/session/${state.sessions.bob}`, null);
  await waitFor(page, 'session: what bob waits for', () => rowWith(['default', 'payouts/batch-17', '1']));
  await page.screenshot({ path: join(screenshots, 'session.png'), fullPage: true });
  await checkNoBrokenFields(page, 'session');

  await view(page, plain, '#/elections');
  await waitFor(page, 'elections: scheduler led by carol', () => rowWith(['scheduler', 'carol', '10.0.0.7:8080']));
  await page.screenshot({ path: join(screenshots, 'elections.png'), fullPage: true });
  await checkNoBrokenFields(page, 'elections');

  await view(page, plain, '#/semaphores');
  await waitFor(page, 'semaphores: workers, 2 of 3', () => rowWith(['workers', '2 of 3']));
  await page.screenshot({ path: join(screenshots, 'semaphores.png'), fullPage: true });
  await checkNoBrokenFields(page, 'semaphores');

  await view(page, plain, '#/delays');
  await waitFor(page, 'lock-delays: tape-drive', () => [...document.querySelectorAll('main tbody tr')]
    .some((r) => r.cells[0].textContent === 'tape-drive' && /\d/.test(r.cells[2].textContent)));
  await page.screenshot({ path: join(screenshots, 'delays.png'), fullPage: true });
  await checkNoBrokenFields(page, 'delays');

  // The event tail: a grant made while the page is open.
  await view(page, plain, '#/events');
  const sid = (await must(plain, 'POST', '/v1/sessions', { owner: 'erin' })).session_id;
  const grant = await must(plain, 'POST', '/v1/locks/nightly-report/acquire', { session_id: sid, ttl_ms: 60000 });
  await waitFor(page, 'events: the grant of nightly-report', () => [...document.querySelectorAll('main li')]
    .some((li) => li.textContent.includes('grant') && li.textContent.includes('nightly-report')
      && li.textContent.includes('owner erin')));
  // Its release, further on the same watch (the `next` of the grant's answer), shown once each.
  await must(plain, 'DELETE', `/v1/locks/nightly-report?session_id=${sid}&fencing_token=${grant.fencing_token}`);
  await waitFor(page, 'events: the release of nightly-report after its grant', (t) => {
    const lines = [...document.querySelectorAll('main li')].map((li) => li.textContent);
    const grants = lines.filter((l) => /\bgrant {2}nightly-report {2}/.test(l) && l.includes(`token ${t}`));
    const releases = lines.filter((l) => /\brelease {2}nightly-report {2}/.test(l) && l.includes(`token ${t}`));
    return grants.length === 1 && releases.length === 1 && lines.indexOf(releases[0]) < lines.indexOf(grants[0]);
  }, String(grant.fencing_token));
  console.log(`  event tail: ${await page.textContent('main p.muted')}`);
  await page.screenshot({ path: join(screenshots, 'events.png'), fullPage: true });
  await checkNoBrokenFields(page, 'events');
});

test('markup_in_keys_owners_and_values_renders_as_text', async ({ page, plain, dialogs, foreign }) => {
  for (const [hash, label, where] of [['#/locks', 'locks', [MARKUP, MARKUP]], ['#/elections', 'elections', ['leader-' + MARKUP, MARKUP]],
    [`#/lock/default/${enc(MARKUP)}`, 'lock', [MARKUP]], ['#/sessions', 'sessions', [MARKUP]], ['#/events', 'events', []]]) {
    await view(page, plain, hash);
    await waitFor(page, `${label}: the markup shown as text`, (texts) => texts.every((t) =>
      [...document.querySelectorAll('main td, main h1')].some((c) => c.textContent === t || c.textContent === `Lock ${t}`)), where);
    const images = await page.evaluate(() => document.querySelectorAll('img').length);
    check(images === 0, `${label}: ${images} <img> element(s) made from server strings`);
    const violations = await page.evaluate(() => window.cspViolations || []);
    check(violations.length === 0, `${label}: CSP violations ${JSON.stringify(violations)}`);
  }
  await view(page, plain, '#/locks', 'markup');
  check(dialogs.length === 0, `a dialog opened: ${dialogs.join(', ')}`);
  check(foreign.length === 0, `requests elsewhere: ${foreign.join(', ')}`);
});

test('keyboard_reaches_every_view_and_controls_are_labelled', async ({ page, plain }) => {
  await view(page, plain, '#/overview');
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement.id) === 'skip', 'the first Tab stop is not the skip link');
  const order = [];
  for (let i = 0; i < 7; i++) {
    await page.keyboard.press('Tab');
    order.push(await page.evaluate(() => document.activeElement.textContent));
  }
  check(order.join(',') === 'Overview,Locks,Sessions,Elections,Semaphores,Lock-delays,Events',
    `Tab order of the views: ${order.join(',')}`);
  for (let i = 0; i < 4; i++) await page.keyboard.press('Shift+Tab');  // back to Sessions
  await page.keyboard.press('Enter');  // on "Sessions"
  await waitFor(page, 'Enter on Sessions opens it with the focus on its heading', () =>
    location.hash === '#/sessions' && document.activeElement.tagName === 'H1'
      && document.activeElement.textContent === 'Sessions'
      && document.querySelector('nav a[aria-current="page"]').textContent === 'Sessions');
  for (const hash of ['#/overview', '#/locks', '#/sessions', '#/elections', '#/semaphores', '#/delays', '#/events',
    '#/lock/default/doomed']) {
    await view(page, plain, hash);
    const unnamed = await unnamedControls(page);
    check(unnamed.length === 0, `${hash}: controls without an accessible name: ${unnamed.join(', ')}`);
  }
  // The confirmation is a modal dialog: Escape cancels it and nothing is revoked.
  await page.focus('button:text-is("Revoke")');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog[open]');
  check(await page.evaluate(() => document.activeElement.id) === 'confirm-cancel', 'the dialog opens on Cancel');
  const unnamed = await unnamedControls(page);
  check(unnamed.length === 0, `the dialog: controls without an accessible name: ${unnamed.join(', ')}`);
  await page.keyboard.press('Escape');
  await page.waitForSelector('dialog[open]', { state: 'detached', timeout: 2000 }).catch(() => {});
  check(!(await page.evaluate(() => document.querySelector('dialog').open)), 'Escape did not close the dialog');
  const doomed = await api(plain, 'GET', '/v1/locks/doomed');
  check(doomed.status === 200, 'Escape revoked the lock');
});

test('a_release_shows_in_the_open_page_within_a_second', async ({ page, plain, state }) => {
  await view(page, plain, '#/locks');
  const token = String(state.payouts.fencing_token);
  await waitFor(page, 'locks: alice holds payouts/batch-17', (t) => rowWith(['payouts/batch-17', 'alice', t]), token);
  await sleep(Math.random() * 1000);  // anywhere in the refresh period
  const released = Date.now();
  await must(plain, 'DELETE', `/v1/locks/${enc('payouts/batch-17')}?session_id=${state.sessions.alice}&fencing_token=${token}`);
  await waitFor(page, 'locks: the release and the hand-over to bob', (t) => !rowWith(['payouts/batch-17', 'alice', t])
    && rowWith(['payouts/batch-17', 'bob']), token, 5000);
  const took = Date.now() - released;
  console.log(`  the release showed after ${took} ms`);
  check(took <= LIVE_BOUND_MS, `the release showed after ${took} ms (bound ${LIVE_BOUND_MS} ms)`);
  const granted = await state.waiting;
  check(granted.status === 200 && granted.body.fencing_token > state.payouts.fencing_token, 'bob was not granted');
});

test('an_admin_revokes_a_lock_and_clears_a_delay_after_confirming', async ({ page, plain, adminToken }) => {
  await view(page, plain, '#/lock/default/doomed');
  await page.waitForSelector('button:text-is("Revoke")');
  // Without the admin token the route says no, and the page says so.
  await page.click('button:text-is("Revoke")');
  await page.click('#confirm-ok');
  await waitFor(page, 'revoke without a token: refused', () => /401|403/.test(document.getElementById('status').textContent));
  await page.fill('#token', adminToken);
  await page.press('#token', 'Enter');
  check(await page.evaluate(() => sessionStorage.length === 1 && localStorage.length === 0), 'the token is not kept for the tab only');
  await page.click('button:text-is("Revoke")');
  await page.click('#confirm-cancel');
  check((await api(plain, 'GET', '/v1/locks/doomed')).status === 200, 'Cancel revoked the lock');
  await page.click('button:text-is("Revoke")');
  await page.screenshot({ path: join(screenshots, 'confirm.png'), fullPage: true });
  await page.click('#confirm-ok');
  await waitFor(page, 'revoked', () => document.getElementById('status').textContent.startsWith('Revoked "doomed"'));
  check((await api(plain, 'GET', '/v1/locks/doomed')).status === 404, 'the lock is still held');

  await view(page, plain, '#/delays');
  await page.click('button[aria-label="Clear lock-delay tape-drive"]');
  await page.click('#confirm-ok');
  await waitFor(page, 'the lock-delay cleared and gone from the list', () =>
    document.getElementById('status').textContent.startsWith('Cleared') && !rowWith(['tape-drive']));
  const listed = await api(plain, 'GET', '/v1/locks');
  check(!listed.body.delays.some((d) => d.key === 'tape-drive'), 'tape-drive is still delayed');
});

test('with_a_tokens_file_it_asks_for_a_token_and_shows_what_the_principal_may_see', async ({ page, auth }) => {
  await must(auth.base, 'POST', '/v1/locks/ledger/acquire?ns=team-a',
    { session_id: auth.aliceSession, ttl_ms: 60000 }, auth.tokens.alice);
  await page.goto(`${auth.base}/ui/#/locks`);
  await waitFor(page, 'without a token: asked for one', () =>
    document.getElementById('status').textContent.includes('needs a bearer token'));
  await page.screenshot({ path: join(screenshots, 'token.png'), fullPage: true });
  await page.fill('#token', auth.tokens.alice);
  await page.press('#token', 'Enter');
  await page.fill('#ns', 'team-a');
  await page.press('#ns', 'Enter');
  await waitFor(page, 'alice sees team-a', () => rowWith(['ledger', 'alice-app']));
  await page.fill('#ns', 'team-b');
  await page.press('#ns', 'Enter');
  await waitFor(page, 'alice may not read team-b', () =>
    document.getElementById('status').textContent.includes('403'));
  // The sessions she may see: her own, not the reader's.
  await page.goto(`${auth.base}/ui/#/sessions`);
  await waitFor(page, 'alice sees her session only', (ids) =>
    rowWith([ids.mine]) && !rowWith([ids.other]), { mine: auth.aliceSession, other: auth.readerSession });
  await page.fill('#token', auth.tokens.admin);
  await page.press('#token', 'Enter');
  await waitFor(page, 'the admin sees every session', (ids) => rowWith([ids.mine]) && rowWith([ids.other]),
    { mine: auth.aliceSession, other: auth.readerSession });
  await page.click('#forget-token');
  await waitFor(page, 'forgotten: asked again', () =>
    document.getElementById('status').textContent.includes('needs a bearer token'));
});

// --- running them -------------------------------------------------------------------------

const filter = process.env.DLOCK_TEST_FILTER ? new RegExp(process.env.DLOCK_TEST_FILTER) : null;
const selected = cases.filter((c) => !filter || filter.test(c.name));
if (selected.length === 0) {
  console.log('DLOCK_TEST_FILTER selected no test');
  process.exit(1);
}

let failed = 0;
let context = null;
let store = null;
const began = Date.now();
try {
  store = await startBackend();
  const adminToken = newToken();
  const tokens = { alice: newToken(), reader: newToken(), admin: newToken() };
  const tokensFile = join(scratch, 'tokens');
  writeFileSync(tokensFile, `alice ${sha256(tokens.alice)} lock:team-a\nreader ${sha256(tokens.reader)} read:*\n`);
  const [plain, authBase] = await Promise.all([
    startDlockd('plain', store.args.plain, ['--admin-enabled', 'true'], adminToken),
    startDlockd('auth', store.args.auth, ['--auth-tokens-file', tokensFile], tokens.admin)]);
  const state = await populate(plain, adminToken);
  const auth = { base: authBase, tokens };
  auth.aliceSession = (await must(authBase, 'POST', '/v1/sessions', { owner: 'alice-app', ttl_ms: 120000 }, tokens.alice)).session_id;
  auth.readerSession = (await must(authBase, 'POST', '/v1/sessions', { owner: 'reader-app', ttl_ms: 120000 }, tokens.reader, [201, 403]));
  auth.readerSession = auth.readerSession && auth.readerSession.session_id;
  if (!auth.readerSession) {  // reader may not open sessions (read only): the admin's second one stands in
    auth.readerSession = (await must(authBase, 'POST', '/v1/sessions', { owner: 'ops-app', ttl_ms: 120000 }, tokens.admin)).session_id;
  }

  context = await chromium.launchPersistentContext(join(scratch, 'profile'), {
    executablePath: browser,
    headless: true,
    viewport: { width: 1200, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  console.log(`set up: ${backend}, two dlockd, their state and chromium in ${Date.now() - began} ms`);
  for (const c of selected) {
    const page = await context.newPage();
    const dialogs = [];
    const foreign = [];
    const errors = [];
    page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('request', (r) => {
      if (!r.url().startsWith(plain) && !r.url().startsWith(authBase)) foreign.push(r.url());
      if (/\/ui\/x$/.test(r.url())) foreign.push(r.url());
    });
    await page.addInitScript(rowWithInPage);
    await page.addInitScript(() => {
      window.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective));
    });
    const started = Date.now();
    try {
      await c.body({ page, plain, state, adminToken, auth, dialogs, foreign });
      check(errors.length === 0, `errors in the page: ${errors.join('; ')}`);
      console.log(`ok   ${c.name} (${Date.now() - started} ms)`);
    } catch (error) {
      failed += 1;
      console.log(`FAIL ${c.name}: ${error instanceof Failure ? error.message : error.stack}`);
      await page.screenshot({ path: join(screenshots, `failed-${c.name}.png`), fullPage: true }).catch(() => {});
    }
    await page.close();
  }
} catch (error) {
  failed += 1;
  console.log(`FAIL setup: ${error.stack}`);
} finally {
  if (context) await context.close();
  // dlockd first (each drains and exits), then their backend.
  await Promise.all(children.map((child) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) { resolve(); return; }
    const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
    child.on('exit', () => { clearTimeout(timer); resolve(); });
    child.kill('SIGTERM');
  })));
  if (store) await store.stop();
  rmSync(scratch, { recursive: true, force: true });
}
console.log(`${backend}: ${selected.length - failed} of ${selected.length} passed in ${Date.now() - began} ms; screenshots in ${screenshots}`);
process.exit(failed ? 1 : 0);
