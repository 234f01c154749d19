// Types of the fencing guard (src/guard.js): `import { admit } from 'dlock/guard'`.
import { DlockError } from './index.js';

/** What the guard needs of a database client: node-postgres' Client and PoolClient have it. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

/** SQLSTATE DL001: the resource is bound to another lock key (configuration, never a decision). */
export declare class FenceKeyConflict extends DlockError {}

export type FencingToken = number | bigint;

/** true: admitted (write, then COMMIT); false: stale (roll back, do not write). */
export declare function admit(db: Queryable, resource: string, token: FencingToken,
  lockKey: string): Promise<boolean>;
/** The reader form: a writer must be above every admitted reader's token. */
export declare function admitRead(db: Queryable, resource: string, token: FencingToken,
  lockKey: string): Promise<boolean>;
export declare function bind(db: Queryable, resource: string, lockKey: string): Promise<void>;

export interface FenceOptions {
  resource: string;
  token: FencingToken;
  lockKey: string;
  /** Admit as a reader (a shared hold of a read-write lock). */
  read?: boolean;
}

/** BEGIN; admit; write and COMMIT when admitted, else ROLLBACK. Whether it was admitted. */
export declare function withFence<D extends Queryable>(db: D, options: FenceOptions,
  write: (db: D) => Promise<unknown>): Promise<boolean>;
