// The live event tail: what changed in the namespace, newest first, from one of two sources.
//
// - The watch stream (GET /v1/watch, C3 "Watch"), when this dlockd serves it: a long poll of the
//   namespace's events under the key prefix, each once and with its kind (grant, release,
//   expire, revoke, waiter_joined, waiter_left; `reset` after a gap) — of the operations this
//   dlockd served.
// - Otherwise (a dlockd without the route answers 404), derived by listing the namespace once a
//   second (GET /v1/locks) and reporting what appeared and what went: a grant, a holder gone
//   (released, expired or revoked: a list cannot tell which), a lock-delay begun or over. A
//   change that comes and goes within a second is not seen.
//
// Which one is used is probed once, at the first poll. Views read `events`, `seq`, `capacity`
// and `describe()` only.

import { get } from './api.js';
import { listLocks } from './views.js';

const WATCH_WAIT_MS = 20000;

// /v1/watch with its parameters; `prefix` is sent even when empty (it selects the whole namespace).
function watchTarget(scope, extra = {}) {
  return '/v1/watch?' + new URLSearchParams({ ns: scope.ns, prefix: scope.prefix, ...extra }).toString();
}

export class EventTail {
  constructor(capacity = 200) {
    this.capacity = capacity;
    this.events = [];  // {at, kind, text}, oldest first
    this.seq = 0;      // events ever added
    this.source = null;  // 'watch' or 'list', once probed
    this.scopeKey = null;
    this.holders = null;
    this.delays = null;
  }

  describe() {
    if (this.source === 'watch') {
      return 'From the watch stream of this dlockd: every grant, release, expiry, revoke and waiter '
        + 'of the operations it served, once each.';
    }
    return 'Derived by listing the namespace once a second: grants, holders gone (released, expired or '
      + 'revoked) and lock-delays. A change that comes and goes within a second is not shown.';
  }

  // `at`: the event's time when its source says (the watch: the backend's clock), else now.
  add(kind, text, at = new Date().toISOString()) {
    this.events.push({ at, kind, text });
    this.seq += 1;
    if (this.events.length > this.capacity) this.events.shift();
  }

  scopeChanged(scope) {
    const scopeKey = `${scope.ns}\u0000${scope.prefix}`;
    if (this.scopeKey === scopeKey) return false;
    this.scopeKey = scopeKey;
    this.add('scope', `watching namespace ${scope.ns}${scope.prefix ? `, keys starting "${scope.prefix}"` : ''}`);
    return true;
  }

  // Called with every refresh of the page (once a second).
  async poll(scope) {
    if (this.source === null) {
      const probe = await get(watchTarget(scope), { allow: [404] });
      this.source = probe.status === 200 && Array.isArray(probe.body.events) ? 'watch' : 'list';
    }
    if (this.source === 'watch') {
      if (this.scopeChanged(scope)) this.follow(scope, this.scopeKey);
      return;
    }
    await this.compareLists(scope);
  }

  // The long poll of one scope, until the scope changes.
  async follow(scope, scopeKey) {
    let next = null;
    while (this.scopeKey === scopeKey) {
      try {
        const { body } = await get(watchTarget(scope, next === null ? {} : { after: next, wait_ms: WATCH_WAIT_MS }));
        if (this.scopeKey !== scopeKey) return;
        if (next !== null) for (const event of body.events) this.add(event.kind, describeEvent(event), event.at);
        next = body.next;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 1000));  // the refresh reports the error
      }
    }
  }

  async compareLists(scope) {
    const { locks, delays } = await listLocks(scope);
    const holders = new Map(locks.map((l) => [`${l.key}\u0000${l.fencing_token}`, l]));
    const delayed = new Map(delays.map((d) => [d.key, d]));
    // A new namespace or prefix: its present state is the baseline, not a burst of events.
    if (!this.scopeChanged(scope)) {
      for (const [id, l] of holders) {
        if (!this.holders.has(id)) {
          this.add('grant', `grant  ${l.key}  token ${l.fencing_token}  ${l.mode}  owner ${l.owner}`
            + ('value' in l ? `  value ${l.value}` : ''));
        }
      }
      for (const [id, l] of this.holders) {
        if (!holders.has(id)) this.add('gone', `gone  ${l.key}  token ${l.fencing_token}  owner ${l.owner}`);
      }
      for (const [key, d] of delayed) {
        if (!this.delays.has(key)) this.add('delay', `lock-delay  ${key}  until ${d.delayed_until}`);
      }
      for (const key of this.delays.keys()) {
        if (!delayed.has(key)) this.add('delay-over', `lock-delay over  ${key}`);
      }
    }
    this.holders = holders;
    this.delays = delayed;
  }
}

// One watch event as a line: `grant  KEY  token T  MODE  owner O`, and so on.
function describeEvent(event) {
  if (event.kind === 'reset') return `reset  (${event.reason || 'a gap'}: events may be missing; the views show the state)`;
  return [event.kind, event.key,
    event.fencing_token !== undefined ? `token ${event.fencing_token}` : null,
    event.mode || null,
    event.owner !== undefined ? `owner ${event.owner}` : null,
    event.reason ? `(${event.reason})` : null].filter((part) => part !== null).join('  ');
}
