// Jobs (#/jobs): the head's gang jobs (training gangs and submitted jobs: state, every rank's
// state at a glance, restarts, the reservation they hold) and the drivers (`tessera run`
// programs). A job's ranks and logs are on #/jobs/<id>.
// Polls GET jobs. Main thread only.

import { h } from '../dom.js';
import { formatTime, formatDuration, stateTone, stateWord, num } from '../format.js';
import { DataTable } from '../widgets.js';
import { jobHref, nodeHref } from '../model.js';

// Every rank as a small square coloured by its state; `key` rebuilds it only on a change.
export function rankStrip(ranks) {
  const states = (ranks || []).map((r) => `${num(r.rank)}:${r.state}`);
  return {
    key: states.join(','),
    build: () => h('div', {
      class: 'rank-strip', role: 'img', 'aria-label': summariseRanks(ranks),
      style: `width: ${Math.min(32, Math.max(1, (ranks || []).length)) * 12}px`,
    },
      (ranks || []).map((r) => h('span', { class: `rank-dot tone-${stateTone(r.state)}`, title: `rank ${r.rank}: ${stateWord(r.state)}` }))),
  };
}

export function summariseRanks(ranks) {
  const counts = new Map();
  for (const r of ranks || []) counts.set(stateWord(r.state), (counts.get(stateWord(r.state)) || 0) + 1);
  return [...counts.entries()].map(([w, n]) => `${n} ${w}`).join(', ') || 'no ranks';
}

export function runTime(job, now = Date.now()) {
  const start = num(job.start_time_ms);
  if (!start) return '—';
  const end = num(job.end_time_ms) || now;
  return formatDuration(end - start);
}

export function createJobsPage({ api }) {
  const gangs = new DataTable({
    caption: 'Gang jobs',
    captionHidden: true,
    keyOf: (j) => j.job_id,
    empty: 'No gang jobs.',
    columns: [
      { header: 'Job', className: 'nowrap', cell: (j) => ({ href: jobHref(j), text: j.name || j.job_id, title: j.job_id }) },
      { header: 'Id', className: 'mono', cell: (j) => j.job_id },
      { header: 'State', cell: (j) => ({ badge: j.state }) },
      { header: 'Ranks', className: 'num', cell: (j) => String(num(j.world_size) ?? (j.ranks || []).length) },
      { header: 'Rank states', cell: (j) => rankStrip(j.ranks) },
      { header: 'Restarts', className: 'num', cell: (j) => `${num(j.restart_count) ?? 0} / ${num(j.max_restarts) ?? 0}` },
      { header: 'Reservation', className: 'mono', cell: (j) => j.reservation || '—' },
      { header: 'Submitted', className: 'nowrap', cell: (j) => formatTime(j.submit_time_ms) },
      { header: 'Ran for', className: 'num', cell: (j) => runTime(j) },
      { header: 'Message', className: 'wrap', cell: (j) => j.message || '' },
    ],
  });

  const drivers = new DataTable({
    caption: 'Drivers',
    captionHidden: true,
    keyOf: (j) => j.job_id,
    empty: 'No drivers.',
    columns: [
      { header: 'Job', className: 'mono', cell: (j) => j.job_id },
      { header: 'Command', className: 'mono wrap', cell: (j) => (j.argv || []).join(' ') },
      { header: 'Node', cell: (j) => (j.node_id ? { href: nodeHref(j.node_id), text: j.node_id } : '—') },
      { header: 'State', cell: (j) => ({ badge: j.state }) },
      { header: 'Exit reason', className: 'wrap', cell: (j) => `${j.exit_reason || ''}${j.failure_presumed ? ' (presumed by the head)' : ''}` },
      { header: 'Started', className: 'nowrap', cell: (j) => formatTime(j.start_time_ms) },
      { header: 'Ran for', className: 'num', cell: (j) => runTime(j) },
    ],
  });

  const el = h('div', {},
    h('h1', {}, 'Jobs'),
    h('h2', {}, 'Gang jobs and training gangs'), gangs.el,
    h('h2', {}, 'Drivers'), drivers.el);

  async function refresh(signal) {
    const body = await api.get('jobs', { signal });
    gangs.update(body.jobs || []);
    drivers.update(body.drivers || []);
  }

  return { title: 'Jobs', el, refresh };
}
