// dlock: the TypeScript/JavaScript client of dlockd, a distributed lock service with fencing
// tokens. Node 20's standard library only. See clients/js/README.md and docs/clients.md.
//
//   import { Client } from 'dlock';
//   const client = new Client({ servers: ['http://127.0.0.1:7070'] });   // or DLOCK_SERVER
//   await using lock = await client.lock('payouts/batch-17', { ttl: '10s' });
//   lock.check();                                   // throws LockLost once not trusted
//   await ledger.write(batch, { fencingToken: lock.token, signal: lock.signal });
export { Client } from './client.js';
export { Session, Lock, Leadership, defaultOwner } from './session.js';
export {
  DEFAULT_CLOCK_DRIFT, durationMs, leaseDeadline, trustedTtlMs,
} from './lease.js';
export {
  Cancelled, Conflict, DlockError, Held, Internal, InvalidArgument, LockLost, NotLeader,
  PermissionDenied, ResourceExhausted, SessionNotFound, TlsError, Unauthenticated, Unavailable,
  UnknownOutcome,
} from './errors.js';
