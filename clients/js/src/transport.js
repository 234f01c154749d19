// One dlockd server: HTTP/1.1 keep-alive connections (node:http / node:https), TLS, and the
// three ways a request can fail (never sent, maybe applied, TLS handshake refused).
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { Cancelled, InvalidArgument } from './errors.js';

export const NOT_SENT = 'not_sent'; // could not connect: the request never left
export const MAYBE_SENT = 'maybe_sent'; // lost after the request was written: outcome unknown
export const TLS_FAILED = 'tls'; // handshake refused: configuration, not an outage

export class TransportError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'TransportError';
    this.kind = kind;
  }
}

// Certificate verification failures (OpenSSL's names, as Node reports them in `code`).
const CERT_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID', 'CERT_SIGNATURE_FAILURE', 'CERT_UNTRUSTED', 'CERT_REJECTED',
  'HOSTNAME_MISMATCH', 'INVALID_CA', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
]);

function isTlsFailure(error) {
  const code = typeof error?.code === 'string' ? error.code : '';
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || CERT_CODES.has(code) ||
    error?.library === 'SSL routines';
}

/** { https, host, port, prefix } of `http://host:port[/prefix]`. */
export function parseServerUrl(url) {
  let parsed;
  try {
    parsed = new URL(url.trim());
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') ||
      !parsed.hostname) {
    throw new InvalidArgument(`server: ${JSON.stringify(url)} is not an http:// or https:// URL`,
      { field: 'server' });
  }
  const secure = parsed.protocol === 'https:';
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  return {
    https: secure, host, port: Number(parsed.port) || (secure ? 443 : 80),
    prefix: parsed.pathname.replace(/\/+$/, ''),
  };
}

/**
 * TLS options: TLS 1.2 or later, the server's chain verified (`caFile` or Node's trust store)
 * and its name checked; `certFile`/`keyFile` present a client certificate (mTLS).
 */
export function loadTlsOptions(caFile, certFile, keyFile) {
  const read = (path) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new InvalidArgument(`tls: cannot load the TLS file ${JSON.stringify(path)}: ` +
        `${error.code ?? error.message}`, { field: 'tls' });
    }
  };
  const options = { minVersion: 'TLSv1.2', rejectUnauthorized: true };
  if (caFile) options.ca = read(caFile);
  if (certFile) {
    options.cert = read(certFile);
    options.key = read(keyFile || certFile);
  }
  return options;
}

/** Sends requests to one server, over pooled keep-alive connections. */
export class Transport {
  constructor(url, tlsOptions) {
    this.url = url;
    Object.assign(this, parseServerUrl(url));
    const Agent = this.https ? https.Agent : http.Agent;
    const tls = this.https ? tlsOptions ?? loadTlsOptions() : {};
    this.agent = new Agent({ keepAlive: true, maxFreeSockets: 8, ...tls });
    // For requests that must not be sent twice: a fresh connection, so that a failure is never
    // the server having closed an idle one.
    this.freshAgent = new Agent({ keepAlive: false, ...tls });
  }

  close() {
    this.agent.destroy();
    this.freshAgent.destroy();
  }

  /**
   * One exchange bounded by `timeoutMs`: resolves to { status, body, retryAfterMs }; rejects with
   * a TransportError, or Cancelled when `signal` aborts (the connection is closed, so a waiting
   * acquire leaves the server's queue).
   */
  async send(method, target, body, headers, timeoutMs, signal, fresh = false) {
    if (!fresh) {
      try {
        return await this.#exchange(method, target, body, headers, timeoutMs, signal, this.agent);
      } catch (error) {
        // The server closed the idle connection as the request was written: it was not read, so
        // it goes again on a fresh connection.
        if (!(error instanceof StaleConnection)) throw error;
      }
    }
    try {
      return await this.#exchange(method, target, body, headers, timeoutMs, signal,
        this.freshAgent);
    } catch (error) {
      if (error instanceof StaleConnection) throw new TransportError(MAYBE_SENT, error.message);
      throw error;
    }
  }

  #exchange(method, target, body, headers, timeoutMs, signal, agent) {
    return new Promise((resolve, reject) => {
      const what = `${method} ${target}`;
      if (signal?.aborted) {
        reject(new Cancelled(`${what}: cancelled`));
        return;
      }
      const allHeaders = { host: `${this.host}:${this.port}`, ...headers };
      if (body !== undefined && body !== null) {
        allHeaders['content-type'] = 'application/json';
        allHeaders['content-length'] = Buffer.byteLength(body);
      }
      const request = (this.https ? https : http).request({
        host: this.host, port: this.port, method, path: this.prefix + target,
        headers: allHeaders, agent,
      });
      let settled = false;
      let connected = false; // TCP (and TLS) up: what follows may have reached the server
      let answered = false; // the status line arrived
      const finish = (callback, value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        callback(value);
      };
      const onAbort = () => {
        finish(reject, new Cancelled(`${what}: cancelled`));
        request.destroy();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => {
        const kind = connected ? MAYBE_SENT : NOT_SENT;
        finish(reject, new TransportError(kind,
          `${this.url}: no answer within ${timeoutMs / 1000} s`));
        request.destroy();
      }, Math.max(1, timeoutMs));
      request.on('socket', (socket) => {
        if (request.reusedSocket) {
          connected = true;
          return;
        }
        socket.once(this.https ? 'secureConnect' : 'connect', () => { connected = true; });
      });
      request.on('error', (error) => {
        let failure;
        if (isTlsFailure(error)) {
          // Under TLS 1.3 a refused client certificate arrives as an alert after the handshake:
          // configuration, not an outage.
          failure = new TransportError(TLS_FAILED, `TLS with ${this.url}: ${error.message}`);
        } else if (request.reusedSocket && !answered &&
                   ['ECONNRESET', 'EPIPE', 'ECONNABORTED'].includes(error.code)) {
          failure = new StaleConnection(`${this.url}: ${error.message}`);
        } else {
          failure = new TransportError(connected ? MAYBE_SENT : NOT_SENT,
            `${connected ? '' : 'cannot connect to '}${this.url}: ${error.code ?? error.message}`);
        }
        finish(reject, failure);
      });
      request.on('response', (response) => {
        answered = true;
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('error', (error) => finish(reject,
          new TransportError(MAYBE_SENT, `${this.url}: ${error.code ?? error.message}`)));
        response.on('close', () => {
          if (!response.complete) {
            finish(reject, new TransportError(MAYBE_SENT, `${this.url}: the answer was cut off`));
          }
        });
        response.on('end', () => {
          const value = response.headers['retry-after'];
          const retryAfterMs = typeof value === 'string' && /^\s*\d+\s*$/.test(value)
            ? Number(value) * 1000 : undefined;
          finish(resolve, {
            status: response.statusCode, body: Buffer.concat(chunks).toString('utf8'),
            retryAfterMs,
          });
        });
      });
      request.end(body ?? undefined);
    });
  }
}

/** Sending failed on a pooled connection, most likely one the server had closed. */
class StaleConnection extends Error {}
