// Executes one scenario of tests/clients/scenarios.json with the TypeScript client (the format
// is tests/clients/README.md; clients/python/tests/scenario_runner.py is the reference runner).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import * as dlock from '../src/index.js';

const ERRORS = {
  held: dlock.Held,
  lock_lost: dlock.LockLost,
  session_not_found: dlock.SessionNotFound,
  unavailable: dlock.Unavailable, // also NotLeader and UnknownOutcome, its kinds
  not_leader: dlock.NotLeader,
  unknown_outcome: dlock.UnknownOutcome,
  unauthenticated: dlock.Unauthenticated,
  permission_denied: dlock.PermissionDenied,
  conflict: dlock.Conflict,
  invalid_argument: dlock.InvalidArgument,
  too_many_requests: dlock.ResourceExhausted,
  cancelled: dlock.Cancelled,
  tls: dlock.TlsError,
};
const BOGUS_TOKEN = 'dlk_' + 'A'.repeat(43); // well-formed, known to no server

const now = () => performance.now();
const ms = (value) => dlock.durationMs(value);

/** Runs `make` with the environment variables `vars` set, then restores them. */
function withEnvironment(vars, make) {
  const saved = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  try {
    return make();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** Whether `promise` settles within `ms` (a timer that keeps the process alive, then cleared). */
async function within(promise, ms) {
  let timer;
  const expired = new Promise((resolve) => { timer = setTimeout(resolve, ms, false); });
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a step did: its value (a Lock, a leader, null for held/none) or its error, and when. */
class Outcome {
  constructor(value, error, elapsed) {
    Object.assign(this, { value, error, elapsed });
  }
}

/** A step run in the background; `cancel` is the client's cancellation (an AbortSignal). */
class Task {
  constructor(step, action) {
    this.step = step;
    this.controller = new AbortController();
    this.outcome = undefined;
    const started = now();
    this.done = action(this.controller.signal).then(
      (value) => { this.outcome = new Outcome(value, undefined, now() - started); },
      (error) => { this.outcome = new Outcome(undefined, error, now() - started); });
  }

  /** Whether the task ended within `timeoutMs`. */
  async wait(timeoutMs) {
    return this.outcome !== undefined || within(this.done, timeoutMs);
  }
}

export class ScenarioRun {
  constructor(harness, scenario, tmpDir) {
    this.harness = harness;
    this.scenario = scenario;
    this.tmpDir = tmpDir;
    // Every key of this run lives in a namespace of its own: scenarios share the servers.
    this.ns = `${scenario.name.slice(0, 40)}-${randomBytes(4).toString('hex')}`;
    this.names = new Map();
    this.tasks = new Map();
    this.clients = [];
    this.sessions = [];
  }

  async run() {
    let number = 0;
    for (const step of this.scenario.steps) {
      number += 1;
      const handler = this[`do_${step.do}`];
      assert.ok(handler, `step ${number}: unknown step ${JSON.stringify(step.do)}`);
      try {
        await handler.call(this, step);
      } catch (failure) {
        failure.message = `step ${number} ${JSON.stringify(step)}: ${failure.message}`;
        throw failure;
      }
    }
  }

  async close() {
    for (const task of this.tasks.values()) task.controller.abort();
    for (const session of this.sessions) {
      try {
        await session.close();
      } catch (error) {
        if (!(error instanceof dlock.DlockError)) throw error;
      }
    }
    await Promise.all([...this.tasks.values()].map((task) => task.done));
    for (const client of this.clients) client.close();
  }

  name(name) {
    assert.ok(this.names.has(name), `${name} is not bound`);
    return this.names.get(name);
  }

  // --- outcomes -----------------------------------------------------------------------------

  expect(step, outcome, fallback) {
    const want = step.expect ?? fallback;
    const { error, value } = outcome;
    if ('error' in want) {
      const Kind = ERRORS[want.error];
      assert.ok(error instanceof Kind, error
        ? `expected error ${want.error}, got ${error.name}: ${error.message}`
        : `expected error ${want.error}, got ${value}`);
      if ('field' in want) assert.equal(error.field, want.field, `field ${error.field}`);
      if (want.delayed) assert.ok(error.delayedUntil, `no lock-delay named: ${error.message}`);
      for (const text of want.message_excludes ?? []) {
        assert.ok(!error.message.includes(text), `the message names ${text}: ${error.message}`);
      }
    } else if (error !== undefined) {
      error.message = `expected ${JSON.stringify(want)}, got ${error.name}: ${error.message}`;
      throw error;
    }
    if (want.granted) assert.ok(value, 'expected a grant, got held');
    if (want.held || want.none) assert.equal(value, null, `expected none/held, got ${value}`);
    if ('after_at_least' in want) {
      const least = ms(want.after_at_least);
      assert.ok(outcome.elapsed >= least, `answered after ${outcome.elapsed} ms < ${least} ms`);
    }
    for (const name of want.token_greater_than ?? []) {
      assert.ok(value.token > this.name(name).token,
        `token ${value.token} not greater than ${name}'s ${this.name(name).token}`);
    }
    if ('token_of' in want) {
      const token = value.fencingToken ?? value.token;
      assert.equal(token, this.name(want.token_of).token, `token ${token}`);
    }
    if ('cleared' in want) assert.equal(value, want.cleared, `cleared ${value}`);
    if ('value' in want) assert.equal(value?.value, want.value, `value ${value?.value}`);
  }

  /** Runs `action` now (or in the background) and checks or records its outcome. */
  async outcomeOf(step, action, fallback) {
    if (step.background) {
      this.tasks.set(step.as, new Task(step, action));
      return;
    }
    const started = now();
    let outcome;
    try {
      outcome = new Outcome(await action(undefined), undefined, now() - started);
    } catch (error) {
      if (!(error instanceof dlock.DlockError)) throw error;
      outcome = new Outcome(undefined, error, now() - started);
    }
    this.expect(step, outcome, fallback);
    if (step.as && outcome.value !== undefined && outcome.value !== null) {
      this.names.set(step.as, outcome.value);
    }
  }

  // --- steps --------------------------------------------------------------------------------

  do_client(step) {
    const h = this.harness;
    const servers = { first: h.servers.slice(0, 1), all: h.servers, auth: [h.authServer],
      tls: [h.tlsServer] }[step.servers ?? 'first'];
    const options = { servers, namespace: this.ns, retryBudget: step.retry_budget ?? '5s',
      requestTimeout: '5s', backoffMax: '500ms' };
    const vars = {};
    if (step.tls) {
      const chosen = { caFile: h.tlsFiles[step.tls.ca] };
      if (step.tls.client_cert) {
        chosen.certFile = h.tlsFiles.client_cert;
        chosen.keyFile = h.tlsFiles.client_key;
      }
      if ((step.tls.source ?? 'option') === 'option') {
        Object.assign(options, chosen);
      } else { // the CLI's variables, read when the client is made
        const names = { caFile: 'DLOCK_CACERT', certFile: 'DLOCK_CERT', keyFile: 'DLOCK_KEY' };
        for (const [option, path] of Object.entries(chosen)) vars[names[option]] = path;
      }
    }
    if ('clock_drift' in step) options.clockDrift = step.clock_drift;
    if (step.admin_token === 'admin') options.adminToken = h.adminToken;
    let token = step.token;
    if (token) token = token === 'bogus' ? BOGUS_TOKEN : h.tokens[token];
    const source = step.token_source ?? 'option';
    const path = join(this.tmpDir, `token-${this.ns}-${step.as}`);
    if (token) {
      if (source === 'file' || source === 'env_file') writeFileSync(path, token + '\n');
      if (source === 'option') options.token = token;
      else if (source === 'file') options.tokenFile = path;
      else if (source === 'env') vars.DLOCK_TOKEN = token;
      else vars.DLOCK_TOKEN_FILE = path;
    }
    const client = withEnvironment(vars, () => new dlock.Client(options));
    this.clients.push(client);
    this.names.set(step.as, client);
  }

  async do_session(step) {
    const client = this.name(step.client);
    await this.outcomeOf(step, async (signal) => {
      const session = await client.session({ owner: step.owner, ttl: step.ttl,
        lockDelay: step.lock_delay, signal });
      this.sessions.push(session);
      return session;
    }, {});
  }

  async do_acquire(step) {
    const session = this.name(step.session);
    const options = { ttl: step.ttl, wait: step.wait, autoExtend: step.auto_extend ?? true,
      mode: step.mode, permits: step.permits, sessionBound: step.session_bound };
    if (step.as) this.names.set(`started:${step.as}`, now());
    await this.outcomeOf(step, async (signal) => {
      if (step.form === 'with') {
        const lock = await session.lock(step.key, { ...options, signal });
        await lock[Symbol.asyncDispose]();
        return lock;
      }
      return session.acquire(step.key, { ...options, signal });
    }, { granted: true });
  }

  async do_campaign(step) {
    const session = this.name(step.session);
    await this.outcomeOf(step, (signal) => session.campaign(step.name, step.value,
      { wait: step.wait, signal }), { granted: true });
  }

  async do_observe(step) {
    const client = this.name(step.client);
    const after = this.name(step.after);
    const { token, value } = after;
    await this.outcomeOf(step, (signal) => client.observe(step.name,
      { afterToken: token, afterValue: value, wait: step.wait ?? '10s', signal }), {});
  }

  async do_leader(step) {
    const client = this.name(step.client);
    await this.outcomeOf(step, () => client.leader(step.name), {});
  }

  async do_proclaim(step) {
    const leader = this.name(step.leader);
    await this.outcomeOf(step, () => leader.proclaim(step.value), {});
  }

  async do_resign(step) {
    const leader = this.name(step.leader);
    await this.outcomeOf(step, () => leader.resign(), {});
  }

  async do_release(step) {
    const lock = this.name(step.lock);
    await this.outcomeOf(step, () => lock.release(), {});
  }

  async do_revoke(step) {
    const client = this.name(step.client);
    await this.outcomeOf(step, () => client.revoke(step.key), {});
  }

  async do_clear_delay(step) {
    const client = this.name(step.client);
    await this.outcomeOf(step, () => client.clearDelay(step.key), {});
  }

  async do_close(step) {
    const session = this.name(step.session);
    await this.outcomeOf(step, () => session.close(), {});
  }

  async do_await(step) {
    const task = this.tasks.get(step.task);
    const bound = ms(step.within);
    assert.ok(await task.wait(bound), `${step.task} still pending after ${bound} ms`);
    this.expect(step, task.outcome,
      ['acquire', 'campaign'].includes(task.step.do) ? { granted: true } : {});
    if (task.outcome.value !== undefined && task.outcome.value !== null) {
      this.names.set(step.task, task.outcome.value);
    }
  }

  async do_pending(step) {
    const task = this.tasks.get(step.task);
    const ended = await task.wait(ms(step.for));
    assert.ok(!ended, `${step.task} finished early: ${task.outcome?.value} ` +
      `${task.outcome?.error?.message}`);
  }

  do_cancel(step) {
    this.tasks.get(step.task).controller.abort();
  }

  async do_read(step) {
    const client = this.name(step.client);
    const want = step.expect ?? {};
    const end = now() + ms(step.within ?? 0);
    for (;;) {
      let problem;
      try {
        const holders = await client.holders(step.key);
        const tokens = holders.map((h) => h.fencingToken);
        if (want.free && holders.length) problem = `held by token ${tokens[0]}`;
        if ('holders' in want && holders.length !== want.holders) {
          problem = `${holders.length} holders`;
        }
        if ('token_of' in want) {
          const token = this.name(want.token_of).token;
          if (!tokens.includes(token)) problem = `tokens ${tokens}, not ${token}`;
        }
      } catch (error) {
        if (!(error instanceof dlock.DlockError)) throw error;
        problem = `${error.name}: ${error.message}`;
      }
      if (problem === undefined) return;
      assert.ok(now() < end, problem);
      await delay(50);
    }
  }

  async do_semaphore(step) {
    const info = await this.name(step.client).semaphore(step.name);
    const want = step.expect;
    if ('limit' in want) assert.equal(info.limit, want.limit, `limit ${info.limit}`);
    if ('holders' in want) assert.equal(info.holders.length, want.holders, 'holders');
  }

  async do_hold(step) {
    const lock = this.name(step.lock);
    const end = now() + ms(step.for);
    while (now() < end) {
      assert.ok(lock.valid && !lock.lost, `lost while held: ${lock.lostReason}`);
      await delay(50);
    }
    lock.check();
  }

  async do_lost(step) {
    const lock = this.name(step.lock);
    const bound = ms(step.within);
    if (!lock.signal.aborted) {
      const fired = new Promise((resolve) => {
        lock.signal.addEventListener('abort', resolve, { once: true });
      });
      assert.ok(await within(fired, bound), `no lost signal within ${bound} ms`);
    }
    assert.ok(!lock.valid, 'lost but still valid');
    assert.throws(() => lock.check(), dlock.LockLost, 'check() did not throw LockLost');
  }

  do_deadline(step) {
    const lock = this.name(step.lock);
    const trusted = lock.deadline - this.name(`started:${step.lock}`);
    const low = ms(step.at_least);
    const high = ms(step.at_most);
    assert.ok(low <= trusted && trusted <= high,
      `trusted for ${trusted.toFixed(1)} ms, not in [${low}, ${high}]`);
  }

  async do_server(step) {
    await this.harness.command(`${step.command} ${step.server ?? ''}`.trim());
  }
}
