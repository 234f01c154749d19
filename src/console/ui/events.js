// The live event tail: what changed in the namespace, newest first.
//
// HOOK(watch): dlockd has no event stream yet, so the tail is derived by polling: once a second
// it lists the namespace's holders and lock-delays (GET /v1/locks) and reports what appeared and
// what went — a grant, a holder gone (released, expired or revoked: a list cannot tell which),
// a lock-delay begun or over. Changes that come and go within a second are not seen. When the
// watch route is served (GET /v1/watch, C3), replace `poll` below by its long poll: the events
// then carry their kind and nothing is missed. Nothing else in the console needs to change:
// views read `events`, `seq`, `capacity` and `describe()` only.

import { listLocks } from './views.js';

export class EventTail {
  constructor(capacity = 200) {
    this.capacity = capacity;
    this.events = [];  // {at, kind, text}, oldest first
    this.seq = 0;      // events ever added
    this.scopeKey = null;
    this.holders = null;
    this.delays = null;
  }

  describe() {
    return 'Derived by listing the namespace once a second: grants, holders gone (released, expired or '
      + 'revoked) and lock-delays. A change that comes and goes within a second is not shown.';
  }

  add(kind, text) {
    this.events.push({ at: new Date().toISOString(), kind, text });
    this.seq += 1;
    if (this.events.length > this.capacity) this.events.shift();
  }

  async poll(scope) {
    const scopeKey = `${scope.ns}\u0000${scope.prefix}`;
    const { locks, delays } = await listLocks(scope);
    const holders = new Map(locks.map((l) => [`${l.key}\u0000${l.fencing_token}`, l]));
    const delayed = new Map(delays.map((d) => [d.key, d]));
    if (this.scopeKey !== scopeKey) {
      // A new namespace or prefix: its present state is the baseline, not a burst of events.
      this.scopeKey = scopeKey;
      this.add('scope', `watching namespace ${scope.ns}${scope.prefix ? `, keys starting "${scope.prefix}"` : ''}`);
    } else {
      for (const [id, l] of holders) {
        if (!this.holders.has(id)) {
          this.add('grant', `grant  ${l.key}  token ${l.fencing_token}  ${l.mode}  owner ${l.owner}`
            + ('value' in l ? `  value ${l.value}` : ''));
        }
      }
      for (const [id, l] of this.holders) {
        if (!holders.has(id)) this.add('gone', `gone   ${l.key}  token ${l.fencing_token}  owner ${l.owner}`);
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
