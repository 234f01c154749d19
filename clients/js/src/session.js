// Session, Lock and Leadership: the grants a client holds, their keep-alive and extend loops,
// their client deadlines and lost signals.
import os from 'node:os';
import * as errors from './errors.js';
import { durationMs, leaseDeadline, trustedTtlMs } from './lease.js';
import { now, sleep } from './core.js';

// Node 20 has both symbols; older runtimes and bundlers may not: `await using` compiled by tsc
// looks them up at run time.
Symbol.asyncDispose ??= Symbol.for('Symbol.asyncDispose');
Symbol.dispose ??= Symbol.for('Symbol.dispose');

const MODES = ['exclusive', 'shared', 'permit'];

/** DLOCK_OWNER, else `<user>@<hostname>`: the owner shown by reads for this process. */
export function defaultOwner() {
  if (process.env.DLOCK_OWNER) return process.env.DLOCK_OWNER;
  let user;
  try {
    user = os.userInfo().username;
  } catch {
    user = 'dlock';
  }
  const host = os.hostname();
  return host ? `${user}@${host}` : user;
}

/**
 * The first loss wins: records its reason, aborts the signal (its reason a LockLost), calls the
 * callback once.
 */
class LossFlag {
  constructor(callback) {
    this.controller = new AbortController();
    this.reason = '';
    this.callback = callback;
  }

  get lost() {
    return this.controller.signal.aborted;
  }

  mark(reason, what) {
    if (this.lost) return false;
    this.reason = reason;
    this.controller.abort(new errors.LockLost(`${what}: ${reason}`));
    if (this.callback) {
      try {
        this.callback(reason);
      } catch (error) {
        process.emitWarning(`dlock: onLost callback failed: ${error}`);
      }
    }
    return true;
  }
}

/** What sessions and locks share: the lost signal, its reason, and the loss recorded once. */
class Trusted {
  #loss;

  constructor(onLost) {
    this.#loss = new LossFlag(onLost);
  }

  /** Aborts once lost or no longer trusted (its reason a LockLost). */
  get signal() {
    return this.#loss.controller.signal;
  }

  get lost() {
    return this.#loss.lost;
  }

  get lostReason() {
    return this.#loss.reason;
  }

  /** @internal Records the loss (the first wins); whether this call recorded it. */
  flagLost(reason, what) {
    return this.#loss.mark(reason, what);
  }

  /**
   * @internal Renews the lease until `stop` aborts or it is lost: waits until `nextAt`, then
   * `renew(call)` (the call bounded by `deadline()`) resolves to the next renewal's time.
   * `settle(error)` takes a final answer from the server (true: stop); another failure is
   * retried after a short pause until the deadline has passed, then `expire(error)`.
   */
  async renewEvery(core, stop, nextAt, deadline, renew, settle, expire) {
    for (;;) {
      try {
        await sleep(nextAt - now(), stop, 'renew', true);
      } catch {
        return; // closed, released or lost
      }
      if (this.lost) return;
      const until = deadline();
      try {
        // `stop` also cancels a renewal in flight: closing need not wait out a slow server.
        nextAt = await renew({ deadline: until, repeatSafe: true, slackMs: 0, signal: stop });
      } catch (error) {
        if (stop.aborted || settle(error)) return;
        if (!(error instanceof errors.DlockError)) throw error;
        if (now() >= until) {
          expire(error);
          return;
        }
        nextAt = Math.min(until, now() + core.backoffInitialMs);
      }
    }
  }
}

const MAX_TIMER_MS = 2 ** 31 - 1; // setTimeout's longest delay

/**
 * Calls `fn` once performance.now() has reached `at` (never before: a timer that fires early, or
 * a delay beyond setTimeout's range, is armed again), without keeping the process alive.
 * `cancelTimer` stops it.
 */
function timerAt(at, fn) {
  const timer = {};
  const arm = (first) => {
    const left = at - now();
    if (left <= 0 && !first) {
      fn();
      return;
    }
    timer.handle = setTimeout(arm, Math.min(Math.max(0, Math.ceil(left)), MAX_TIMER_MS), false);
    timer.handle.unref();
  };
  arm(true);
  return timer;
}

const cancelTimer = (timer) => clearTimeout(timer?.handle);

/**
 * A dlockd session kept alive every TTL/3. `signal` aborts (and `onLost(reason)` is called once)
 * when the server no longer has the session or its deadline passed without a successful
 * keepalive; every lock of the session is lost with it. Open it with `client.session()`.
 */
export class Session extends Trusted {
  #core;
  #deadline;
  #stop = new AbortController();
  #watchdog;
  /** @internal */ locks = new Set();
  /** @internal */ closed = false;
  /** @internal */ gone = false; // the server said it does not exist: nothing to close

  /** @internal */
  constructor(client, core, answer, sentAt, askedTtlMs, onLost) {
    super(onLost);
    this.client = client;
    this.#core = core;
    this.id = answer.session_id;
    this.owner = answer.owner ?? '';
    this.ttlMs = trustedTtlMs(askedTtlMs, Number(answer.ttl_ms) || 0);
    if (!(this.ttlMs > 0)) throw new errors.Internal('open session: the server granted no ttl_ms');
    /** The lock-delay the server granted, in milliseconds (0 from a dlockd without it). */
    this.lockDelayMs = Number(answer.lock_delay_ms) || 0;
    this.#setDeadline(leaseDeadline(sentAt, this.ttlMs, core.clockDrift));
    this.#keepaliveLoop(sentAt).catch((error) => this.markLost(`keep-alive failed: ${error}`));
  }

  /** @internal */
  static async open(client, core, options = {}) {
    const ttlMs = durationMs(options.ttl, 'ttl');
    const lockDelayMs = durationMs(options.lockDelay, 'lockDelay');
    const owner = options.owner || defaultOwner();
    const { answer, sentAt } = await core.openSession(owner, ttlMs, lockDelayMs,
      core.callFor(undefined, { signal: options.signal }));
    answer.owner ??= owner;
    return new Session(client, core, answer, sentAt, ttlMs, options.onLost);
  }

  /** performance.now() time until which the session is trusted (-Infinity once lost). */
  get deadline() {
    return this.lost ? -Infinity : this.#deadline;
  }

  get valid() {
    return !this.closed && now() < this.deadline;
  }

  #setDeadline(deadline) {
    this.#deadline = deadline;
    cancelTimer(this.#watchdog);
    if (!this.closed) {
      this.#watchdog = timerAt(deadline, () => {
        if (now() >= this.#deadline && !this.closed) {
          this.markLost('no successful keepalive within the session TTL');
        }
      });
    }
  }

  /** @internal */
  markLost(reason) {
    if (this.flagLost(reason, `session ${this.id}`)) {
      cancelTimer(this.#watchdog);
      for (const lock of this.locks) lock.markLost(`session lost: ${reason}`);
    }
  }

  #keepaliveLoop(sentAt) {
    const core = this.#core;
    return this.renewEvery(core, this.#stop.signal, sentAt + this.ttlMs / 3, () => this.#deadline,
      async (call) => {
        const { answer, sentAt: sent } = await core.keepalive(this.id, call);
        // A keepalive renews for the session's TTL: never trust more than it opened with.
        const ttlMs = trustedTtlMs(this.ttlMs, Number(answer.ttl_ms) || 0);
        if (!this.lost) this.#setDeadline(leaseDeadline(sent, ttlMs, core.clockDrift));
        return sent + ttlMs / 3;
      },
      (error) => {
        if (!(error instanceof errors.SessionNotFound)) return false;
        this.gone = true;
        this.markLost(`session expired on the server: ${error.message}`);
        return true;
      },
      (error) => this.markLost(`no successful keepalive within the session TTL: ${error.message}`));
  }

  /** Stops the keep-alive and closes the session on the server (releasing its locks). */
  async close() {
    if (this.closed) return;
    this.closed = true;
    this.#stop.abort();
    cancelTimer(this.#watchdog);
    for (const lock of this.locks) lock.stopLoops();
    if (this.gone) return;
    try {
      // Short: closing is a courtesy (the session expires by itself).
      await this.#core.closeSession(this.id, this.#core.callFor(this.#core.requestTimeoutMs));
    } catch (error) {
      if (!(error instanceof errors.SessionNotFound)) throw error;
    }
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }

  /**
   * Acquires `key`; resolves to the Lock, or null when it is still held after `wait`.
   * Options: ttl, wait, ns, autoExtend (default true), mode, permits, sessionBound, signal,
   * onLost (see lock()).
   */
  async acquire(key, options = {}) {
    try {
      return await this.lock(key, options);
    } catch (error) {
      if (error instanceof errors.Held) return null;
      throw error;
    }
  }

  /** Acquires `key`; throws Held when it is still held after `wait`. */
  async lock(key, options = {}) {
    let mode = options.mode ?? 'exclusive';
    const permits = options.permits ?? 0;
    if (!MODES.includes(mode)) {
      throw new errors.InvalidArgument(`acquire ${key}: mode ${JSON.stringify(mode)}`,
        { field: 'mode' });
    }
    if (permits) {
      if (mode === 'shared') {
        throw new errors.InvalidArgument(`acquire ${key}: a shared hold and a semaphore permit ` +
          'exclude each other', { field: 'mode' });
      }
      mode = 'permit';
    } else if (mode === 'permit') {
      throw new errors.InvalidArgument(`acquire ${key}: a permit needs permits: N`,
        { field: 'limit' });
    }
    const ttlMs = durationMs(options.ttl, 'ttl');
    const sessionBound = Boolean(options.sessionBound);
    if (sessionBound && ttlMs) {
      throw new errors.InvalidArgument('a session-bound lock has no TTL of its own',
        { field: 'ttl_ms' });
    }
    const waitMs = durationMs(options.wait, 'wait');
    const core = this.#core;
    const call = core.callFor(core.retryBudgetMs + waitMs, { signal: options.signal });
    const { answer, sentAt } = await core.acquire(key, this.id,
      { ttlMs, sessionBound, waitMs, ns: options.ns, mode, limit: permits }, call);
    return new Lock(this, core, key, options.ns, answer, sentAt, mode,
      options.autoExtend ?? true, options.onLost);
  }

  /**
   * Campaigns to lead the election `name` with `value`; null when another session still leads
   * after `wait`. A leadership lives exactly as long as the session.
   */
  async campaign(name, value, options = {}) {
    const waitMs = durationMs(options.wait, 'wait');
    const core = this.#core;
    const call = core.callFor(core.retryBudgetMs + waitMs, { signal: options.signal });
    let grant;
    try {
      grant = await core.acquire(name, this.id, { ttlMs: 0, sessionBound: true, waitMs,
        ns: options.ns, mode: 'exclusive', limit: 0, leaderValue: String(value) }, call);
    } catch (error) {
      if (error instanceof errors.Held) return null;
      throw error;
    }
    grant.answer.lease = 'session'; // a leader lives exactly as long as its session (C3)
    const leadership = new Leadership(this, core, name, options.ns, grant.answer, grant.sentAt,
      'exclusive', false, options.onLost);
    leadership.value = grant.answer.leader?.value ?? String(value);
    return leadership;
  }
}

/**
 * A grant held through a Session: `token` is its fencing token, fixed for its life.
 *
 * Trusted until `deadline`: the send time of the acquire (or last extend) + min(TTL asked, TTL
 * answered) less the clock-rate allowance, and never past its session's deadline. `signal`
 * aborts (and `onLost` is called once) when the lock is known lost or its deadline passes;
 * `check()` throws LockLost once it is no longer trusted. `await using` releases it.
 */
export class Lock extends Trusted {
  #core;
  #deadline;
  #stop = new AbortController();
  #watchdog;
  /** @internal */ released = false;
  /** @internal */ gone = false;
  /** @internal */ ownsSession = false;

  /** @internal */
  constructor(session, core, key, ns, answer, sentAt, mode, autoExtend, onLost) {
    super(onLost);
    this.session = session;
    this.#core = core;
    this.key = key;
    this.ns = ns;
    this.token = answer.fencing_token;
    this.mode = answer.mode ?? mode;
    this.limit = answer.limit;
    this.sessionBound = answer.lease === 'session';
    this.ttlMs = answer.trusted_ttl_ms;
    // A session-bound lock is trusted exactly as long as its session.
    this.#setDeadline(this.sessionBound ? Infinity
      : leaseDeadline(sentAt, this.ttlMs, core.clockDrift));
    session.locks.add(this);
    if (session.lost) this.markLost(`session lost: ${session.lostReason}`); // lost in flight
    if (autoExtend && !this.sessionBound) {
      this.#extendLoop(sentAt).catch((error) => this.markLost(`extend failed: ${error}`));
    }
  }

  /** performance.now() time until which this lock is trusted: its own, capped by its session's. */
  get deadline() {
    return Math.min(this.#deadline, this.session.deadline);
  }

  get valid() {
    return !this.released && !this.lost && now() < this.deadline;
  }

  /** Throws LockLost unless the lock is still trusted: call it before each write. */
  check() {
    if (this.valid) return;
    if (now() >= this.deadline && !this.lost && !this.released) {
      this.markLost("the lock's client deadline passed without a successful extend");
    }
    throw new errors.LockLost(`${this.key} (token ${this.token}): ` +
      `${this.lostReason || 'released'}`);
  }

  #setDeadline(deadline) {
    this.#deadline = deadline;
    cancelTimer(this.#watchdog);
    if (Number.isFinite(deadline) && !this.released) {
      this.#watchdog = timerAt(deadline, () => {
        if (!this.released && now() >= this.#deadline) {
          this.markLost("the lock's client deadline passed without a successful extend");
        }
      });
    }
  }

  /** @internal */
  markLost(reason) {
    if (this.flagLost(reason, `${this.key} (token ${this.token})`)) {
      cancelTimer(this.#watchdog);
      this.#stop.abort();
    }
  }

  /** @internal */
  stopLoops() {
    this.#stop.abort();
    cancelTimer(this.#watchdog);
  }

  #record(answer, sentAt) {
    if (this.sessionBound) return; // its deadline is the session's, which keepalives move
    this.ttlMs = answer.trusted_ttl_ms;
    if (!this.lost) this.#setDeadline(leaseDeadline(sentAt, this.ttlMs, this.#core.clockDrift));
  }

  #extendLoop(sentAt) {
    const core = this.#core;
    return this.renewEvery(core, this.#stop.signal, sentAt + this.ttlMs / 3, () => this.#deadline,
      async (call) => {
        const { answer, sentAt: sent } = await core.extend(this.key, this.session.id, this.token,
          this.ttlMs, this.ns, this.mode, call);
        this.#record(answer, sent);
        return sent + answer.trusted_ttl_ms / 3;
      },
      (error) => {
        if (error instanceof errors.LockLost) {
          this.gone = true;
          this.markLost(`lock lost: ${error.message}`);
          return true;
        }
        if (error instanceof errors.SessionNotFound) {
          this.gone = true;
          this.session.gone = true;
          this.session.markLost(`session expired on the server: ${error.message}`);
          return true;
        }
        return false;
      },
      (error) => this.markLost(
        `no successful extend before the lock's deadline: ${error.message}`));
  }

  /** Extends the lock now (the same token); `ttl` undefined: the current TTL. */
  async extend(ttl) {
    const ttlMs = durationMs(ttl, 'ttl') || this.ttlMs;
    let grant;
    try {
      grant = await this.#core.extend(this.key, this.session.id, this.token, ttlMs, this.ns,
        this.mode, this.#core.callFor());
    } catch (error) {
      if (error instanceof errors.LockLost) {
        this.gone = true;
        this.markLost(`lock lost: ${error.message}`);
      }
      throw error;
    }
    this.#record(grant.answer, grant.sentAt);
  }

  /** Releases the grant. Throws LockLost when it was already lost. */
  async release() {
    if (this.released) return;
    this.released = true;
    this.stopLoops();
    this.session.locks.delete(this);
    try {
      if (this.gone || this.session.gone) {
        throw new errors.LockLost(`release ${this.key}: ${this.lostReason || 'gone'}`);
      }
      if (this.session.closed) return; // closing the session released it
      await this.sendRelease(this.#core.callFor(this.#core.requestTimeoutMs));
    } finally {
      if (this.ownsSession) await this.session.close();
    }
  }

  /** @internal */
  async sendRelease(call) {
    await this.#core.release(this.key, this.session.id, this.token, this.ns, this.mode, call);
  }

  /** `await using lock = …`: releases; throws LockLost when the lock was lost while held. */
  async [Symbol.asyncDispose]() {
    const lost = this.lost;
    await this.release();
    if (lost) {
      throw new errors.LockLost(`${this.key} (token ${this.token}) was lost while held: ` +
        this.lostReason);
    }
  }
}

/**
 * The leadership of an election: a session-bound exclusive grant that carries `value`. Resigns
 * on resign() or when an `await using` block ends.
 */
export class Leadership extends Lock {
  value = '';

  get name() {
    return this.key;
  }

  /** A new value without a new election: the token stays. LockLost when no longer leading. */
  async proclaim(value) {
    if (this.released) throw new errors.LockLost(`proclaim ${this.key}: resigned`);
    const core = this.session.client.core;
    try {
      await core.proclaim(this.key, this.session.id, this.token, String(value), this.ns,
        core.callFor());
    } catch (error) {
      if (error instanceof errors.LockLost || error instanceof errors.SessionNotFound) {
        this.gone = true;
        this.markLost(`leadership lost: ${error.message}`);
        throw new errors.LockLost(error.message);
      }
      throw error;
    }
    this.value = String(value);
  }

  async resign() {
    await this.release();
  }

  /** @internal */
  async sendRelease(call) {
    await this.session.client.core.resign(this.key, this.session.id, this.token, this.ns, call);
  }
}
