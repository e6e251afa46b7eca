// Slices (#/slices): each TPU slice (or NVLink domain) the head knows, intact or not, its hosts
// as a grid in TPU worker order (tpu_grid.js) with each host's node and state, and which slice
// group holds it and for which job.
// Polls GET slices, GET nodes and GET jobs. Main thread only.

import { h, setText, setAttr, setClass, reconcile } from '../dom.js';
import { stateWord, num } from '../format.js';
import { badge, setBadge } from '../widgets.js';
import {
  sliceHostsFromNodes, jobsByReservation, jobHref, nodeHref, nodeId, allocationText,
} from '../model.js';
import { workerGrid } from '../tpu_grid.js';

function hostState(info) {
  if (!info) return 'missing';
  return stateWord(info.state);
}

class SliceCard {
  constructor(name) {
    this.title = h('span', { class: 'mono' }, name);
    this.intact = badge('unknown');
    this.summary = h('p', { class: 'muted' });
    this.holder = h('p');
    this.explanation = h('p', { class: 'muted', hidden: true });
    this.grid = h('div', { class: 'slice-grid', role: 'list', 'aria-label': `Hosts of ${name} in worker order` });
    this.el = h('section', { class: 'panel', 'aria-label': `Slice ${name}` },
      h('h2', {}, this.title, ' ', this.intact), this.summary, this.holder, this.explanation, this.grid);
  }

  update({ slice, hosts, group, job }) {
    setBadge(this.intact, slice.intact === null ? 'not listed' : slice.intact ? 'intact' : 'broken');
    const count = num(slice.hosts) ?? hosts.size;
    setText(this.summary, `${slice.accelerator_type || 'slice'} ${slice.topology || ''} · ${count} hosts, ${num(slice.hosts_alive) ?? 0} alive`);

    // Who holds it: the slice group, and the gang job whose reservation it is.
    const parts = [];
    if (slice.held_by) {
      parts.push('Held by ', h('a', { href: '#/reservations' }, slice.held_by));
      if (group) parts.push(' (', stateWord(group.state), ')');
      if (job) parts.push(' for job ', h('a', { href: jobHref(job) }, job.name || job.job_id), ` (${stateWord(job.state)}, ${job.world_size} ranks)`);
    } else {
      parts.push('Idle: no reservation holds it.');
    }
    const key = JSON.stringify([slice.held_by, group && group.state, job && job.job_id, job && job.state, job && job.name, job && job.world_size]);
    if (this.holder.__key !== key) {
      this.holder.__key = key;
      this.holder.replaceChildren(...parts);
    }
    const explanation = group && group.explanation ? group.explanation : '';
    this.explanation.hidden = !explanation;
    setText(this.explanation, explanation);

    const grid = workerGrid(slice.topology, count);
    const [ex, ey, ez] = grid.extent;
    const layers = [];
    for (let z = 0; z < ez; z += 1) layers.push(z);
    reconcile(this.grid, layers, (z) => z,
      () => h('div', { class: 'slice-layer', role: 'presentation' }),
      (layer, z) => {
        layer.style.gridTemplateColumns = `repeat(${ex}, minmax(8.5rem, 1fr))`;
        setAttr(layer, 'aria-label', ez > 1 ? `z = ${z}` : null);
        const workers = [];
        for (let w = 0; w < count; w += 1) if (grid.coordOf(w)[2] === z) workers.push(w);
        reconcile(layer, workers, (w) => w,
          (w) => {
            const cell = h('div', { class: 'host-cell', role: 'listitem' },
              h('span', { class: 'worker' }, `worker ${w}`), h('a', { class: 'node' }), h('span', { class: 'host-state' }),
              h('div', { class: 'host-state alloc' }));
            return cell;
          },
          (cell, w) => {
            const [x, y] = grid.coordOf(w);
            cell.style.gridColumn = String(x + 1);
            cell.style.gridRow = String(y + 1);
            const host = hosts.get(w) || {};
            const id = host.nodeId || '';
            const state = hostState(host.info);
            setClass(cell, `host-cell ${state === 'alive' ? '' : state}`.trim());
            const link = cell.children[1];
            setText(link, id || 'no host');
            setAttr(link, 'href', id ? nodeHref(id) : null);
            setText(cell.children[2], state);
            setText(cell.children[3], host.allocation ? allocationText(host.allocation) : '');
          });
      });
  }
}

export function createSlicesPage({ api }) {
  const list = h('div', {});
  const none = h('p', { class: 'muted', hidden: true }, 'This cluster has no multi-host slices.');
  const el = h('div', {},
    h('h1', {}, 'Slices'),
    h('p', { class: 'subtitle' }, 'Each slice’s hosts in TPU worker order (x fastest, then y, then z).'),
    none, list);

  async function refresh(signal) {
    const [slices, nodesBody, jobs] = await Promise.all([
      api.getAll('slices', ['slices', 'groups'], { signal }),
      api.getAll('nodes', 'nodes', { signal }),
      api.get('jobs', { signal }),
    ]);
    const nodes = nodesBody.nodes || [];
    const byId = new Map(nodes.map((n) => [nodeId(n), n]));
    const fromLabels = sliceHostsFromNodes(nodes);
    const groups = new Map((slices.groups || []).map((g) => [g.name, g]));
    const jobsHeld = jobsByReservation(jobs);

    const items = [...(slices.slices || [])];
    const listed = new Set(items.map((x) => x.name));
    for (const [name, hostList] of fromLabels) {
      if (listed.has(name)) continue;
      const alive = hostList.filter((x) => x.node.state === 'ALIVE').length;
      items.push({ name, accelerator_type: '', topology: '', hosts: hostList.length, hosts_alive: alive, intact: null, held_by: '' });
    }
    items.sort((a, b) => String(a.name || '').localeCompare(String(b.name || '')));

    none.hidden = items.length > 0;
    reconcile(list, items, (x) => x.name,
      (x) => {
        const card = new SliceCard(x.name);
        card.el.__card = card;
        return card.el;
      },
      (cardEl, slice) => {
        const hosts = new Map();
        for (const { worker, node } of fromLabels.get(slice.name) || []) {
          hosts.set(worker, { nodeId: nodeId(node), info: node });
        }
        const group = slice.held_by ? groups.get(slice.held_by) : null;
        for (const host of (group && group.hosts) || []) {
          if (host.domain !== slice.name) continue;
          const worker = num(host.worker) ?? -1;
          const known = hosts.get(worker) || { nodeId: host.node_id, info: byId.get(host.node_id) };
          hosts.set(worker, { ...known, allocation: host.allocation });
        }
        cardEl.__card.update({ slice, hosts, group, job: slice.held_by ? jobsHeld.get(slice.held_by) : null });
      });
  }

  return { title: 'Slices', el, refresh };
}
