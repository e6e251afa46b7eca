// One node (#/nodes/<id>): its facts, resources used of total, labels, the hardware view (devices
// by NUMA node with their NICs and links, see topology.js) and per-device utilization and memory
// as sparklines from the telemetry endpoint (a figure a device cannot measure shows "n/a").
// Polls GET nodes/<id> and then, for a node with devices, GET nodes/<id>/telemetry. Main thread only.

import { h, setText, clear, reconcile, setHidden } from '../dom.js';
import {
  formatDuration, formatBytes, formatPercent, formatCount, num, stateWord,
} from '../format.js';
import { DataTable, Facts, Sparkline, setBadge, badge } from '../widgets.js';
import {
  nodeResources, usageText, acceleratorSummary, nodeLabels, nodeDevices, ACCELERATOR_TYPE_LABEL,
} from '../model.js';
import { HardwareView, signature } from '../topology.js';

function latest(samples, field) {
  const last = samples.length ? samples[samples.length - 1] : null;
  return last ? num(last[field]) : null;
}

function series(samples, pick) {
  return samples.map((sample) => {
    const v = pick(sample);
    return v === null || v === undefined || Number.isNaN(v) ? null : v;
  });
}

function memoryRatio(sample) {
  const used = num(sample.memory_used_bytes);
  const total = num(sample.memory_total_bytes);
  return used !== null && total ? used / total : null;
}

export function createNodeDetailPage({ api, args }) {
  const id = args[0];
  const stateBadge = badge('UNKNOWN');
  const facts = new Facts();
  const missing = h('p', { class: 'muted', hidden: true });
  const resources = new DataTable({
    caption: 'Resources of this node',
    captionHidden: true,
    keyOf: (r) => r.resource,
    empty: 'This node advertises no resources.',
    columns: [
      { header: 'Resource', className: 'mono', cell: (r) => r.resource },
      { header: 'In use', cell: (r) => ({ bar: { name: `${r.resource} used`, used: r.used, total: r.total, label: usageText(r.resource, r.used, r.total) } }) },
      { header: 'Available', className: 'num', cell: (r) => usageText(r.resource, r.available, r.total).split(' / ')[0] },
    ],
  });
  const labels = h('div', { class: 'labels' });
  const hardware = h('div', { class: 'hw' });
  const hardwareNone = h('p', { class: 'muted' }, 'This node reports no accelerator devices.');
  const telemetryNote = h('p', { class: 'muted' });
  const sparks = new Map();

  function sparkFor(key, label) {
    if (!sparks.has(key)) sparks.set(key, new Sparkline(label));
    return sparks.get(key);
  }

  const devices = new DataTable({
    caption: 'Devices and their recent figures',
    captionHidden: true,
    keyOf: (d) => d.key,
    empty: 'No devices.',
    columns: [
      { header: 'Device', className: 'nowrap', cell: (d) => `${d.resource} ${d.index}` },
      { header: 'Type', cell: (d) => d.type || '—' },
      { header: 'NUMA', className: 'num', cell: (d) => (d.numa === null || d.numa < 0 ? '?' : String(d.numa)) },
      { header: 'Nearest NIC', className: 'mono', cell: (d) => d.nic || '—' },
      {
        header: 'Utilization',
        cell: (d) => {
          const values = series(d.samples, (x) => num(x.utilization));
          if (!values.some((v) => v !== null)) return 'n/a';
          const spark = sparkFor(`${d.key}:util`, `${d.resource} ${d.index} utilization`);
          spark.set(values, 1, formatPercent(latest(d.samples, 'utilization')));
          return spark.el;
        },
      },
      {
        header: 'Memory',
        cell: (d) => {
          const values = series(d.samples, memoryRatio);
          if (!values.some((v) => v !== null)) return 'n/a';
          const spark = sparkFor(`${d.key}:mem`, `${d.resource} ${d.index} memory used`);
          const used = latest(d.samples, 'memory_used_bytes');
          const total = latest(d.samples, 'memory_total_bytes');
          spark.set(values, 1, used === null || total === null ? 'n/a' : `${formatBytes(used)} / ${formatBytes(total)}`);
          return spark.el;
        },
      },
      { header: 'Power', className: 'num', cell: (d) => { const v = latest(d.samples, 'power_watts'); return v === null ? 'n/a' : `${Math.round(v)} W`; } },
      { header: 'Temp.', className: 'num', cell: (d) => { const v = latest(d.samples, 'temperature_celsius'); return v === null ? 'n/a' : `${Math.round(v)} °C`; } },
      { header: 'Duty cycle', className: 'num', cell: (d) => formatPercent(latest(d.samples, 'duty_cycle')) },
      { header: 'Tensor cores', className: 'num', cell: (d) => formatPercent(latest(d.samples, 'tensorcore_activity')) },
    ],
  });

  const views = new Map(); // resource -> {sig, view}
  const title = h('h1', {}, h('span', { class: 'mono' }, id), stateBadge);
  const el = h('div', {},
    h('p', {}, h('a', { href: '#/nodes' }, '← All nodes')),
    title,
    missing,
    h('div', { class: 'panel' }, facts.el),
    h('h2', {}, 'Resources'),
    resources.el,
    h('h2', {}, 'Labels'),
    h('div', { class: 'panel' }, labels),
    h('h2', {}, 'Hardware'),
    h('div', { class: 'panel' }, hardware, hardwareNone),
    h('h2', {}, 'Devices'),
    telemetryNote,
    devices.el);

  function renderHardware(info) {
    const type = nodeLabels(info)[ACCELERATOR_TYPE_LABEL] || '';
    const topologies = nodeDevices(info).filter((t) => (num(t.count) ?? 0) > 0);
    const wanted = new Set(topologies.map((t) => t.resource));
    for (const resource of [...views.keys()]) if (!wanted.has(resource)) views.delete(resource);
    for (const topo of topologies) {
      const sig = signature(topo, type);
      const entry = views.get(topo.resource);
      if (!entry || entry.sig !== sig) views.set(topo.resource, { sig, view: new HardwareView(topo, type, `${id} ${topo.resource}`) });
    }
    const wantedNodes = topologies.map((t) => views.get(t.resource).view.el);
    if (wantedNodes.length !== hardware.children.length || wantedNodes.some((n, i) => hardware.children[i] !== n)) {
      clear(hardware);
      for (const n of wantedNodes) hardware.appendChild(n);
    }
    setHidden(hardwareNone, topologies.length > 0);
  }

  function deviceRows(info, telemetry) {
    const type = nodeLabels(info)[ACCELERATOR_TYPE_LABEL] || '';
    const measured = new Map();
    for (const d of (telemetry && telemetry.devices) || []) measured.set(`${d.resource}:${num(d.index)}`, d);
    const rows = [];
    const seen = new Set();
    for (const topo of nodeDevices(info)) {
      const count = num(topo.count) ?? 0;
      for (let i = 0; i < count; i += 1) {
        const key = `${topo.resource}:${i}`;
        seen.add(key);
        const m = measured.get(key);
        rows.push({
          key, resource: topo.resource, index: i, type: (m && m.type) || type,
          numa: num((topo.numa_node || [])[i]), nic: (topo.nearest_nic || [])[i] || '',
          samples: (m && Array.isArray(m.samples)) ? m.samples : [],
        });
      }
    }
    for (const [key, m] of measured) {
      if (seen.has(key)) continue;
      rows.push({ key, resource: m.resource, index: num(m.index), type: m.type || '', numa: null, nic: '', samples: m.samples || [] });
    }
    return rows;
  }

  async function refresh(signal) {
    const info = (await api.get(`nodes/${encodeURIComponent(id)}`, { signal })).node;
    setHidden(missing, Boolean(info));
    if (!info) {
      setText(missing, `The head lists no node ${id}.`);
      setBadge(stateBadge, 'missing');
      return;
    }
    // Only a node with devices has telemetry to ask for (and a 404 would be a console error).
    const hasDevices = nodeDevices(info).some((t) => (num(t.count) ?? 0) > 0);
    const telemetry = !hasDevices ? { devices: [] } : await api.get(`nodes/${encodeURIComponent(id)}/telemetry`, { signal })
      .catch((error) => {
        if (error && error.name === 'ApiError' && error.status === 404) return null;
        throw error;
      });
    setBadge(stateBadge, info.state);
    const node = info.node || {};
    facts.set([
      ['Address', node.address || '—'],
      ['State', stateWord(info.state)],
      ['Last heartbeat', `${formatDuration(num(info.last_heartbeat_age_ms))} ago`],
      ['Workers', formatCount(num(info.workers) ?? 0)],
      ['Accelerators', acceleratorSummary(info) || 'none'],
      ['Incarnation', node.incarnation || '—'],
    ]);
    resources.update(nodeResources(info));
    const pairs = Object.entries(nodeLabels(info)).sort(([a], [b]) => a.localeCompare(b));
    reconcile(labels, pairs, ([k]) => k, () => h('span', { class: 'label-chip' }), (chip, [k, v]) => setText(chip, `${k}=${v}`));
    if (!pairs.length) reconcile(labels, [['', '']], () => '__none__', () => h('span', { class: 'muted' }, 'no labels'), () => {});

    renderHardware(info);
    const rows = deviceRows(info, telemetry);
    for (const row of rows) {
      const entry = views.get(row.resource);
      if (!entry) continue;
      const util = latest(row.samples, 'utilization');
      if (util !== null) entry.view.setLoad(row.index, util, 'util');
      else entry.view.setLoad(row.index, latest(row.samples, 'duty_cycle'), 'duty');
    }
    devices.update(rows);
    const samples = rows.reduce((m, r) => Math.max(m, r.samples.length), 0);
    if (telemetry === null) setText(telemetryNote, 'The head has no telemetry for this node.');
    else if (!samples) setText(telemetryNote, 'No telemetry samples yet.');
    else {
      const first = rows.find((r) => r.samples.length === samples).samples;
      const span = num(first[first.length - 1].time_ms) - num(first[0].time_ms);
      setText(telemetryNote, `Last ${samples} samples${span > 0 ? ` over ${formatDuration(span)}` : ''}; figures a device cannot measure show n/a.`);
    }
  }

  return { title: `Node ${id}`, el, refresh };
}
