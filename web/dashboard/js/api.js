// The head's JSON API (api/v1/..., relative to the page, so a prefix added by a proxy works):
// GET with a timeout, the bearer token asked for once on a 401 and kept in sessionStorage (never
// in the URL), and failures as ApiError values a caller can show in one line. A page opened by
// `tessera dashboard` (".../#login=<ticket>") trades the one-time ticket for a session, kept
// like the token, before its first request.
// Main thread only; one ApiClient serves the whole page.

const TOKEN_KEY = 'tessera.token';
const LOGIN_HASH = /^#login=([0-9a-f]{64})$/;
const REQUEST_TIMEOUT_MS = 10000;

export class ApiError extends Error {
  // status: the HTTP status, or 0 when the head could not be reached.
  constructor(path, status, message) {
    super(message);
    this.name = 'ApiError';
    this.path = path;
    this.status = status;
  }
}

export function isAbort(error) {
  return Boolean(error) && error.name === 'AbortError';
}

function abortError() {
  return new DOMException('aborted', 'AbortError');
}

// Asks for the token in the page's <dialog>; one question at a time whoever asks.
class TokenPrompt {
  constructor(doc) {
    this.doc = doc;
    this.pending = null;
  }

  ask(rejected) {
    if (this.pending) return this.pending;
    const dialog = this.doc.getElementById('token-dialog');
    const form = this.doc.getElementById('token-form');
    const input = this.doc.getElementById('token-input');
    const note = this.doc.getElementById('token-note');
    note.textContent = rejected
      ? 'The head rejected the token: enter the cluster token again.'
      : 'The head answered 401: enter the cluster token (kept for this tab only), or open the '
        + 'dashboard with `tessera dashboard`.';
    this.pending = new Promise((resolve) => {
      const onSubmit = (event) => {
        event.preventDefault();
        const token = input.value.trim();
        if (!token) return;
        form.removeEventListener('submit', onSubmit);
        dialog.removeEventListener('cancel', onCancel);
        input.value = '';
        dialog.close();
        this.pending = null;
        resolve(token);
      };
      // Escape would close the dialog and leave every request waiting: keep it open.
      const onCancel = (event) => event.preventDefault();
      form.addEventListener('submit', onSubmit);
      dialog.addEventListener('cancel', onCancel);
    });
    if (!dialog.open) dialog.showModal();
    input.focus();
    return this.pending;
  }
}

function waitOrAbort(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortError());
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortError());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function firstLine(text) {
  const line = String(text || '').split('\n').find((l) => l.trim() !== '') || '';
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}

export class ApiClient {
  constructor({ doc = document, storage = window.sessionStorage, base = document.baseURI } = {}) {
    this.storage = storage;
    this.base = base;
    this.prompt = new TokenPrompt(doc);
  }

  get token() {
    try {
      return this.storage.getItem(TOKEN_KEY) || '';
    } catch {
      return '';
    }
  }

  set token(value) {
    try {
      this.storage.setItem(TOKEN_KEY, value);
    } catch {
      // Storage refused (private mode): the token lasts as long as this page.
    }
    this.memoryToken = value;
  }

  // When the address ends "#login=<ticket>": takes the ticket out of the address (and so of the
  // history) at once, trades it for a session (POST api/v1/sessions) and keeps the session as the
  // token. True when it did; otherwise the first 401 asks for the token as ever.
  async redeemLoginTicket(loc = window.location, hist = window.history) {
    const match = LOGIN_HASH.exec(loc.hash || '');
    if (!match) return false;
    hist.replaceState(null, '', `${loc.pathname}${loc.search}#/overview`);
    try {
      const response = await fetch(this.url('sessions'), {
        method: 'POST',
        headers: { Accept: 'application/json', 'X-Tessera-Login-Ticket': match[1] },
        cache: 'no-store',
        credentials: 'same-origin',
      });
      if (!response.ok) return false;
      const body = await response.json();
      if (typeof body.session !== 'string' || !body.session) return false;
      this.token = body.session;
      return true;
    } catch {
      return false;
    }
  }

  url(path, query) {
    const url = new URL(`api/v1/${path.replace(/^\/+/, '')}`, this.base);
    for (const [key, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value));
    }
    return url;
  }

  // GET api/v1/<path>?<query> -> parsed JSON. Rejects with ApiError (or an AbortError when
  // `signal` aborts); waits for the token dialog on a 401.
  async get(path, { query, signal } = {}) {
    const label = `/api/v1/${path.replace(/^\/+/, '')}`;
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const token = this.token || this.memoryToken || '';
      const response = await this.fetchOnce(label, this.url(path, query), token, signal);
      if (response.status === 401) {
        const fresh = await waitOrAbort(this.prompt.ask(Boolean(token)), signal);
        this.token = fresh;
        continue;
      }
      let text;
      try {
        text = await response.text();
      } catch (error) {
        if (isAbort(error)) throw error;
        throw new ApiError(label, 0, `the answer to ${label} was cut off`);
      }
      if (!response.ok) {
        let detail = firstLine(text);
        try {
          const body = JSON.parse(text);
          if (body && typeof body.error === 'string') detail = body.error;
          else if (body && typeof body.message === 'string') detail = body.message;
        } catch {
          // Not JSON: the first line of the text says it.
        }
        throw new ApiError(label, response.status,
          `the head answered HTTP ${response.status} for ${label}${detail ? `: ${detail}` : ''}`);
      }
      try {
        return JSON.parse(text);
      } catch {
        throw new ApiError(label, response.status, `the head sent ${label} as something other than JSON`);
      }
    }
    throw new ApiError(label, 401, `the head keeps rejecting the token for ${label}`);
  }

  async fetchOnce(label, url, token, signal) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    const onAbort = () => controller.abort();
    if (signal) {
      if (signal.aborted) controller.abort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    try {
      return await fetch(url, { headers, signal: controller.signal, cache: 'no-store', credentials: 'same-origin' });
    } catch (error) {
      if (signal && signal.aborted) throw abortError();
      if (isAbort(error)) {
        throw new ApiError(label, 0, `the head did not answer ${label} within ${REQUEST_TIMEOUT_MS / 1000} s`);
      }
      throw new ApiError(label, 0, `cannot reach the head at ${new URL(url).host}`);
    } finally {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }

  // Every item of a paged list (ListNodesResponse and friends): follows next_page_token with
  // ?page_token= while the head gives one, and returns the first page's object with each of
  // `fields` (a name or a list: ListSlices pages through groups, then slices) holding every item.
  async getAll(path, fields, { signal } = {}) {
    const names = Array.isArray(fields) ? fields : [fields];
    const first = await this.get(path, { signal });
    const merged = { ...first, next_page_token: '' };
    for (const name of names) merged[name] = Array.isArray(first[name]) ? [...first[name]] : [];
    let token = first.next_page_token || '';
    const seen = new Set();
    while (token && !seen.has(token) && seen.size < 100) {
      seen.add(token);
      const page = await this.get(path, { signal, query: { page_token: token } });
      for (const name of names) if (Array.isArray(page[name])) merged[name].push(...page[name]);
      token = page.next_page_token || '';
    }
    return merged;
  }
}
