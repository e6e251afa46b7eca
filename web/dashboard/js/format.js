// Turning API values into words: resource amounts in their units, bytes, times, durations, and
// state enums ("ALIVE", "RUNNING") into a short word and a colour tone.
// Pure functions.

// Resources measured in bytes; every other resource is a count (CPU, GPU, TPU, markers).
const BYTE_RESOURCES = new Set(['memory', 'object_store_memory']);

export function isByteResource(name) {
  return BYTE_RESOURCES.has(name) || /(^|_)memory$/.test(name);
}

// A JSON number (or an int64 sent as a string) -> number; anything else -> null.
export function num(value) {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

export function formatBytes(value) {
  const n = num(value);
  if (n === null) return 'n/a';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  const digits = u === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  const text = v.toFixed(digits).replace(/\.0+$|(\.\d*?)0+$/, '$1');
  return `${n < 0 ? '-' : ''}${text} ${units[u]}`;
}

export function formatCount(value) {
  const n = num(value);
  if (n === null) return 'n/a';
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  return String(Math.round(n * 10000) / 10000);
}

export function formatAmount(resource, value) {
  return isByteResource(resource) ? formatBytes(value) : formatCount(value);
}

export function formatPercent(ratio) {
  const n = num(ratio);
  if (n === null) return 'n/a';
  return `${Math.round(n * 100)}%`;
}

const pad2 = (n) => String(n).padStart(2, '0');

// Wall-clock time of a Unix time in ms: "14:03:27" today, "2024-12-02 14:03" otherwise.
export function formatTime(ms, now = Date.now()) {
  const n = num(ms);
  if (n === null || n <= 0) return '—';
  const d = new Date(n);
  const time = `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  if (Math.abs(now - n) < 20 * 3600 * 1000) return time;
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${time.slice(0, 5)}`;
}

export function formatDuration(ms) {
  const n = num(ms);
  if (n === null || n < 0) return '—';
  if (n < 1000) return `${Math.round(n)} ms`;
  const secs = n / 1000;
  if (secs < 60) return `${secs < 10 ? secs.toFixed(1) : Math.round(secs)} s`;
  const total = Math.round(secs);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h ${pad2(m)}m`;
  return `${m}m ${pad2(s)}s`;
}

// "ALIVE" -> "alive", "infeasible" -> "infeasible", "RUNNING" -> "running".
export function stateWord(state) {
  if (!state) return 'unknown';
  const text = String(state);
  const match = /_(?:STATE|STATUS)_(.+)$/.exec(text);
  return (match ? match[1] : text).toLowerCase().replace(/_/g, ' ');
}

const TONES = {
  good: ['alive', 'created', 'reserved', 'running', 'succeeded', 'placed', 'intact', 'healthy'],
  warn: ['pending', 'draining', 'rescheduling', 'restarting', 'starting',
    // Serve's words (applications, deployments, replicas, proxies).
    'deploying', 'updating', 'upscaling', 'downscaling', 'recovering', 'stopping', 'deleting',
    'pending migration'],
  bad: ['dead', 'failed', 'infeasible', 'broken', 'missing', 'unhealthy', 'deploy failed'],
};

export function stateTone(state) {
  const word = stateWord(state);
  for (const [tone, words] of Object.entries(TONES)) {
    if (words.includes(word)) return tone;
  }
  return 'idle';
}

export function plural(n, one, many = `${one}s`) {
  return `${formatCount(n)} ${n === 1 ? one : many}`;
}
