// Cluster overview (#/overview): nodes alive / draining / dead, resources used of total as
// bars, slices and placement groups at a glance, unmet demand with the scheduler's
// explanations, the head's own notices and the newest events.
// Polls GET cluster and GET events?after=SEQ. Main thread only.

import { h, setText, reconcile, setHidden } from '../dom.js';
import { formatTime, formatDuration, stateWord, plural, num } from '../format.js';
import { DataTable, UsageBar } from '../widgets.js';
import {
  deviceResourceNames, isPrimaryResource, orderResources, usageText, nodeId, nodeHref, EventFeed,
} from '../model.js';

function card(label) {
  const figure = h('div', { class: 'figure' }, '—');
  const detail = h('div', { class: 'detail' });
  const el = h('section', { class: 'card', 'aria-label': label }, h('div', { class: 'label' }, label), figure, detail);
  return { el, figure, detail };
}

function countBy(items, keyOf) {
  const counts = new Map();
  for (const item of items) counts.set(keyOf(item), (counts.get(keyOf(item)) || 0) + 1);
  return counts;
}

export function createOverviewPage({ api }) {
  const feed = new EventFeed(api, { keep: 50 });
  const nodesCard = card('Nodes alive');
  const slicesCard = card('Slices intact');
  const groupsCard = card('Placement groups created');
  const demandCard = card('Unmet demand');

  const usage = h('div', { class: 'usage-list' });
  const otherUsage = h('div', { class: 'usage-list' });
  const otherSummary = h('summary');
  const other = h('details', {}, otherSummary, otherUsage);

  const notAlive = new DataTable({
    caption: 'Nodes not alive',
    captionHidden: true,
    keyOf: nodeId,
    empty: 'Every node is alive.',
    columns: [
      { header: 'Node', cell: (n) => ({ href: nodeHref(nodeId(n)), text: nodeId(n) }) },
      { header: 'State', cell: (n) => ({ badge: n.state }) },
      { header: 'Last heartbeat', className: 'num', cell: (n) => `${formatDuration(num(n.last_heartbeat_age_ms))} ago` },
    ],
  });

  const demand = new DataTable({
    caption: 'What waits for room, with the scheduler’s explanation',
    keyOf: (d) => `${d.kind}/${d.name}`,
    empty: 'Nothing is waiting.',
    columns: [
      { header: 'Kind', cell: (d) => d.kind },
      { header: 'Name', cell: (d) => d.name },
      { header: 'Status', cell: (d) => ({ badge: d.status }) },
      { header: 'Explanation', className: 'wrap', cell: (d) => d.explanation },
    ],
  });

  const notices = h('ul', { class: 'notices' });
  const noticesNone = h('p', { class: 'muted' }, 'The head has lost or released nothing on its own.');

  const events = new DataTable({
    caption: 'Newest events',
    captionHidden: true,
    keyOf: (e) => String(e.seq),
    empty: 'No events yet.',
    columns: [
      { header: 'Time', className: 'nowrap', cell: (e) => formatTime(e.time_ms) },
      { header: 'Kind', cell: (e) => e.kind },
      { header: 'Event', className: 'wrap', cell: (e) => e.message },
    ],
  });

  const el = h('div', {},
    h('h1', {}, 'Cluster overview'),
    h('div', { class: 'cards' }, nodesCard.el, slicesCard.el, groupsCard.el, demandCard.el),
    h('h2', {}, 'Resources'),
    h('div', { class: 'panel' }, usage, other),
    h('h2', {}, 'Demand'),
    demand.el,
    h('h2', {}, 'Nodes not alive'),
    notAlive.el,
    h('h2', {}, 'Head notices'),
    h('div', { class: 'panel' }, notices, noticesNone),
    h('h2', {}, 'Recent events'),
    events.el,
    h('p', {}, h('a', { href: '#/events' }, 'All events →')));

  function renderUsage(container, rows) {
    reconcile(container, rows.flatMap((u) => [{ key: `l:${u.resource}`, u }, { key: `b:${u.resource}`, u, bar: true }]),
      (x) => x.key,
      (x) => {
        if (!x.bar) return h('div', { class: 'mono' });
        const bar = new UsageBar(`${x.u.resource} used`);
        bar.el.__bar = bar;
        return bar.el;
      },
      (node, x) => {
        if (!x.bar) setText(node, x.u.resource);
        else node.__bar.set(num(x.u.used), num(x.u.total), usageText(x.u.resource, num(x.u.used), num(x.u.total)));
      });
  }

  async function refresh(signal) {
    const [cluster] = await Promise.all([api.get('cluster', { signal }), feed.poll(signal)]);
    const nodes = cluster.nodes || [];
    const states = countBy(nodes, (n) => n.state);
    const alive = states.get('ALIVE') || 0;
    setText(nodesCard.figure, `${alive} / ${nodes.length}`);
    setText(nodesCard.detail, `${states.get('DRAINING') || 0} draining · ${states.get('DEAD') || 0} dead`);

    const slices = (cluster.slices && cluster.slices.slices) || [];
    const intact = slices.filter((x) => x.intact).length;
    const held = slices.filter((x) => x.held_by).length;
    setText(slicesCard.figure, `${intact} / ${slices.length}`);
    setText(slicesCard.detail, `${held} held by a reservation`);

    const groups = cluster.placement_groups || [];
    const byState = countBy(groups, (g) => stateWord(g.state));
    setText(groupsCard.figure, `${byState.get('created') || 0} / ${groups.length}`);
    setText(groupsCard.detail, [...byState.entries()].filter(([w]) => w !== 'created').map(([w, n]) => `${n} ${w}`).join(' · ') || 'none waiting');

    const wants = cluster.demand || [];
    const infeasible = wants.filter((d) => d.status === 'infeasible').length;
    setText(demandCard.figure, String(wants.length));
    setText(demandCard.detail, `${infeasible} infeasible · ${wants.length - infeasible} pending`);

    const devices = deviceResourceNames(nodes);
    const rows = (cluster.usage || []).filter((u) => u && u.resource);
    const order = orderResources(rows.map((u) => u.resource), devices);
    const byName = new Map(rows.map((u) => [u.resource, u]));
    const sorted = order.map((n) => byName.get(n));
    const primary = sorted.filter((u) => isPrimaryResource(u.resource, devices));
    const rest = sorted.filter((u) => !isPrimaryResource(u.resource, devices));
    renderUsage(usage, primary);
    renderUsage(otherUsage, rest);
    setHidden(other, rest.length === 0);
    setText(otherSummary, `Other resources (${plural(rest.length, 'marker')}: slice markers, accelerator types)`);

    demand.update(wants);
    notAlive.update(nodes.filter((n) => n.state !== 'ALIVE').slice(0, 50));

    const lines = (cluster.events || []).map((text, i) => ({ text, i }));
    reconcile(notices, lines, (x) => `${x.i}:${x.text}`, (x) => h('li', {}, x.text), () => {});
    setHidden(noticesNone, lines.length > 0);

    events.update(feed.newestFirst().slice(0, 10));
  }

  return { title: 'Overview', el, refresh };
}
