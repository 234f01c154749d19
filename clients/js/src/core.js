// What Client, Session and Lock share: resolved options, the servers, the retry loop with
// failover, and one function per C3 route.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import * as errors from './errors.js';
import { backoffDelay, resolveClockDrift, trustedTtlMs } from './lease.js';
import { MAYBE_SENT, TLS_FAILED, Transport, TransportError, loadTlsOptions } from './transport.js';

export const DEFAULT_SERVER = 'http://127.0.0.1:7070';
const TRANSIENT = new Set([429, 502, 503, 504]);
const BEARER = /^[A-Za-z0-9\-._~+/]+=*$/;

export const now = () => performance.now();

function env(name) {
  return (process.env[name] ?? '').trim();
}

function checkBearer(token, name) {
  if (!BEARER.test(token)) {
    throw new errors.InvalidArgument(`${name}: not a bearer token (letters, digits and -._~+/, ` +
      "then optional '=' padding; e.g. from dlock token new)", { field: name });
  }
  return token;
}

/** The first line of `path`, trailing blanks removed; errors name the file, never a token. */
function readTokenFile(path, name) {
  let line;
  try {
    line = readFileSync(path, 'utf8').split('\n', 1)[0].trimEnd();
  } catch (error) {
    throw new errors.InvalidArgument(`${name}: cannot read a token from ` +
      `${JSON.stringify(path)}: ${error.code ?? error.message}`, { field: name });
  }
  if (!line) {
    throw new errors.InvalidArgument(`${name}: the first line of ${JSON.stringify(path)} is empty`,
      { field: name });
  }
  return checkBearer(line, `${name} (${JSON.stringify(path)})`);
}

/**
 * The option, else the first line of tokenFile, else DLOCK_TOKEN, else the first line of the
 * file DLOCK_TOKEN_FILE names; '' when none is set (contract C6, as the CLI).
 */
export function resolveToken(token, tokenFile) {
  if (token) return checkBearer(token, 'token');
  if (tokenFile) return readTokenFile(tokenFile, 'tokenFile');
  const fromEnv = env('DLOCK_TOKEN');
  if (fromEnv) return checkBearer(fromEnv, 'DLOCK_TOKEN');
  const path = env('DLOCK_TOKEN_FILE');
  if (path) return readTokenFile(path, 'DLOCK_TOKEN_FILE');
  return '';
}

/** An array, or a comma-separated string; empty: DLOCK_SERVER, else the default. */
export function resolveServers(servers) {
  const split = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);
  let listed = typeof servers === 'string' ? split(servers)
    : (servers ?? []).map((s) => String(s).trim()).filter(Boolean);
  if (listed.length === 0) listed = split(env('DLOCK_SERVER') || DEFAULT_SERVER);
  if (listed.length === 0) {
    throw new errors.InvalidArgument('server: no server URL given', { field: 'server' });
  }
  return listed;
}

export const quote = (text) => encodeURIComponent(text);

export function query(params) {
  const pairs = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [k, String(v)]);
  return pairs.length ? '?' + new URLSearchParams(pairs).toString() : '';
}

/**
 * Resolves after `ms`, or rejects with Cancelled when `signal` aborts first. `background`: the
 * timer does not keep the process alive (keep-alive and extend loops).
 */
export function sleep(ms, signal, what = 'wait', background = false) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new errors.Cancelled(`${what}: cancelled`));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new errors.Cancelled(`${what}: cancelled`));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    if (background) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function parseJson(exchange, what) {
  let value;
  try {
    value = JSON.parse(exchange.body);
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new errors.Internal(`${what}: the server's answer is not a JSON object`);
  }
  return value;
}

/** A fencing token from an answer: a safe integer, or the answer is unreadable. */
export function tokenOf(answer, what) {
  const token = answer.fencing_token;
  if (!Number.isSafeInteger(token) || token <= 0) {
    throw new errors.Internal(`${what}: the server sent no usable fencing_token`);
  }
  return token;
}

export class Core {
  constructor(options = {}) {
    const ms = (value, fallback) => (value === undefined ? fallback : value);
    this.servers = resolveServers(options.servers);
    this.token = resolveToken(options.token, options.tokenFile);
    const admin = options.adminToken || env('DLOCK_ADMIN_TOKEN');
    this.adminToken = admin ? checkBearer(admin, 'adminToken') : '';
    this.clockDrift = resolveClockDrift(options.clockDrift);
    this.requestTimeoutMs = ms(options.requestTimeoutMs, 10_000);
    this.retryBudgetMs = ms(options.retryBudgetMs, 15_000);
    this.backoffInitialMs = ms(options.backoffInitialMs, 50);
    this.backoffMaxMs = ms(options.backoffMaxMs, 2_000);
    this.namespace = options.namespace ?? env('DLOCK_NAMESPACE');
    let tls;
    if (this.servers.some((url) => url.trim().toLowerCase().startsWith('https://'))) {
      tls = loadTlsOptions(options.caFile || env('DLOCK_CACERT'),
        options.certFile || env('DLOCK_CERT'), options.keyFile || env('DLOCK_KEY'));
    }
    this.transports = this.servers.map((url) => new Transport(url, tls));
    this.current = 0;
  }

  close() {
    for (const transport of this.transports) transport.close();
  }

  /** A call's bounds: its deadline (performance.now() ms), and what may end it. */
  callFor(budgetMs = this.retryBudgetMs, extra = {}) {
    return { deadline: now() + budgetMs, repeatSafe: true, slackMs: 0, ...extra };
  }

  ns(ns) {
    return ns ?? this.namespace;
  }

  // --- the retry loop -----------------------------------------------------------------------

  /**
   * Sends the request, retrying transient failures (unreachable, 429/502/503/504) with backoff
   * until `call.deadline`; resolves to the first other answer, whatever its status. An
   * unreachable server, a 502/503/504 or a lost connection hands the call to the next server at
   * once (until each was tried; then backoff). A lost connection ends a call that is not
   * repeat-safe with UnknownOutcome at once.
   */
  async call(method, target, body, what, call, authorization) {
    const headers = {};
    const bearer = authorization || this.token;
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    let data = body === undefined || body === null ? undefined : JSON.stringify(body);
    const started = now();
    let failure;
    let failedInRound = 0;
    let backoffRound = 0;
    let attempts = 0;
    const count = this.transports.length;
    for (;;) {
      attempts += 1;
      let slack = call.slackMs;
      if (call.beforeAttempt) [data, slack] = call.beforeAttempt();
      const sentAt = now();
      // Every call gets at least one real attempt, even with its deadline already due.
      const timeout = Math.min(Math.max(call.deadline - sentAt, 1), this.requestTimeoutMs + slack);
      const server = this.current % count;
      let retryAfterMs;
      let moveOn;
      try {
        const response = await this.transports[server].send(method, target, data, headers,
          timeout, call.signal, !call.repeatSafe);
        if (!TRANSIENT.has(response.status)) {
          return { status: response.status, body: response.body, sentAt };
        }
        failure = errors.errorFromResponse(response.status, response.body, what);
        retryAfterMs = response.retryAfterMs;
        moveOn = response.status !== 429; // 429 is this server's own limit: stay
      } catch (error) {
        if (!(error instanceof TransportError)) throw error;
        failure = error;
        moveOn = true;
        if (error.kind === MAYBE_SENT && !call.repeatSafe) giveUp(failure, what, attempts, started);
        if (error.kind === TLS_FAILED && count === 1) giveUp(failure, what, attempts, started);
      }
      const at = now();
      if (moveOn && count > 1) {
        if (this.current % count === server) this.current = (server + 1) % count;
        failedInRound += 1;
        if (failedInRound < count) {
          if (at >= call.deadline) giveUp(failure, what, attempts, started);
          continue;
        }
        failedInRound = 0;
        if (failure instanceof TransportError && failure.kind === TLS_FAILED) {
          giveUp(failure, what, attempts, started);
        }
      }
      let delay = backoffDelay(this.backoffInitialMs, this.backoffMaxMs, backoffRound,
        Math.random());
      backoffRound += 1;
      if (retryAfterMs !== undefined) delay = Math.max(delay, retryAfterMs);
      if (at + delay >= call.deadline) giveUp(failure, what, attempts, started);
      await sleep(delay, call.signal, what);
    }
  }

  expect(exchange, status, what, key = '') {
    if (exchange.status !== status) {
      throw errors.errorFromResponse(exchange.status, exchange.body, what, key);
    }
  }

  // --- routes -------------------------------------------------------------------------------

  async openSession(owner, ttlMs, lockDelayMs, call) {
    const body = { owner };
    if (ttlMs > 0) body.ttl_ms = ttlMs;
    if (lockDelayMs > 0) body.lock_delay_ms = lockDelayMs;
    call.repeatSafe = false; // a repeat would open a second session
    const exchange = await this.call('POST', '/v1/sessions', body, 'open session', call);
    this.expect(exchange, 201, 'open session');
    const answer = parseJson(exchange, 'open session');
    if (typeof answer.session_id !== 'string' || !answer.session_id) {
      throw new errors.Internal('open session: the server sent no session_id');
    }
    return { answer, sentAt: exchange.sentAt };
  }

  async keepalive(sessionId, call) {
    const what = `keepalive session ${sessionId}`;
    const exchange = await this.call('POST', `/v1/sessions/${quote(sessionId)}/keepalive`,
      undefined, what, call);
    this.expect(exchange, 200, what);
    return { answer: parseJson(exchange, what), sentAt: exchange.sentAt };
  }

  async closeSession(sessionId, call) {
    const what = `close session ${sessionId}`;
    const exchange = await this.call('DELETE', `/v1/sessions/${quote(sessionId)}`, undefined,
      what, call);
    this.expect(exchange, 204, what);
  }

  /**
   * The grant's answer (with `trusted_ttl_ms`) and its send time; throws Held when still held
   * after `waitMs` (with the lock-delay's end when the server named one).
   */
  async acquire(key, sessionId, o, call) {
    const campaign = o.leaderValue !== undefined;
    const what = (campaign ? 'campaign ' : 'acquire ') + key;
    let target;
    if (campaign) target = `/v1/elections/${quote(key)}/campaign`;
    else if (o.mode === 'permit') target = `/v1/semaphores/${quote(key)}/acquire`;
    else target = `/v1/locks/${quote(key)}/acquire`;
    target += query({ ns: this.ns(o.ns) });
    const waitUntil = now() + o.waitMs;
    let askedWait = 0;
    call.beforeAttempt = () => {
      // Recomputed before every attempt: retries after a 503 never wait past our deadline.
      askedWait = Math.max(0, Math.floor(waitUntil - now()));
      const body = { session_id: sessionId };
      if (campaign) {
        body.value = o.leaderValue;
      } else {
        if (o.sessionBound) body.lease = 'session';
        if (o.ttlMs > 0) body.ttl_ms = o.ttlMs;
        if (o.mode === 'shared') body.mode = 'shared';
        if (o.mode === 'permit') body.limit = o.limit;
      }
      if (askedWait > 0) body.wait_ms = askedWait;
      return [JSON.stringify(body), askedWait];
    };
    let round = 0;
    for (;;) {
      const exchange = await this.call('POST', target, undefined, what, call);
      if (exchange.status === 200) {
        const answer = parseJson(exchange, what);
        answer.fencing_token = tokenOf(answer, what);
        answer.trusted_ttl_ms = trustedTtlMs(o.ttlMs, Number(answer.ttl_ms) || 0);
        return { answer, sentAt: exchange.sentAt };
      }
      const inner = errors.errorObject(exchange.body);
      if (exchange.status !== 409 || inner.code !== 'held') {
        throw errors.errorFromResponse(exchange.status, exchange.body, what, key);
      }
      // Held. The server may cap the wait below ours: keep asking until ours is spent.
      const left = waitUntil - now();
      if (left <= 20) {
        throw new errors.Held(key, o.waitMs,
          typeof inner.delayed_until === 'string' ? inner.delayed_until : undefined);
      }
      if (now() - exchange.sentAt < askedWait / 2) {
        // Answered early without waiting: pace the retries instead of spinning.
        const pause = Math.min(left, backoffDelay(this.backoffInitialMs, this.backoffMaxMs, round,
          Math.random()));
        round += 1;
        await sleep(pause, call.signal, what);
      }
    }
  }

  async extend(key, sessionId, token, ttlMs, ns, mode, call) {
    const what = `extend ${key}`;
    const collection = mode === 'permit' ? 'semaphores' : 'locks';
    const body = { session_id: sessionId, fencing_token: token };
    if (ttlMs > 0) body.ttl_ms = ttlMs;
    const target = `/v1/${collection}/${quote(key)}/extend` + query({ ns: this.ns(ns) });
    const exchange = await this.call('POST', target, body, what, call);
    this.expect(exchange, 200, what, key);
    const answer = parseJson(exchange, what);
    if (answer.fencing_token !== token) {
      // Extend never changes the token: another one means another grant.
      throw new errors.LockLost(`${what}: the server answered token ${answer.fencing_token}, ` +
        `ours is ${token}`);
    }
    answer.trusted_ttl_ms = trustedTtlMs(ttlMs, Number(answer.ttl_ms) || 0);
    return { answer, sentAt: exchange.sentAt };
  }

  async release(key, sessionId, token, ns, mode, call) {
    const what = `release ${key}`;
    const collection = mode === 'permit' ? 'semaphores' : 'locks';
    const target = `/v1/${collection}/${quote(key)}` +
      query({ session_id: sessionId, fencing_token: token, ns: this.ns(ns) });
    this.expect(await this.call('DELETE', target, undefined, what, call), 204, what, key);
  }

  /** GET `path`: its object, or null on 404 with `noneCode`. */
  async get(path, what, call, noneCode) {
    const exchange = await this.call('GET', path, undefined, what, call);
    if (exchange.status === 404 && noneCode &&
        errors.errorObject(exchange.body).code === noneCode) {
      return null;
    }
    this.expect(exchange, 200, what);
    return parseJson(exchange, what);
  }

  async proclaim(name, sessionId, token, value, ns, call) {
    const what = `proclaim ${name}`;
    const body = { session_id: sessionId, fencing_token: token, value };
    const target = `/v1/elections/${quote(name)}/proclaim` + query({ ns: this.ns(ns) });
    const exchange = await this.call('POST', target, body, what, call);
    this.expect(exchange, 200, what, name);
    const answer = parseJson(exchange, what);
    if (answer.fencing_token !== token) {
      throw new errors.LockLost(`${what}: the server answered another token`);
    }
    return answer;
  }

  async resign(name, sessionId, token, ns, call) {
    const what = `resign ${name}`;
    const body = { session_id: sessionId, fencing_token: token };
    const target = `/v1/elections/${quote(name)}/resign` + query({ ns: this.ns(ns) });
    this.expect(await this.call('POST', target, body, what, call), 204, what, name);
  }

  async clearDelay(key, ns, call) {
    const what = `clear the lock-delay of ${key}`;
    call.repeatSafe = false; // a repeat could end a delay that started after the first
    const exchange = await this.call('POST',
      `/v1/admin/locks/${quote(key)}/clear-delay` + query({ ns: this.ns(ns) }), undefined, what,
      call, this.adminToken || undefined);
    this.expect(exchange, 200, what, key);
    return Boolean(parseJson(exchange, what).cleared);
  }

  async revoke(key, ns, call) {
    const what = `revoke ${key}`;
    call.repeatSafe = false; // a repeat could revoke a grant made after the first revoke
    const exchange = await this.call('POST',
      `/v1/admin/locks/${quote(key)}/revoke` + query({ ns: this.ns(ns) }), undefined, what, call,
      this.adminToken || undefined);
    this.expect(exchange, 200, what, key);
    return parseJson(exchange, what);
  }
}

function giveUp(failure, what, attempts, started) {
  const spent = ((now() - started) / 1000).toFixed(1);
  const suffix = ` (gave up after ${attempts} attempt${attempts === 1 ? '' : 's'} in ${spent} s)`;
  if (failure instanceof errors.DlockError) {
    failure.message += suffix;
    throw failure;
  }
  const message = `${what}: ${failure.message}${suffix}`;
  if (failure instanceof TransportError && failure.kind === TLS_FAILED) {
    throw new errors.TlsError(message, { field: 'tls' });
  }
  if (failure instanceof TransportError && failure.kind === MAYBE_SENT) {
    throw new errors.UnknownOutcome(message);
  }
  throw new errors.Unavailable(message);
}
