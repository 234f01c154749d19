// The console's views (docs/console.md). Each is an object with `node` (its part of the page) and
// `refresh(scope)` (re-reads the API and updates the page in place), called once a second.

import { allPages, get, path, post } from './api.js';
import { el, facts, link, LiveTable, setCell } from './dom.js';
import { clock, duration, since, until } from './time.js';

// How many keys of a list the Locks and Semaphores views read one by one for their waiters
// (the list does not carry them, C3), each refresh.
const WAITER_READS = 25;

export const lockHref = (ns, key) => `#/lock/${encodeURIComponent(ns)}/${encodeURIComponent(key)}`;
const sessionHref = (id) => `#/session/${encodeURIComponent(id)}`;

function heading(text) {
  return el('h1', { tabindex: '-1' }, text);
}

// The namespace's holders and lock-delays under the prefix (GET /v1/locks), at most 1000.
export async function listLocks(scope) {
  const { body } = await get(path(['v1', 'locks'], { ns: scope.ns, prefix: scope.prefix, limit: 1000 }));
  return { locks: body.locks || [], delays: body.delays || [] };
}

// The waiters of up to WAITER_READS of these keys: Map key -> number (GET /v1/locks/{key}).
async function waiterCounts(scope, keys) {
  const counts = new Map();
  await Promise.all([...keys].slice(0, WAITER_READS).map(async (key) => {
    const { status, body } = await get(path(['v1', 'locks', key], { ns: scope.ns }), { allow: [404] });
    counts.set(key, status === 200 ? (body.waiters || []).length : 0);
  }));
  return counts;
}

// One confirmed admin action (C3: revoke, clear-delay); reports through `say`.
export async function adminAction(app, action, ns, key) {
  const revoke = action === 'revoke';
  const ok = await app.confirm(
    revoke ? 'Revoke this lock?' : 'Clear this lock-delay?',
    revoke ? `Every holder of "${key}" in namespace "${ns}" loses it now; its waiters are tried.`
      : `"${key}" in namespace "${ns}" may be granted at once.`,
    revoke ? 'Revoke' : 'Clear lock-delay');
  if (!ok) return;
  try {
    const { body } = await post(path(['v1', 'admin', 'locks', key, revoke ? 'revoke' : 'clear-delay'], { ns }));
    app.say(revoke ? (body.revoked ? `Revoked "${key}" (token ${body.fencing_token}).` : `"${key}" had no holder.`)
      : (body.cleared ? `Cleared the lock-delay of "${key}".` : `"${key}" had no lock-delay.`));
  } catch (error) {
    app.fail(error);
  }
}

function actionButton(app, action, ns, key) {
  const label = action === 'revoke' ? 'Revoke' : 'Clear lock-delay';
  const button = el('button', { type: 'button', class: 'danger', 'aria-label': `${label} ${key}` }, label);
  button.addEventListener('click', () => adminAction(app, action, ns, key));
  return button;
}

export class Overview {
  constructor() {
    this.values = new Map();
    const names = ['Backend', 'Health', 'Ready', 'Version', 'Uptime', 'Namespace', 'Held names',
      'Holders', 'Elections with a leader', 'Semaphores in use', 'Lock-delays', 'Waiters (first 25 names)',
      'Sessions you may see'];
    for (const name of names) this.values.set(name, el('dd'));
    this.node = el('section', {}, heading('Overview'),
      el('dl', { class: 'facts' }, names.map((name) => [el('dt', {}, name), this.values.get(name)])));
  }

  set(name, value) {
    setCell(this.values.get(name), value);
  }

  async refresh(scope) {
    const [health, ready, listed, sessions] = await Promise.all([
      get('/healthz'), get('/readyz', { allow: [503] }), listLocks(scope),
      allPages(['v1', 'sessions'], {}, 'sessions')]);
    const keys = new Set(listed.locks.map((lock) => lock.key));
    const waiters = await waiterCounts(scope, keys);
    this.set('Backend', health.body.backend);
    const healthy = health.body.status === 'ok';
    this.set('Health', el('span', { class: healthy ? 'health-ok' : 'health-bad' }, health.body.status));
    this.set('Ready', ready.status === 200 ? 'ready' : 'not ready (draining)');
    this.set('Version', health.body.version || 'not reported by this dlockd');
    this.set('Uptime', health.body.uptime_s !== undefined ? duration(health.body.uptime_s * 1000)
      : 'not reported by this dlockd');
    this.set('Namespace', scope.prefix ? `${scope.ns}, keys starting "${scope.prefix}"` : scope.ns);
    this.set('Held names', String(keys.size));
    this.set('Holders', String(listed.locks.length));
    this.set('Elections with a leader', String(listed.locks.filter((l) => 'value' in l).length));
    this.set('Semaphores in use', String(new Set(listed.locks.filter((l) => l.mode === 'permit').map((l) => l.key)).size));
    this.set('Lock-delays', String(listed.delays.length));
    this.set('Waiters (first 25 names)', String([...waiters.values()].reduce((a, b) => a + b, 0)));
    this.set('Sessions you may see', sessions.more ? `${sessions.items.length}+` : String(sessions.items.length));
  }
}

export class Locks {
  constructor() {
    this.table = new LiveTable('Holders, by key', [
      { title: 'Key' }, { title: 'Mode' }, { title: 'Owner' }, { title: 'Token', numeric: true },
      { title: 'Age', numeric: true }, { title: 'Remaining', numeric: true }, { title: 'Lease' },
      { title: 'Waiters', numeric: true }], 'Nobody holds a lock here.');
    this.node = el('section', {}, heading('Locks'), this.table.node);
  }

  async refresh(scope) {
    const { locks } = await listLocks(scope);
    const waiters = await waiterCounts(scope, new Set(locks.map((lock) => lock.key)));
    const now = Date.now();
    this.table.update(locks.map((lock) => ({
      key: `${lock.key}\u0000${lock.fencing_token}`,
      cells: [link(lockHref(scope.ns, lock.key), lock.key), lock.mode, lock.owner, String(lock.fencing_token),
        since(lock.acquired_at, now), until(lock.expires_at, now), lock.lease,
        waiters.has(lock.key) ? String(waiters.get(lock.key)) : '—'],
    })));
  }
}

export class Lock {
  constructor(app, ns, key) {
    Object.assign(this, { app, ns, key });
    this.summary = el('div');
    this.holders = new LiveTable('Holders, by token', [
      { title: 'Token', numeric: true }, { title: 'Mode' }, { title: 'Owner' }, { title: 'Value' },
      { title: 'Session' }, { title: 'Acquired' }, { title: 'Remaining', numeric: true }], 'Nobody holds it.');
    this.waiters = new LiveTable('Queue on this dlockd, head first', [
      { title: 'Position', numeric: true }, { title: 'Owner' }, { title: 'Mode' },
      { title: 'Waiting', numeric: true }, { title: 'Session' }], 'Nobody waits for it here.');
    this.actions = el('p', { class: 'actions' });
    this.revoke = actionButton(app, 'revoke', ns, key);
    this.clear = actionButton(app, 'clear-delay', ns, key);
    this.node = el('section', {}, heading(`Lock ${key}`), this.summary, this.actions,
      el('h2', {}, 'Holders'), this.holders.node, el('h2', {}, 'Waiters'), this.waiters.node);
  }

  async refresh() {
    const { status, body } = await get(path(['v1', 'locks', this.key], { ns: this.ns }), { allow: [404] });
    const now = Date.now();
    const held = status === 200;
    const delayed = !held && body.error && body.error.delayed_until;
    const state = held ? `held (${body.holders.length} holder${body.holders.length === 1 ? '' : 's'})`
      : delayed ? `free, but a lock-delay keeps it until ${clock(delayed)} (${until(delayed, now)} left)` : 'free';
    const summary = facts([['Namespace', this.ns], ['Key', this.key], ['State', state]]);
    if (this.summary.textContent !== summary.textContent) this.summary.replaceChildren(summary);
    const wanted = [held ? this.revoke : null, delayed ? this.clear : null].filter(Boolean);
    if (wanted.length !== this.actions.children.length || wanted.some((b, i) => this.actions.children[i] !== b)) {
      this.actions.replaceChildren(...wanted);
    }
    this.holders.update((held ? body.holders : []).map((h) => ({
      key: String(h.fencing_token),
      cells: [String(h.fencing_token), h.mode + (h.limit ? ` (limit ${h.limit})` : ''), h.owner,
        h.value === undefined ? '' : h.value, h.session_id ? link(sessionHref(h.session_id), h.session_id) : 'hidden',
        clock(h.acquired_at), until(h.expires_at, now)],
    })));
    this.waiters.update((held ? body.waiters || [] : []).map((w) => ({
      key: `${w.position}\u0000${w.owner}\u0000${w.session_id || ''}`,
      cells: [String(w.position), w.owner, w.mode + (w.limit ? ` (limit ${w.limit})` : ''),
        duration(w.waiting_ms), w.session_id ? link(sessionHref(w.session_id), w.session_id) : 'hidden'],
    })));
  }
}

export class Sessions {
  constructor() {
    this.table = new LiveTable('Live sessions you may see, by ID', [
      { title: 'Session' }, { title: 'Owner' }, { title: 'Principal' }, { title: 'TTL', numeric: true },
      { title: 'Lock-delay', numeric: true }, { title: 'Expires in', numeric: true }], 'No live session.');
    this.node = el('section', {}, heading('Sessions'), this.table.node);
  }

  async refresh() {
    const { items, more } = await allPages(['v1', 'sessions'], {}, 'sessions');
    const now = Date.now();
    this.table.update(items.map((s) => ({
      key: s.session_id,
      cells: [link(sessionHref(s.session_id), s.session_id), s.owner, s.principal || '',
        duration(s.ttl_ms), duration(s.lock_delay_ms), until(s.expires_at, now)],
    })));
    if (more) this.table.note.textContent = 'The first 1000 sessions are shown.';
  }
}

export class Session {
  constructor(id) {
    this.id = id;
    this.summary = el('div');
    this.holds = new LiveTable('What it holds, every namespace', [
      { title: 'Namespace' }, { title: 'Key' }, { title: 'Mode' }, { title: 'Token', numeric: true },
      { title: 'Remaining', numeric: true }], 'It holds nothing.');
    this.waits = new LiveTable('What it waits for on this dlockd', [
      { title: 'Namespace' }, { title: 'Key' }, { title: 'Mode' }, { title: 'Position', numeric: true },
      { title: 'Waiting', numeric: true }], 'It waits for nothing here.');
    this.node = el('section', {}, heading(`Session ${id}`), this.summary,
      el('h2', {}, 'Holds'), this.holds.node, el('h2', {}, 'Waits'), this.waits.node);
  }

  async refresh() {
    const { status, body } = await get(path(['v1', 'sessions', this.id]), { allow: [404] });
    const now = Date.now();
    const summary = status === 200 ? facts([['Owner', body.owner], ['Principal', body.principal || ''],
      ['TTL', duration(body.ttl_ms)], ['Lock-delay', duration(body.lock_delay_ms)],
      ['Expires in', until(body.expires_at, now)]]) : el('p', {}, 'This session is closed, expired or not yours.');
    if (this.summary.textContent !== summary.textContent) this.summary.replaceChildren(summary);
    const live = status === 200;
    this.holds.update((live ? body.holds : []).map((h) => ({
      key: `${h.ns}\u0000${h.key}\u0000${h.fencing_token}`,
      cells: [h.ns, link(lockHref(h.ns, h.key), h.key), h.mode, String(h.fencing_token), until(h.expires_at, now)],
    })));
    this.waits.update((live ? body.waits : []).map((w) => ({
      key: `${w.ns}\u0000${w.key}`,
      cells: [w.ns, link(lockHref(w.ns, w.key), w.key), w.mode, String(w.position), duration(w.waiting_ms)],
    })));
  }
}

export class Elections {
  constructor() {
    this.table = new LiveTable('Leaders, by name', [
      { title: 'Name' }, { title: 'Leader' }, { title: 'Value' }, { title: 'Token', numeric: true },
      { title: 'Leads since' }, { title: 'For', numeric: true }, { title: 'Campaigners waiting', numeric: true }],
    'No election has a leader here.');
    this.node = el('section', {}, heading('Elections'), this.table.node,
      el('p', { class: 'muted' }, 'Observers (long polls of GET /v1/elections/{name}) are not reported by the API.'));
  }

  async refresh(scope) {
    const leaders = (await listLocks(scope)).locks.filter((lock) => 'value' in lock);
    const waiters = await waiterCounts(scope, new Set(leaders.map((l) => l.key)));
    const now = Date.now();
    this.table.update(leaders.map((l) => ({
      key: l.key,
      cells: [link(lockHref(scope.ns, l.key), l.key), l.owner, l.value, String(l.fencing_token),
        clock(l.acquired_at), since(l.acquired_at, now), waiters.has(l.key) ? String(waiters.get(l.key)) : '—'],
    })));
  }
}

export class Semaphores {
  constructor() {
    this.table = new LiveTable('Semaphores with a permit held, by name', [
      { title: 'Name' }, { title: 'Permits used', numeric: true }, { title: 'Holders' },
      { title: 'Waiting', numeric: true }], 'No semaphore permit is held here.');
    this.node = el('section', {}, heading('Semaphores'), this.table.node);
  }

  async refresh(scope) {
    const byName = new Map();
    for (const lock of (await listLocks(scope)).locks) {
      if (lock.mode !== 'permit') continue;
      if (!byName.has(lock.key)) byName.set(lock.key, []);
      byName.get(lock.key).push(lock);
    }
    const waiters = await waiterCounts(scope, new Set(byName.keys()));
    this.table.update([...byName].map(([name, holders]) => ({
      key: name,
      cells: [link(lockHref(scope.ns, name), name), `${holders.length} of ${holders[0].limit}`,
        holders.map((h) => `${h.owner} (token ${h.fencing_token})`).join(', '),
        waiters.has(name) ? String(waiters.get(name)) : '—'],
    })));
  }
}

export class Delays {
  constructor(app) {
    this.app = app;
    this.table = new LiveTable('Names a lock-delay keeps, by key', [
      { title: 'Key' }, { title: 'Delayed until' }, { title: 'Remaining', numeric: true }, { title: 'Action' }],
    'No lock-delay is running here.');
    this.buttons = new Map();
    this.node = el('section', {}, heading('Lock-delays'), this.table.node);
  }

  async refresh(scope) {
    const { delays } = await listLocks(scope);
    const now = Date.now();
    this.table.update(delays.map((d) => {
      const id = `${scope.ns}\u0000${d.key}`;
      if (!this.buttons.has(id)) this.buttons.set(id, actionButton(this.app, 'clear-delay', scope.ns, d.key));
      return { key: id, cells: [link(lockHref(scope.ns, d.key), d.key), clock(d.delayed_until),
        until(d.delayed_until, now), this.buttons.get(id)] };
    }));
  }
}

export class Events {
  constructor(tail) {
    this.tail = tail;
    this.list = el('ol', { class: 'events', role: 'log', 'aria-label': 'Events, newest first' });
    this.source = el('p', { class: 'muted' });
    this.node = el('section', {}, heading('Events'), this.source, this.list);
    this.shown = 0;
  }

  async refresh() {
    setCell(this.source, this.tail.describe());
    const events = this.tail.events;
    if (events.length === 0 && this.shown === 0) {
      this.list.replaceChildren(el('li', { class: 'muted' }, 'No event yet.'));
      return;
    }
    if (this.shown === 0) this.list.replaceChildren();
    const fresh = this.tail.seq - this.shown;
    for (const event of events.slice(Math.max(0, events.length - fresh))) {
      this.list.prepend(el('li', { 'data-kind': event.kind }, `${clock(event.at)}  ${event.text}`));
    }
    while (this.list.children.length > this.tail.capacity) this.list.lastChild.remove();
    this.shown = this.tail.seq;
  }
}
