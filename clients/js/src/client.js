// Client: the entry point, shared by a process (the TypeScript peer of include/dlock/client.h).
import { Core, query, quote } from './core.js';
import { durationMs } from './lease.js';
import { Session } from './session.js';

const decodeLock = (o) => ({
  key: o.key ?? '', fencingToken: Number(o.fencing_token ?? 0), owner: o.owner ?? '',
  mode: o.mode ?? 'exclusive', lease: o.lease ?? 'ttl', acquiredAt: o.acquired_at ?? '',
  expiresAt: o.expires_at ?? '', sessionId: o.session_id, limit: o.limit, value: o.value,
});

const decodeLeader = (o, name) => ({
  name: o.name ?? name, owner: o.leader?.owner ?? '', value: o.leader?.value ?? '',
  fencingToken: Number(o.fencing_token ?? 0), acquiredAt: o.acquired_at ?? '',
  expiresAt: o.expires_at ?? '', sessionId: o.session_id,
});

/**
 * Talks to one or several dlockd sharing one backend; share one per process.
 *
 * Every option has an environment fallback, the same as the dlock CLI's: servers DLOCK_SERVER;
 * token DLOCK_TOKEN; tokenFile DLOCK_TOKEN_FILE; adminToken DLOCK_ADMIN_TOKEN; caFile
 * DLOCK_CACERT; certFile/keyFile DLOCK_CERT/DLOCK_KEY (mTLS); clockDrift DLOCK_CLOCK_DRIFT
 * (default 1 %); namespace DLOCK_NAMESPACE.
 */
export class Client {
  constructor(options = {}) {
    const ms = (name, fallback) => durationMs(options[name] ?? fallback, name);
    Object.defineProperty(this, 'core', {
      value: new Core({
        ...options,
        requestTimeoutMs: ms('requestTimeout', '10s'),
        retryBudgetMs: ms('retryBudget', '15s'),
        backoffInitialMs: ms('backoffInitial', '50ms'),
        backoffMaxMs: ms('backoffMax', '2s'),
      }),
    });
  }

  get servers() {
    return [...this.core.servers];
  }

  get clockDrift() {
    return this.core.clockDrift;
  }

  /** Closes idle connections (sessions are closed by their own close()). */
  close() {
    this.core.close();
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }

  /** Opens a session (keep-alive every TTL/3). */
  session(options = {}) {
    return Session.open(this, this.core, options);
  }

  /**
   * A lock in a session of its own, opened now and closed when the lock is released (or its
   * `await using` block ends). Throws Held when not granted within `wait`; takes the options of
   * Session.lock, and `sessionTtl` and `owner` for its session.
   */
  async lock(key, options = {}) {
    const session = await this.session({ ttl: options.sessionTtl, owner: options.owner,
      signal: options.signal });
    let lock;
    try {
      lock = await session.lock(key, options);
    } catch (error) {
      await session.close().catch(() => {});
      throw error;
    }
    lock.ownsSession = true;
    return lock;
  }

  // --- reads and admin ----------------------------------------------------------------------

  #lockPath(key, ns) {
    return `/v1/locks/${quote(key)}` + query({ ns: this.core.ns(ns) });
  }

  /** The holder with the greatest token, or null when the key is free. */
  async get(key, options = {}) {
    const o = await this.core.get(this.#lockPath(key, options.ns), `get ${key}`,
      this.core.callFor(undefined, { signal: options.signal }), 'lock_not_found');
    return o === null ? null : decodeLock(o);
  }

  /** Every live holder of `key` (several shared holders or permits), [] when free. */
  async holders(key, options = {}) {
    const o = await this.core.get(this.#lockPath(key, options.ns), `get ${key}`,
      this.core.callFor(undefined, { signal: options.signal }), 'lock_not_found');
    if (o === null) return [];
    return (Array.isArray(o.holders) ? o.holders : [o]).map(decodeLock);
  }

  async #listing(options) {
    const path = '/v1/locks' + query({ prefix: options.prefix, limit: options.limit ?? 100,
      ns: this.core.ns(options.ns) });
    return (await this.core.get(path, 'list', this.core.callFor(), '')) ?? {};
  }

  /** The live grants whose key starts with `prefix`, ordered by key. */
  async list(options = {}) {
    return ((await this.#listing(options)).locks ?? []).map(decodeLock);
  }

  /** The keys under `prefix` a lock-delay keeps ungranted, and when each delay ends. */
  async delays(options = {}) {
    return ((await this.#listing(options)).delays ?? [])
      .map((d) => ({ key: d.key ?? '', delayedUntil: d.delayed_until ?? '' }));
  }

  /** The semaphore's agreed limit (0 while no permit is held) and its permit holders. */
  async semaphore(name, options = {}) {
    const o = await this.core.get(`/v1/semaphores/${quote(name)}` +
      query({ ns: this.core.ns(options.ns) }), `get semaphore ${name}`, this.core.callFor(),
      '') ?? {};
    return { name: o.name ?? name, limit: Number(o.limit ?? 0),
      holders: (o.holders ?? []).map(decodeLock) };
  }

  /** The election's leader, or null when nobody leads. */
  leader(name, options = {}) {
    return this.observe(name, { ...options, afterToken: null, wait: 0 });
  }

  /**
   * One long poll: resolves once a leader with a token greater than `afterToken` leads (or, with
   * `afterValue`, that leader proclaims another value), at the latest after `wait` with the
   * state then. Pass the last answer's token and value to see each change once.
   */
  async observe(name, options = {}) {
    const waitMs = durationMs(options.wait ?? '30s', 'wait');
    const params = { ns: this.core.ns(options.ns) };
    const afterToken = options.afterToken === undefined ? 0 : options.afterToken;
    if (afterToken !== null) {
      params.after_token = afterToken;
      if (options.afterValue !== undefined) params.after_value = options.afterValue;
      if (waitMs > 0) params.wait_ms = waitMs;
    }
    const call = this.core.callFor(this.core.retryBudgetMs + waitMs,
      { signal: options.signal, slackMs: waitMs });
    const o = await this.core.get(`/v1/elections/${quote(name)}` + query(params),
      `observe ${name}`, call, 'no_leader');
    return o === null ? null : decodeLeader(o, name);
  }

  /**
   * Admin: ends the lock-delays running on `key`; whether one was running. Uses adminToken (or
   * DLOCK_ADMIN_TOKEN), else the token.
   */
  clearDelay(key, options = {}) {
    return this.core.clearDelay(key, options.ns, this.core.callFor());
  }

  /** Admin: ends the key's grant (adminToken or DLOCK_ADMIN_TOKEN, else the token). */
  revoke(key, options = {}) {
    return this.core.revoke(key, options.ns, this.core.callFor());
  }
}
