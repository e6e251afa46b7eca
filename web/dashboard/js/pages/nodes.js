// Nodes (#/nodes): one table of every node, with a filter box (id, address, state, labels as
// key=value, accelerator type), a sort order and pages of 50 rows, so 1,000 nodes cost 50 rows of
// DOM and no SVG. Typing re-renders from the last poll without waiting for the next.
// Polls GET nodes (following next_page_token). Main thread only.

import { h, setText } from '../dom.js';
import { formatDuration, formatCount, num } from '../format.js';
import { DataTable } from '../widgets.js';
import {
  nodeId, nodeHref, nodeResources, usageText, acceleratorSummary, searchText, nodeLabels,
  SLICE_NAME_LABEL, WORKER_ID_LABEL,
} from '../model.js';

const PAGE_SIZE = 50;
const STATE_ORDER = { DEAD: 0, DRAINING: 1, UNKNOWN: 2, ALIVE: 3 };

function resourceCell(info, pick) {
  const rows = nodeResources(info);
  const row = pick(rows);
  if (!row) return '—';
  return { bar: { name: `${row.resource} used`, used: row.used, total: row.total, label: `${usageText(row.resource, row.used, row.total)}${row.resource === 'CPU' || row.resource === 'memory' ? '' : ` ${row.resource}`}` } };
}

function cpuUse(info) {
  const row = nodeResources(info).find((r) => r.resource === 'CPU');
  return row && row.total > 0 ? row.used / row.total : 0;
}

const SORTS = {
  id: { label: 'node id', compare: (a, b) => nodeId(a).localeCompare(nodeId(b)) },
  state: { label: 'state (dead first)', compare: (a, b) => (STATE_ORDER[a.state] ?? 2) - (STATE_ORDER[b.state] ?? 2) || nodeId(a).localeCompare(nodeId(b)) },
  cpu: { label: 'CPU in use', compare: (a, b) => cpuUse(b) - cpuUse(a) || nodeId(a).localeCompare(nodeId(b)) },
  heartbeat: { label: 'heartbeat age', compare: (a, b) => (num(b.last_heartbeat_age_ms) ?? 0) - (num(a.last_heartbeat_age_ms) ?? 0) },
};

function placeLabel(info) {
  const labels = nodeLabels(info);
  if (labels[SLICE_NAME_LABEL]) return `${labels[SLICE_NAME_LABEL]} w${labels[WORKER_ID_LABEL] ?? '?'}`;
  return labels['tessera.io/node-group'] || labels['tessera.io/availability-zone'] || '';
}

export function createNodesPage({ api, query }) {
  let nodes = [];
  let page = 0;
  const searchIndex = new WeakMap();

  const filter = h('input', {
    id: 'node-filter', type: 'search', placeholder: 'e.g. v6e, dead, pool=gpu',
    'aria-controls': 'node-table', autocomplete: 'off',
  });
  const sort = h('select', { id: 'node-sort' },
    Object.entries(SORTS).map(([key, v]) => h('option', { value: key }, v.label)));
  const count = h('span', { class: 'muted', 'aria-live': 'polite', id: 'node-count' });
  const prev = h('button', { type: 'button' }, '← Previous');
  const next = h('button', { type: 'button' }, 'Next →');
  const pageInfo = h('span', { class: 'muted' });

  const table = new DataTable({
    caption: 'Nodes',
    captionHidden: true,
    keyOf: nodeId,
    empty: 'No node matches.',
    columns: [
      { header: 'Node', cell: (n) => ({ href: nodeHref(nodeId(n)), text: nodeId(n) }) },
      { header: 'State', cell: (n) => ({ badge: n.state }) },
      { header: 'Address', className: 'mono', cell: (n) => (n.node && n.node.address) || '' },
      { header: 'Accelerators', cell: (n) => acceleratorSummary(n) || '—' },
      { header: 'Where', cell: placeLabel },
      { header: 'CPU', cell: (n) => resourceCell(n, (rows) => rows.find((r) => r.resource === 'CPU')) },
      { header: 'Memory', cell: (n) => resourceCell(n, (rows) => rows.find((r) => r.resource === 'memory')) },
      {
        header: 'Devices in use',
        cell: (n) => {
          const devices = new Set(((n.node && n.node.devices) || []).map((d) => d.resource));
          return resourceCell(n, (rows) => rows.find((r) => devices.has(r.resource)));
        },
      },
      { header: 'Workers', className: 'num', cell: (n) => formatCount(num(n.workers) ?? 0) },
      { header: 'Heartbeat', className: 'num', cell: (n) => `${formatDuration(num(n.last_heartbeat_age_ms))} ago` },
    ],
  });
  table.table.id = 'node-table';

  function matching() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    let list = nodes;
    if (words.length) {
      list = nodes.filter((n) => {
        let text = searchIndex.get(n);
        if (text === undefined) {
          text = searchText(n);
          searchIndex.set(n, text);
        }
        return words.every((w) => text.includes(w));
      });
    }
    const order = SORTS[sort.value] || SORTS.id;
    return order === SORTS.id ? list : [...list].sort(order.compare);
  }

  function render() {
    const list = matching();
    const pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
    page = Math.min(page, pages - 1);
    const shown = list.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    table.update(shown);
    const alive = nodes.filter((n) => n.state === 'ALIVE').length;
    setText(count, `${formatCount(nodes.length)} nodes, ${formatCount(alive)} alive${list.length !== nodes.length ? ` · ${formatCount(list.length)} match` : ''}`);
    setText(pageInfo, list.length ? `rows ${page * PAGE_SIZE + 1}–${page * PAGE_SIZE + shown.length} of ${formatCount(list.length)}` : '');
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }

  filter.addEventListener('input', () => {
    page = 0;
    render();
    const q = filter.value.trim();
    const hash = `#/nodes${q ? `?q=${encodeURIComponent(q)}` : ''}`;
    if (window.location.hash !== hash) window.history.replaceState(null, '', hash);
  });
  sort.addEventListener('change', () => render());
  prev.addEventListener('click', () => {
    page = Math.max(0, page - 1);
    render();
  });
  next.addEventListener('click', () => {
    page += 1;
    render();
  });

  const el = h('div', {},
    h('h1', {}, 'Nodes'),
    h('div', { class: 'toolbar' },
      h('label', { for: 'node-filter' }, 'Filter'), filter,
      h('label', { for: 'node-sort' }, 'Sort by'), sort,
      count),
    table.el,
    h('div', { class: 'pager' }, prev, next, pageInfo));
  filter.value = query.get('q') || '';

  async function refresh(signal) {
    const body = await api.getAll('nodes', 'nodes', { signal });
    nodes = body.nodes || [];
    render();
  }

  return { title: 'Nodes', el, refresh };
}
