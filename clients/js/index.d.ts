// Type declarations of the dlock client (src/*.js), written by hand and checked by tsc against
// the typed tests (test/types/). See README.md.

/** "500ms", "10s", "5m", "1h", or a number of seconds. */
export type Duration = string | number;

export interface ClientOptions {
  /** Server URLs sharing one backend (failover), or a comma-separated string; DLOCK_SERVER. */
  servers?: string[] | string;
  /** Bearer token; DLOCK_TOKEN. */
  token?: string;
  /** A file whose first line is the bearer token; DLOCK_TOKEN_FILE. */
  tokenFile?: string;
  /** Token for revoke and clear-delay; DLOCK_ADMIN_TOKEN. */
  adminToken?: string;
  /** CA bundle (PEM) that verifies the servers; DLOCK_CACERT (else Node's trust store). */
  caFile?: string;
  /** Client certificate and key (mTLS); DLOCK_CERT, DLOCK_KEY. */
  certFile?: string;
  keyFile?: string;
  /** Clock-rate allowance, a fraction in [0, 0.5); DLOCK_CLOCK_DRIFT; default 0.01. */
  clockDrift?: number;
  /** One request's bound (a waiting request gets its wait on top); default 10s. */
  requestTimeout?: Duration;
  /** How long a call retries an unavailable server; default 15s. */
  retryBudget?: Duration;
  backoffInitial?: Duration;
  backoffMax?: Duration;
  /** Default namespace of keys; DLOCK_NAMESPACE. */
  namespace?: string;
}

export type LostCallback = (reason: string) => void;

export interface SessionOptions {
  owner?: string;
  /** The session's TTL; default: the server's (30 s). */
  ttl?: Duration;
  /** Lock-delay (C3): after this session's lock is revoked or expires, its key stays ungranted. */
  lockDelay?: Duration;
  onLost?: LostCallback;
  signal?: AbortSignal;
}

export interface AcquireOptions {
  /** The lock's lease; default: the server's (30 s). */
  ttl?: Duration;
  /** How long to wait while it is held; default 0 (answer at once). */
  wait?: Duration;
  ns?: string;
  /** Extend every TTL/3 in the background; default true. */
  autoExtend?: boolean;
  mode?: 'exclusive' | 'shared';
  /** N > 0: one of N permits of the semaphore `key`. */
  permits?: number;
  /** A lock that lives as long as its session (no TTL of its own). */
  sessionBound?: boolean;
  /** Aborting it ends a waiting acquire with Cancelled (the server drops the waiter at once). */
  signal?: AbortSignal;
  onLost?: LostCallback;
}

export interface ClientLockOptions extends AcquireOptions {
  /** TTL of the lock's own session. */
  sessionTtl?: Duration;
  owner?: string;
}

export interface LockInfo {
  key: string;
  fencingToken: number;
  owner: string;
  mode: string;
  lease: string;
  acquiredAt: string;
  expiresAt: string;
  sessionId?: string;
  limit?: number;
  value?: string;
}

export interface SemaphoreInfo {
  name: string;
  /** 0 while no permit is held. */
  limit: number;
  holders: LockInfo[];
}

export interface LeaderInfo {
  name: string;
  owner: string;
  value: string;
  fencingToken: number;
  acquiredAt: string;
  expiresAt: string;
  sessionId?: string;
}

export interface KeyDelay {
  key: string;
  delayedUntil: string;
}

export interface ReadOptions {
  ns?: string;
  signal?: AbortSignal;
}

export interface ListOptions {
  prefix?: string;
  limit?: number;
  ns?: string;
}

export interface ObserveOptions extends ReadOptions {
  /** Answer once a leader with a greater token leads; null: answer now. Default 0. */
  afterToken?: number | null;
  /** With afterToken: also answer when that leader proclaims another value. */
  afterValue?: string;
  wait?: Duration;
}

export declare class Client implements AsyncDisposable {
  constructor(options?: ClientOptions);
  readonly servers: string[];
  readonly clockDrift: number;
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
  session(options?: SessionOptions): Promise<Session>;
  /** A lock in a session of its own, closed with the lock. Throws Held when not granted. */
  lock(key: string, options?: ClientLockOptions): Promise<Lock>;
  get(key: string, options?: ReadOptions): Promise<LockInfo | null>;
  holders(key: string, options?: ReadOptions): Promise<LockInfo[]>;
  list(options?: ListOptions): Promise<LockInfo[]>;
  delays(options?: ListOptions): Promise<KeyDelay[]>;
  semaphore(name: string, options?: { ns?: string }): Promise<SemaphoreInfo>;
  leader(name: string, options?: ReadOptions): Promise<LeaderInfo | null>;
  observe(name: string, options?: ObserveOptions): Promise<LeaderInfo | null>;
  clearDelay(key: string, options?: { ns?: string }): Promise<boolean>;
  revoke(key: string, options?: { ns?: string }): Promise<Record<string, unknown>>;
}

export declare class Session implements AsyncDisposable {
  private constructor();
  readonly client: Client;
  readonly id: string;
  readonly owner: string;
  /** The TTL trusted: min(asked, answered), in milliseconds. */
  readonly ttlMs: number;
  readonly lockDelayMs: number;
  /** Aborts once the session is lost; its reason is a LockLost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  readonly lostReason: string;
  /** performance.now() milliseconds until which the session is trusted. */
  readonly deadline: number;
  readonly valid: boolean;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  /** The Lock, or null when still held after `wait`. */
  acquire(key: string, options?: AcquireOptions): Promise<Lock | null>;
  /** The Lock; throws Held when still held after `wait`. */
  lock(key: string, options?: AcquireOptions): Promise<Lock>;
  /** The leadership, or null when another session still leads after `wait`. */
  campaign(name: string, value: string,
    options?: { wait?: Duration; ns?: string; signal?: AbortSignal; onLost?: LostCallback }):
    Promise<Leadership | null>;
}

export declare class Lock implements AsyncDisposable {
  protected constructor();
  readonly session: Session;
  readonly key: string;
  readonly ns: string | undefined;
  /** The fencing token: pass it to every write the lock protects. */
  readonly token: number;
  readonly mode: 'exclusive' | 'shared' | 'permit';
  readonly limit: number | undefined;
  readonly sessionBound: boolean;
  readonly ttlMs: number;
  /** Aborts once the lock is lost or no longer trusted; its reason is a LockLost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  readonly lostReason: string;
  /** performance.now() milliseconds until which the lock is trusted (capped by its session). */
  readonly deadline: number;
  readonly valid: boolean;
  /** Throws LockLost unless the lock is still trusted: call it before each write. */
  check(): void;
  extend(ttl?: Duration): Promise<void>;
  /** Releases; throws LockLost when it was already lost. */
  release(): Promise<void>;
  /** Releases; throws LockLost when the lock was lost while held. */
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class Leadership extends Lock {
  readonly name: string;
  value: string;
  proclaim(value: string): Promise<void>;
  resign(): Promise<void>;
}

export declare function defaultOwner(): string;
export declare const DEFAULT_CLOCK_DRIFT: number;
export declare function durationMs(value: Duration | null | undefined, field?: string): number;
/** min(asked, answered); the answer when nothing was asked. */
export declare function trustedTtlMs(askedMs: number, answeredMs: number): number;
/** sentAt + ttlMs - ceil(ttlMs * clockDrift). */
export declare function leaseDeadline(sentAt: number, ttlMs: number, clockDrift: number): number;

export declare class DlockError extends Error {
  /** The C3 wire code (or "tls", "cancelled", "unknown_outcome"). */
  readonly code: string;
  readonly retryable: boolean;
  readonly field: string | undefined;
  readonly status: number | undefined;
}
export declare class InvalidArgument extends DlockError {}
export declare class TlsError extends InvalidArgument {}
export declare class Unauthenticated extends DlockError {}
export declare class PermissionDenied extends DlockError {}
export declare class SessionNotFound extends DlockError {}
export declare class LockLost extends DlockError {}
export declare class Held extends DlockError {
  readonly key: string;
  /** The backend's time (RFC 3339) a lock-delay keeps the name ungranted until, if that is why. */
  readonly delayedUntil: string | undefined;
}
export declare class Conflict extends DlockError {}
export declare class ResourceExhausted extends DlockError {}
export declare class Unavailable extends DlockError {}
export declare class NotLeader extends Unavailable {}
export declare class UnknownOutcome extends Unavailable {}
export declare class Cancelled extends DlockError {}
export declare class Internal extends DlockError {}
