// Durations, the client-side deadline of a lease, and the retry backoff.
//
// The deadline rule is the C++ client's (docs/client.md "Client deadlines", ADR-0012): a lease
// whose request was *sent* at `sentAt` (performance.now() milliseconds) is trusted until
//
//     sentAt + trusted - ceil(trusted * clockDrift)
//     trusted = min(TTL asked, TTL answered)          (the answered one when none was asked)
//
// so the client stops believing in a lock no later than the server expires it, even when the
// server answers more than was asked or its clock runs faster than ours.
import { InvalidArgument } from './errors.js';

/** The clock-rate allowance when neither the option nor DLOCK_CLOCK_DRIFT sets one (1 %). */
export const DEFAULT_CLOCK_DRIFT = 0.01;

const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Whole milliseconds of "500ms", "10s", "5m", "1h" or a number of seconds; undefined/null is 0.
 * Throws InvalidArgument naming `field` otherwise.
 */
export function durationMs(value, field = 'duration') {
  if (value === undefined || value === null) return 0;
  if (typeof value === 'string') {
    const match = DURATION.exec(value);
    if (!match) {
      throw new InvalidArgument(`${field}: not a duration: ${JSON.stringify(value)} ` +
        '(e.g. 500ms, 10s, 5m, 1h)', { field });
    }
    return Math.round(Number(match[1]) * UNIT_MS[match[2]]);
  }
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
    return Math.round(value * 1000);
  }
  throw new InvalidArgument(`${field}: not a non-negative duration: ${String(value)}`, { field });
}

/** "0.01" or "1%": a fraction in [0, 0.5). */
export function parseClockDrift(text, field = 'clockDrift') {
  const number = text.trim();
  const percent = number.endsWith('%');
  let value = Number(percent ? number.slice(0, -1) : number);
  if (number === '' || Number.isNaN(value)) value = -1;
  if (percent) value /= 100;
  if (!(value >= 0 && value < 0.5)) {
    throw new InvalidArgument(`${field}: ${JSON.stringify(text)} is not a clock-rate allowance ` +
      'in [0, 0.5), e.g. 0.01 or 1%', { field });
  }
  return value;
}

/** The option, else DLOCK_CLOCK_DRIFT, else DEFAULT_CLOCK_DRIFT. */
export function resolveClockDrift(option) {
  if (option !== undefined && option !== null) {
    if (!(typeof option === 'number' && option >= 0 && option < 0.5)) {
      throw new InvalidArgument('clockDrift: the clock-rate allowance must be a fraction in ' +
        '[0, 0.5), e.g. 0.01', { field: 'clockDrift' });
    }
    return option;
  }
  const env = (process.env.DLOCK_CLOCK_DRIFT ?? '').trim();
  return env ? parseClockDrift(env, 'DLOCK_CLOCK_DRIFT') : DEFAULT_CLOCK_DRIFT;
}

/**
 * The TTL a lease is trusted for: a server answering more than was asked never lengthens the
 * client's trust. `askedMs` 0: the server's default was asked for, so the answer.
 */
export function trustedTtlMs(askedMs, answeredMs) {
  if (askedMs <= 0) return answeredMs;
  if (answeredMs <= 0) return askedMs;
  return Math.min(askedMs, answeredMs);
}

/** performance.now() time until which a lease of `ttlMs` sent at `sentAt` is believed. */
export function leaseDeadline(sentAt, ttlMs, clockDrift) {
  const allowanceMs = Math.ceil(ttlMs * clockDrift);
  return sentAt + ttlMs - allowanceMs;
}

/**
 * Delay before retry `attempt` (0 = the first): with d = min(max, initial * 2^attempt), a value
 * in [d/2, d]. The random half keeps clients that failed together from retrying in lock-step.
 */
export function backoffDelay(initialMs, maxMs, attempt, randomFraction) {
  const full = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return full / 2 + (full / 2) * randomFraction;
}
