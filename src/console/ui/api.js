// The console's calls of dlockd's JSON API (docs/contracts/C3-http.md), same origin only. The
// bearer token (C6) lives in sessionStorage: this tab only, gone when it closes.

const TOKEN_KEY = 'dlock.console.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// An answer that is not 2xx: the HTTP status and C3's error object (code, message, ...).
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || '';
    this.details = error;
  }
}

// A path with its query: `parts` are path segments (each percent-encoded, so a key with '/' is
// one segment), `query` an object of parameters (empty ones left out).
export function path(parts, query = {}) {
  const encoded = parts.map((part) => encodeURIComponent(part)).join('/');
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  }
  const search = params.toString();
  return '/' + encoded + (search ? '?' + search : '');
}

export async function call(method, target, { allow = [] } = {}) {
  const headers = { Accept: 'application/json' };
  const bearer = token();
  if (bearer) headers.Authorization = 'Bearer ' + bearer;
  const response = await fetch(target, {
    method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error',
  });
  const text = await response.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = { error: { code: 'bad_answer', message: `not JSON: HTTP ${response.status}` } };
    }
  }
  if (response.ok || allow.includes(response.status)) return { status: response.status, body };
  throw new ApiError(response.status, (body && body.error) || {});
}

export const get = (target, options) => call('GET', target, options);
export const post = (target, options) => call('POST', target, options);

// Every page of a paged list (GET /v1/sessions: `next`), up to `max` items.
export async function allPages(parts, query, member, max = 1000) {
  const items = [];
  let after = '';
  for (;;) {
    const { body } = await get(path(parts, { ...query, after, limit: 100 }));
    items.push(...(body[member] || []));
    if (!body.next || items.length >= max) return { items, more: Boolean(body.next) };
    after = body.next;
  }
}
