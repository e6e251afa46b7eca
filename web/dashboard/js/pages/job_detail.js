// One gang job (#/jobs/<id>?rank=N): its facts, every rank (node, host, pid, state, exit reason)
// and the live log of one rank or of all ranks merged, tailed through GET jobs/<id>/logs with the
// byte offset the head last gave (next_offset) until it says done. The view keeps the last
// 256 KiB of text. Polls GET jobs and the log. Main thread only.

import { h, setText, reconcile, setHidden } from '../dom.js';
import { formatTime, formatDuration, stateWord, num } from '../format.js';
import { DataTable, Facts, badge, setBadge } from '../widgets.js';
import { nodeHref } from '../model.js';
import { rankStrip, summariseRanks, runTime } from './jobs.js';

const MAX_LOG_CHARS = 256 * 1024;
const MAX_CHUNKS_PER_POLL = 8;
const MERGED = -1;

export function createJobDetailPage({ api, args, query, refreshNow }) {
  const id = args[0];
  const initialRank = num(query.get('rank'));
  let job = null;
  let rank = initialRank;
  let log = { generation: 0, offset: 0, done: false, chars: 0 };

  const stateBadge = badge('unknown');
  const name = h('span', {}, id);
  const missing = h('p', { class: 'muted', hidden: true });
  const facts = new Facts();
  const strip = h('div');

  const ranks = new DataTable({
    caption: 'Ranks',
    captionHidden: true,
    keyOf: (r) => String(r.rank),
    empty: 'No ranks started yet.',
    columns: [
      { header: 'Rank', className: 'num', cell: (r) => String(num(r.rank) ?? '') },
      { header: 'Local', className: 'num', cell: (r) => String(num(r.local_rank) ?? '') },
      { header: 'Node rank', className: 'num', cell: (r) => String(num(r.node_rank) ?? '') },
      { header: 'Node', cell: (r) => (r.node_id ? { href: nodeHref(r.node_id), text: r.node_id } : '—') },
      { header: 'Host', className: 'mono', cell: (r) => r.host || '—' },
      { header: 'Worker', className: 'mono', cell: (r) => r.worker_id || '—' },
      { header: 'PID', className: 'num', cell: (r) => (num(r.pid) ? String(r.pid) : '—') },
      { header: 'State', cell: (r) => ({ badge: r.state }) },
      { header: 'Exit reason', className: 'wrap', cell: (r) => r.exit_reason || '' },
      {
        header: 'Log',
        cell: (r) => ({
          key: `log:${r.rank}`,
          build: () => h('button', { type: 'button', class: 'link', onclick: () => selectRank(num(r.rank)) }, `rank ${r.rank}`),
        }),
      },
    ],
  });

  const rankSelect = h('select', { id: 'log-rank' });
  const follow = h('input', { id: 'log-follow', type: 'checkbox', checked: true });
  const logStatus = h('span', { class: 'muted', 'aria-live': 'polite' });
  const logView = h('pre', { class: 'log', id: 'job-log', role: 'log', 'aria-label': 'Job log', tabindex: '0' });

  function selectRank(value) {
    if (value === rank) return;
    rank = value;
    rankSelect.value = String(value);
    log = { generation: log.generation + 1, offset: 0, done: false, chars: 0 };
    logView.replaceChildren();
    setText(logStatus, 'loading…');
    const q = `#/jobs/${encodeURIComponent(id)}?rank=${value}`;
    if (window.location.hash !== q) window.history.replaceState(null, '', q);
    refreshNow();
  }

  rankSelect.addEventListener('change', () => selectRank(Number(rankSelect.value)));

  const el = h('div', {},
    h('p', {}, h('a', { href: '#/jobs' }, '← All jobs')),
    h('h1', {}, name, stateBadge),
    missing,
    h('div', { class: 'panel' }, facts.el),
    h('h2', {}, 'Ranks'),
    strip,
    ranks.el,
    h('h2', {}, 'Logs'),
    h('div', { class: 'toolbar' },
      h('label', { for: 'log-rank' }, 'Log of'), rankSelect,
      h('label', { for: 'log-follow' }, follow, ' follow the end'),
      logStatus),
    logView);

  function renderRankOptions(list) {
    const options = [{ value: MERGED, text: 'all ranks, merged' }, ...list.map((r) => ({ value: num(r.rank), text: `rank ${r.rank}${r.node_id ? ` (${r.node_id})` : ''}` }))];
    reconcile(rankSelect, options, (o) => String(o.value), (o) => h('option', { value: String(o.value) }),
      (opt, o) => setText(opt, o.text));
    if (rank === null) rank = list.length ? num(list[0].rank) : MERGED;
    if (rankSelect.value !== String(rank)) rankSelect.value = String(rank);
  }

  function appendLog(text) {
    if (!text) return;
    const nearEnd = logView.scrollHeight - logView.scrollTop - logView.clientHeight < 40;
    logView.appendChild(document.createTextNode(text));
    log.chars += text.length;
    while (log.chars > MAX_LOG_CHARS && logView.firstChild) {
      const first = logView.firstChild;
      const over = log.chars - MAX_LOG_CHARS;
      if (first.data.length <= over) {
        log.chars -= first.data.length;
        first.remove();
      } else {
        first.data = first.data.slice(over);
        log.chars -= over;
      }
    }
    if (follow.checked && (nearEnd || log.offset === 0)) logView.scrollTop = logView.scrollHeight;
  }

  async function tailLog(signal) {
    if (log.done || rank === null) return;
    const generation = log.generation;
    for (let i = 0; i < MAX_CHUNKS_PER_POLL; i += 1) {
      let chunk;
      try {
        chunk = await api.get(`jobs/${encodeURIComponent(id)}/logs`, { signal, query: { rank, offset: log.offset } });
      } catch (error) {
        if (error && error.name === 'ApiError' && error.status === 404) {
          if (generation === log.generation) setText(logStatus, 'the head keeps no log for this rank');
          return;
        }
        throw error;
      }
      if (generation !== log.generation) return;
      const data = typeof chunk.data === 'string' ? chunk.data : '';
      appendLog(data);
      const next = num(chunk.next_offset);
      const advanced = next !== null && next > log.offset;
      if (next !== null) log.offset = next;
      log.done = Boolean(chunk.done);
      setText(logStatus, `${log.done ? 'ended' : 'following'} · ${log.offset.toLocaleString('en-US')} bytes`);
      if (log.done || !data || !advanced) return;
    }
  }

  async function refresh(signal) {
    const body = await api.get('jobs', { signal });
    job = (body.jobs || []).find((j) => j.job_id === id || j.name === id) || null;
    setHidden(missing, Boolean(job));
    if (!job) {
      setText(missing, `The head lists no gang job ${id} (it keeps the newest ended jobs only).`);
      setBadge(stateBadge, 'unknown');
      return;
    }
    setText(name, job.name || job.job_id);
    setBadge(stateBadge, job.state);
    const ended = num(job.end_time_ms) > 0;
    facts.set([
      ['Id', job.job_id],
      ['State', `${stateWord(job.state)}${job.message ? ` — ${job.message}` : ''}`],
      ['Ranks', `${num(job.world_size) ?? 0} (${summariseRanks(job.ranks)})`],
      ['Restarts', `${num(job.restart_count) ?? 0} of at most ${num(job.max_restarts) ?? 0}${num(job.membership_changes) ? `, ${job.membership_changes} resizes` : ''}`],
      ['Reservation', job.reservation ? { href: '#/reservations', text: job.reservation } : '—'],
      ['Submitted', formatTime(job.submit_time_ms)],
      ['Started', formatTime(job.start_time_ms)],
      ended ? ['Ended', `${formatTime(job.end_time_ms)}, exit code ${num(job.exit_code) ?? 0}`] : null,
      ['Ran for', runTime(job)],
      num(job.launch_ms) ? ['Launch', `${formatDuration(num(job.launch_ms))} from submission to every rank running`] : null,
      num(job.last_restart_ms) ? ['Last restart', `${formatDuration(num(job.last_restart_ms))} from the failure to every rank running again`] : null,
      ['Command', (job.argv || []).join(' ') || '—'],
      ['Log folder', job.log_dir || '—'],
    ]);
    const list = job.ranks || [];
    const stripValue = rankStrip(list);
    if (strip.__key !== stripValue.key) {
      strip.__key = stripValue.key;
      strip.replaceChildren(stripValue.build());
    }
    ranks.update(list);
    renderRankOptions(list);
    await tailLog(signal);
  }

  return { title: `Job ${id}`, el, refresh };
}
