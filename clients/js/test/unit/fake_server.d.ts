// Types of fake_server.js for the typed tests (test/types).
export interface Seen {
  method: string;
  url: string;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> } | 'hang' | 'drop';
export interface FakeServer {
  url: string;
  requests: Seen[];
  close(): Promise<void>;
}
export declare function fakeServer(handle: (seen: Seen) => Answer): Promise<FakeServer>;
export declare function error(status: number, code: string, extra?: object): Answer;
export declare function granting(options?: { ttlMs?: number; token?: number }): (seen: Seen) => Answer;
