// A scripted HTTP server for unit tests (no dlockd): `handle(request)` answers each request.
import http from 'node:http';

/**
 * Starts a server on a free loopback port. `handle({ method, url, body })` returns
 * { status, body (an object), headers } or 'hang' (no answer) or 'drop' (close the connection).
 */
export async function fakeServer(handle) {
  const requests = [];
  const sockets = new Set();
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const seen = { method: request.method, url: request.url, body: text ? JSON.parse(text) : {},
        headers: request.headers };
      requests.push(seen);
      const answer = handle(seen);
      if (answer === 'hang') return;
      if (answer === 'drop') {
        request.socket.destroy();
        return;
      }
      const body = answer.body === undefined ? '' : JSON.stringify(answer.body);
      response.writeHead(answer.status, { 'content-type': 'application/json',
        ...(answer.headers ?? {}) });
      response.end(body);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export const error = (status, code, extra = {}) =>
  ({ status, body: { error: { code, message: `${code} (fake)`, ...extra } } });

/** A dlockd that opens sessions and grants every acquire, answering `ttlMs` for each. */
export function granting({ ttlMs = 0, token = 7 } = {}) {
  return ({ method, url, body }) => {
    if (method === 'POST' && url === '/v1/sessions') {
      return { status: 201,
        body: { session_id: 's1', owner: body.owner, ttl_ms: body.ttl_ms ?? 30000 } };
    }
    if (method === 'POST' && url.endsWith('/keepalive')) {
      return { status: 200, body: { ttl_ms: 30000 } };
    }
    if (method === 'POST' && /\/(acquire|extend)/.test(url)) {
      return { status: 200, body: { key: 'k', fencing_token: token,
        ttl_ms: ttlMs || body.ttl_ms || 30000, lease: body.lease ?? 'ttl', mode: 'exclusive' } };
    }
    if (method === 'DELETE') return { status: 204 };
    return error(404, 'not_found');
  };
}
