// Events (#/events): the head's event log live, newest first (nodes, reservations, jobs,
// workers, actors, drivers), filtered by kind, text and whether it is a notice (what wants a
// user's attention, marked "notice"); the newest 500 that match are shown.
// Polls GET events?after=SEQ through EventFeed. Main thread only.

import { h, setText } from '../dom.js';
import { formatTime, formatCount } from '../format.js';
import { DataTable } from '../widgets.js';
import { EventFeed } from '../model.js';

const KINDS = ['node', 'reservation', 'job', 'worker', 'actor', 'driver', 'head'];
const SHOWN = 500;

export function createEventsPage({ api }) {
  const feed = new EventFeed(api, { keep: 5000 });
  const kind = h('select', { id: 'event-kind' }, h('option', { value: '' }, 'every kind'),
    KINDS.map((k) => h('option', { value: k }, k)));
  const filter = h('input', { id: 'event-filter', type: 'search', placeholder: 'text in the event', autocomplete: 'off' });
  const noticesOnly = h('input', { id: 'event-notices', type: 'checkbox' });
  const count = h('span', { class: 'muted', 'aria-live': 'polite' });
  const table = new DataTable({
    caption: 'Events, newest first',
    captionHidden: true,
    keyOf: (e) => String(e.seq),
    empty: 'No events match.',
    columns: [
      { header: 'Seq', className: 'num', cell: (e) => String(e.seq) },
      { header: 'Time', className: 'nowrap', cell: (e) => formatTime(e.time_ms) },
      { header: 'Kind', cell: (e) => (e.notice ? `${e.kind || ''} · notice` : e.kind || '') },
      { header: 'Event', className: 'wrap', cell: (e) => e.message || '' },
    ],
  });

  function render() {
    const k = kind.value;
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const all = feed.newestFirst();
    const matching = all.filter((e) => (!k || e.kind === k) && (!noticesOnly.checked || e.notice)
      && (!words.length || words.every((w) => String(e.message || '').toLowerCase().includes(w))));
    table.update(matching.slice(0, SHOWN));
    setText(count, `${formatCount(all.length)} events kept${matching.length !== all.length ? ` · ${formatCount(matching.length)} match` : ''}`);
  }
  kind.addEventListener('change', render);
  filter.addEventListener('input', render);
  noticesOnly.addEventListener('change', render);

  const el = h('div', {},
    h('h1', {}, 'Events'),
    h('div', { class: 'toolbar' },
      h('label', { for: 'event-kind' }, 'Kind'), kind,
      h('label', { for: 'event-filter' }, 'Filter'), filter,
      noticesOnly, h('label', { for: 'event-notices' }, 'Notices only'), count),
    table.el);

  async function refresh(signal) {
    await feed.poll(signal);
    render();
  }

  return { title: 'Events', el, refresh };
}
