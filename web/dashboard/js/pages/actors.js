// Actors (#/actors): the head's actor directory (named actors, live and the newest dead ones):
// state, node, restarts, owner, and why a dead one died; a filter box over every column.
// Polls GET actors (following next_page_token). Main thread only.

import { h, setText } from '../dom.js';
import { num, formatCount } from '../format.js';
import { DataTable } from '../widgets.js';
import { nodeHref } from '../model.js';

function actorText(a) {
  return [a.actor_id, a.name, a.namespace, a.class_name, a.state, a.node_id, a.owner, a.death_cause]
    .join(' ').toLowerCase();
}

export function createActorsPage({ api }) {
  let actors = [];
  const filter = h('input', { id: 'actor-filter', type: 'search', placeholder: 'name, class, state, node', autocomplete: 'off' });
  const count = h('span', { class: 'muted', 'aria-live': 'polite' });
  const table = new DataTable({
    caption: 'Actors',
    captionHidden: true,
    keyOf: (a) => a.actor_id,
    empty: 'No actors.',
    columns: [
      { header: 'Name', className: 'mono', cell: (a) => (a.namespace ? `${a.namespace}/${a.name || ''}` : a.name || '(unnamed)') },
      { header: 'Class', className: 'mono', cell: (a) => a.class_name || '' },
      { header: 'State', cell: (a) => ({ badge: a.state }) },
      { header: 'Node', cell: (a) => (a.node_id ? { href: nodeHref(a.node_id), text: a.node_id } : '—') },
      { header: 'Restarts', className: 'num', cell: (a) => String(num(a.restarts) ?? 0) },
      { header: 'Owner', className: 'mono', cell: (a) => a.owner || (a.detached ? 'detached' : '—') },
      { header: 'Id', className: 'mono', cell: (a) => a.actor_id },
      { header: 'Death cause', className: 'wrap', cell: (a) => a.death_cause || '' },
    ],
  });

  function render() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = words.length ? actors.filter((a) => words.every((w) => actorText(a).includes(w))) : actors;
    table.update(shown.slice(0, 500));
    setText(count, `${formatCount(actors.length)} actors${shown.length !== actors.length ? ` · ${formatCount(shown.length)} match` : ''}${shown.length > 500 ? ' · first 500 shown' : ''}`);
  }
  filter.addEventListener('input', render);

  const el = h('div', {},
    h('h1', {}, 'Actors'),
    h('div', { class: 'toolbar' }, h('label', { for: 'actor-filter' }, 'Filter'), filter, count),
    table.el);

  async function refresh(signal) {
    const body = await api.getAll('actors', 'actors', { signal });
    actors = body.actors || [];
    render();
  }

  return { title: 'Actors', el, refresh };
}
