// Reservations (#/reservations): placement groups and slice groups, with their state, strategy,
// owner, the job holding each, why one is not placed, and every bundle or host -> node with
// what it holds.
// Polls GET placement_groups, GET slices and GET jobs. Main thread only.

import { h } from '../dom.js';
import { num } from '../format.js';
import { DataTable } from '../widgets.js';
import { jobsByReservation, jobHref, nodeHref, allocationText } from '../model.js';

function jobCell(jobs, name) {
  const job = jobs.get(name);
  return job ? { href: jobHref(job), text: job.name || job.job_id } : '—';
}

function nodeCell(id) {
  return id ? { href: nodeHref(id), text: id } : 'unplaced';
}

export function createReservationsPage({ api }) {
  let jobs = new Map();

  const groups = new DataTable({
    caption: 'Placement groups',
    captionHidden: true,
    keyOf: (g) => g.id || g.name,
    empty: 'No placement groups.',
    columns: [
      { header: 'Name', className: 'mono', cell: (g) => g.name },
      { header: 'State', cell: (g) => ({ badge: g.state }) },
      { header: 'Strategy', cell: (g) => g.strategy || 'PACK' },
      { header: 'Option', className: 'num', cell: (g) => (num(g.option) ? `fallback ${g.option}` : 'primary') },
      {
        header: 'Bundles placed',
        className: 'num',
        cell: (g) => {
          const bundles = g.bundles || [];
          return `${bundles.filter((b) => b.node_id).length} / ${bundles.length}`;
        },
      },
      { header: 'Owner', className: 'mono', cell: (g) => g.owner || 'detached' },
      { header: 'Job', cell: (g) => jobCell(jobs, g.name) },
      { header: 'Explanation', className: 'wrap', cell: (g) => g.explanation || '' },
    ],
  });

  const bundles = new DataTable({
    caption: 'Bundles of placement groups',
    captionHidden: true,
    keyOf: (b) => `${b.group}/${b.index}`,
    empty: 'No bundles.',
    columns: [
      { header: 'Group', className: 'mono', cell: (b) => b.group },
      { header: 'Bundle', className: 'num', cell: (b) => String(b.index) },
      { header: 'Node', cell: (b) => nodeCell(b.node_id) },
      { header: 'Holds', className: 'wrap', cell: (b) => allocationText(b.allocation) || '—' },
    ],
  });

  const sliceGroups = new DataTable({
    caption: 'Slice groups',
    captionHidden: true,
    keyOf: (g) => g.id || g.name,
    empty: 'No slice groups.',
    columns: [
      { header: 'Name', className: 'mono', cell: (g) => g.name },
      { header: 'State', cell: (g) => ({ badge: g.state }) },
      { header: 'Alternative', className: 'num', cell: (g) => String(num(g.alternative) ?? 0) },
      { header: 'Slices', className: 'mono', cell: (g) => (g.domains || []).join(', ') || '—' },
      { header: 'Hosts', className: 'num', cell: (g) => String((g.hosts || []).length) },
      { header: 'Owner', className: 'mono', cell: (g) => g.owner || 'detached' },
      { header: 'Job', cell: (g) => jobCell(jobs, g.name) },
      { header: 'Explanation', className: 'wrap', cell: (g) => g.explanation || '' },
    ],
  });

  const sliceHosts = new DataTable({
    caption: 'Hosts of slice groups',
    captionHidden: true,
    keyOf: (x) => `${x.group}/${x.domain}/${x.worker}/${x.node_id}`,
    empty: 'No hosts held.',
    columns: [
      { header: 'Group', className: 'mono', cell: (x) => x.group },
      { header: 'Slice', className: 'mono', cell: (x) => x.domain },
      { header: 'Worker', className: 'num', cell: (x) => ((num(x.worker) ?? -1) < 0 ? '—' : String(x.worker)) },
      { header: 'Node', cell: (x) => nodeCell(x.node_id) },
      { header: 'Holds', className: 'wrap', cell: (x) => allocationText(x.allocation) || '—' },
    ],
  });

  const el = h('div', {},
    h('h1', {}, 'Reservations'),
    h('p', { class: 'subtitle' }, 'Placement groups and slice groups, as the head placed them (two-phase commit on the node agents).'),
    h('h2', {}, 'Placement groups'), groups.el,
    h('h3', {}, 'Bundles → nodes'), bundles.el,
    h('h2', {}, 'Slice groups'), sliceGroups.el,
    h('h3', {}, 'Hosts → nodes'), sliceHosts.el);

  async function refresh(signal) {
    const [pgs, slices, jobList] = await Promise.all([
      api.getAll('placement_groups', 'groups', { signal }),
      api.getAll('slices', ['slices', 'groups'], { signal }),
      api.get('jobs', { signal }),
    ]);
    jobs = jobsByReservation(jobList);
    const pgList = pgs.groups || [];
    groups.update(pgList);
    bundles.update(pgList.flatMap((g) => (g.bundles || []).map((b) => ({ ...b, group: g.name, index: num(b.index) ?? 0 }))));
    const sgList = slices.groups || [];
    sliceGroups.update(sgList);
    sliceHosts.update(sgList.flatMap((g) => (g.hosts || []).map((x) => ({ ...x, group: g.name }))));
  }

  return { title: 'Reservations', el, refresh };
}
