// Times and durations as an operator reads them. The server's times are its backend's clock
// (C3 "Times"); ages and remaining times are counted against this browser's clock.

export function since(iso, now = Date.now()) {
  const at = Date.parse(iso);
  return Number.isNaN(at) ? '' : duration(now - at);
}

export function until(iso, now = Date.now()) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return '';
  const left = at - now;
  return left <= 0 ? 'due' : duration(left);
}

export function duration(ms) {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export function clock(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? '' : at.toISOString().replace('T', ' ').replace('Z', ' UTC');
}
