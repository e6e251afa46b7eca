// The dashboard's shell: hash routing (#/overview, #/nodes/<id>, ...), one page at a time
// polling only its own endpoints every 2 s (the next poll starts 2 s after the last one ended,
// so polls never overlap), the one-line banner when the head cannot be reached, and the
// "updated" stamp. Main thread only.

import { ApiClient, isAbort } from './api.js';
import { setText, clear } from './dom.js';
import { formatTime } from './format.js';
import { createOverviewPage } from './pages/overview.js';
import { createNodesPage } from './pages/nodes.js';
import { createNodeDetailPage } from './pages/node_detail.js';
import { createSlicesPage } from './pages/slices.js';
import { createReservationsPage } from './pages/reservations.js';
import { createJobsPage } from './pages/jobs.js';
import { createJobDetailPage } from './pages/job_detail.js';
import { createActorsPage } from './pages/actors.js';
import { createServePage } from './pages/serve.js';
import { createEventsPage } from './pages/events.js';

const POLL_MS = 2000;

// pattern over the path after "#/"; the captures are the page's arguments.
const ROUTES = [
  { pattern: /^overview$/, nav: 'overview', create: createOverviewPage },
  { pattern: /^nodes$/, nav: 'nodes', create: createNodesPage },
  { pattern: /^nodes\/(.+)$/, nav: 'nodes', create: createNodeDetailPage },
  { pattern: /^slices$/, nav: 'slices', create: createSlicesPage },
  { pattern: /^(?:reservations|placement-groups)$/, nav: 'reservations', create: createReservationsPage },
  { pattern: /^jobs$/, nav: 'jobs', create: createJobsPage },
  { pattern: /^jobs\/(.+)$/, nav: 'jobs', create: createJobDetailPage },
  { pattern: /^actors$/, nav: 'actors', create: createActorsPage },
  { pattern: /^serve$/, nav: 'serve', create: createServePage },
  { pattern: /^events$/, nav: 'events', create: createEventsPage },
];

function parseHash(hash) {
  const raw = hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const query = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  return { path: path.replace(/\/+$/, ''), query };
}

function decodeArg(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

class App {
  constructor() {
    this.api = new ApiClient();
    this.main = document.getElementById('page');
    this.banner = document.getElementById('banner');
    this.updated = document.getElementById('updated');
    this.page = null;
    this.generation = 0;
    this.timer = null;
    this.abort = null;
    this.pendingNow = false;
  }

  async start() {
    await this.api.redeemLoginTicket();
    window.addEventListener('hashchange', () => this.route());
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && this.page) this.pollSoon(0);
    });
    this.route();
  }

  route() {
    const { path, query } = parseHash(window.location.hash);
    let match = null;
    let route = null;
    for (const r of ROUTES) {
      match = r.pattern.exec(path);
      if (match) {
        route = r;
        break;
      }
    }
    if (!route) {
      window.location.replace('#/overview');
      return;
    }
    this.stopPage();
    const generation = this.generation;
    const ctx = {
      api: this.api,
      args: match.slice(1).map(decodeArg),
      query,
      // A page asks for an immediate poll (after the user changed what it shows).
      refreshNow: () => {
        if (generation === this.generation) this.pollSoon(0);
      },
    };
    for (const link of document.querySelectorAll('[data-nav]')) {
      if (link.dataset.nav === route.nav) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    this.page = route.create(ctx);
    document.title = `${this.page.title} · Tessera`;
    clear(this.main);
    this.main.appendChild(this.page.el);
    this.main.dataset.state = 'loading';
    this.main.dataset.page = route.nav;
    this.main.dataset.route = window.location.hash;
    this.pollSoon(0);
  }

  stopPage() {
    this.generation += 1;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.abort) this.abort.abort();
    this.abort = null;
    if (this.page && this.page.dispose) {
      try {
        this.page.dispose();
      } catch (error) {
        console.warn('dashboard: page dispose failed', error);
      }
    }
    this.page = null;
    this.pendingNow = false;
  }

  pollSoon(delay) {
    clearTimeout(this.timer);
    const generation = this.generation;
    this.timer = setTimeout(() => {
      this.poll(generation).catch((error) => this.showProblem(error));
    }, delay);
  }

  async poll(generation) {
    if (generation !== this.generation || !this.page) return;
    if (this.abort) {
      // A poll is in flight; it schedules the next one when it ends.
      this.pendingNow = true;
      return;
    }
    if (document.hidden) {
      this.pollSoon(POLL_MS);
      return;
    }
    const abort = new AbortController();
    this.abort = abort;
    const started = performance.now();
    try {
      await this.page.refresh(abort.signal);
      if (generation !== this.generation) return;
      // How long the last poll took, fetches included (check_pages.py reports it).
      this.main.dataset.pollMs = (performance.now() - started).toFixed(1);
      this.showProblem(null);
      this.main.dataset.state = 'ready';
      setText(this.updated, `updated ${formatTime(Date.now())}`);
    } catch (error) {
      if (generation !== this.generation || isAbort(error)) return;
      this.showProblem(error);
      if (this.main.dataset.state !== 'ready') this.main.dataset.state = 'error';
    } finally {
      if (this.abort === abort) this.abort = null;
      if (generation === this.generation) {
        const now = this.pendingNow;
        this.pendingNow = false;
        this.pollSoon(now ? 0 : POLL_MS);
      }
    }
  }

  showProblem(error) {
    if (!error) {
      if (!this.banner.hidden) this.banner.hidden = true;
      return;
    }
    const what = error.name === 'ApiError' ? error.message : `the page failed: ${error.message || error}`;
    if (error.name !== 'ApiError') console.warn('dashboard:', error);
    const text = `${what.charAt(0).toUpperCase()}${what.slice(1)} — retrying every ${POLL_MS / 1000} s`;
    setText(this.banner, text);
    this.banner.title = text;
    this.banner.hidden = false;
  }
}

new App().start();
