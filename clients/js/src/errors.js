// Typed errors of the dlock client, one per error code of dlockd's HTTP API (contract C3).
//
// "Held" is a decision, not a failure: Session.acquire resolves to null for it, and only the
// forms that have no value to return (Client.lock, Session.lock) throw Held. A server or backend
// that cannot answer is always an error (Unavailable and its subclasses), never Held.

/** Base of every error this package throws. `code` is the C3 wire code when known. */
export class DlockError extends Error {
  static code = 'internal';
  /** Whether retrying the same call later may succeed (an outage, a limit). */
  static retryable = false;

  constructor(message, { field, status, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = new.target.code;
    this.retryable = new.target.retryable;
    this.field = field;
    this.status = status;
  }
}

/** 400 invalid_argument (or 404/405/413): `field` names the bad input. */
export class InvalidArgument extends DlockError {
  static code = 'invalid_argument';
}

/** The TLS handshake failed (certificate not verified, wrong name, refused client cert). */
export class TlsError extends InvalidArgument {
  static code = 'tls';
}

/** 401 unauthenticated / unauthorized: the bearer token is missing or unknown. */
export class Unauthenticated extends DlockError {
  static code = 'unauthenticated';
}

/** 403 permission_denied / forbidden: the principal lacks the role. */
export class PermissionDenied extends DlockError {
  static code = 'permission_denied';
}

/** 404 session_not_found: the session expired or was closed; it is never revived. */
export class SessionNotFound extends DlockError {
  static code = 'session_not_found';
}

/**
 * 409 lock_lost (or 404 lock_not_found on extend/release), or a lock whose client deadline
 * passed: stop acting on it.
 */
export class LockLost extends DlockError {
  static code = 'lock_lost';
}

/**
 * Not granted within the wait (409 held). Only Client.lock and Session.lock throw it; the
 * message names the key and never a holder. `delayedUntil` (the backend's time, RFC 3339) is set
 * when the server said a lock-delay keeps the name ungranted.
 */
export class Held extends DlockError {
  static code = 'held';

  constructor(key, waitMs = 0, delayedUntil = undefined) {
    const waited = waitMs > 0 ? ` after waiting ${waitMs / 1000} s` : '';
    super(delayedUntil
      ? `${key} is kept ungranted by a lock-delay until ${delayedUntil}${waited}`
      : `${key} is held by another session${waited}`, { status: 409 });
    this.key = key;
    this.delayedUntil = delayedUntil;
  }
}

/** 409 conflict: a semaphore's `limit` differs from the one its holders agreed on. */
export class Conflict extends DlockError {
  static code = 'conflict';
}

/** 429 too_many_requests after retries: a server limit or its bad-token throttle. */
export class ResourceExhausted extends DlockError {
  static code = 'too_many_requests';
  static retryable = true;
}

/** 503/502/504 or no server reachable, after retries on every server. Never "held". */
export class Unavailable extends DlockError {
  static code = 'unavailable';
  static retryable = true;
}

/** 503 not_leader: the backend has no leader (etcd), after retries. */
export class NotLeader extends Unavailable {
  static code = 'not_leader';
}

/** The connection was lost after the request was sent: it may or may not have been applied. */
export class UnknownOutcome extends Unavailable {
  static code = 'unknown_outcome';
}

/** The caller's AbortSignal ended the call before it finished. */
export class Cancelled extends DlockError {
  static code = 'cancelled';
}

/** 500, or an answer this client cannot read. */
export class Internal extends DlockError {
  static code = 'internal';
}

// The C3 error codes and the class each maps to. "held" is answered as a decision where it is
// one (acquire, campaign); elsewhere it is the Held error.
const BY_CODE = new Map([
  ['invalid_argument', InvalidArgument],
  ['payload_too_large', InvalidArgument],
  ['not_found', InvalidArgument],
  ['method_not_allowed', InvalidArgument],
  ['unauthenticated', Unauthenticated],
  ['unauthorized', Unauthenticated],
  ['permission_denied', PermissionDenied],
  ['forbidden', PermissionDenied],
  ['session_not_found', SessionNotFound],
  ['lock_lost', LockLost],
  ['lock_not_found', LockLost],
  ['conflict', Conflict],
  ['too_many_requests', ResourceExhausted],
  ['unavailable', Unavailable],
  ['not_leader', NotLeader],
  ['internal', Internal],
]);

const BY_STATUS = new Map([
  [400, InvalidArgument],
  [401, Unauthenticated],
  [403, PermissionDenied],
  [413, InvalidArgument],
  [429, ResourceExhausted],
  [502, Unavailable],
  [503, Unavailable],
  [504, Unavailable],
]);

/** The `error` object of a C3 error body; {} when it is not one. */
export function errorObject(body) {
  try {
    const inner = JSON.parse(body)?.error;
    return inner !== null && typeof inner === 'object' && !Array.isArray(inner) ? inner : {};
  } catch {
    return {};
  }
}

/** The typed error for an answer that is not the route's success. */
export function errorFromResponse(status, body, what, key = '') {
  const inner = errorObject(body);
  const code = typeof inner.code === 'string' ? inner.code : '';
  let message = typeof inner.message === 'string' ? inner.message : '';
  let field = typeof inner.field === 'string' ? inner.field : undefined;
  if (!message) {
    // A hint of what answered (a proxy, a wrong port) without flooding the message.
    const text = body.slice(0, 200);
    message = `HTTP ${status}` + (text ? `: ${text}` : '');
  }
  if (code === 'held') {
    const until = typeof inner.delayed_until === 'string' ? inner.delayed_until : undefined;
    return new Held(key || what, 0, until);
  }
  let Kind = BY_CODE.get(code) ?? BY_STATUS.get(status);
  if (Kind === undefined) Kind = status >= 400 && status < 500 ? InvalidArgument : Internal;
  if (Kind === Unauthenticated) {
    message += ' (a bearer token is missing or unknown: see DLOCK_TOKEN)';
  }
  if ((Kind === InvalidArgument || Kind === Conflict) && field === undefined) {
    field = status === 413 ? 'body' : 'request';
  }
  return new Kind(`${what}: ${message}`, { field, status });
}
