// The hardware view of one node's devices of one resource (a DeviceTopology): boxes grouped by
// NUMA node, each device's nearest NIC below it, and the links between devices as arcs above
// (kind, lanes and GB/s on hover). setLoad() shades a device by its latest utilization.
// Main thread only; built once per topology (signature()) and then only shaded.

import { s, setAttr, setText } from './dom.js';
import { num, formatPercent } from './format.js';

const BOX_W = 84;
const BOX_H = 46;
const GAP = 12;
const PAD = 12;
const GROUP_TOP_PAD = 10;
const GROUP_FOOT = 22; // the NUMA node's name sits under its devices, clear of the link arcs
const GROUP_GAP = 26;
const NIC_W = 64;
const NIC_H = 20;
const NIC_DROP = 24;
const MARGIN = 10;

const KIND_COLOURS = {
  nvlink: '#1f8a4c', nvswitch: '#1f8a4c', xgmi: '#c0661b', ici: '#2f6fdb',
  neuronlink: '#8a3fc0', 'infinity-fabric': '#c0661b', pcie: '#7b8494',
};

// What the view depends on, so a poll rebuilds it only when the hardware itself changed.
export function signature(topo, type) {
  return JSON.stringify([topo.resource, topo.count, topo.numa_node, topo.nearest_nic, topo.links, type]);
}

function uniqueLinks(links) {
  const seen = new Set();
  const out = [];
  for (const link of links || []) {
    const a = num(link.a);
    const b = num(link.b);
    if (a === null || b === null || a === b) continue;
    const key = `${Math.min(a, b)}-${Math.max(a, b)}-${link.kind || ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ ...link, a, b });
  }
  return out;
}

export class HardwareView {
  // topo: DeviceTopology; type: the accelerator type ("H100"), or "".
  constructor(topo, type, nodeLabel) {
    const count = num(topo.count) ?? 0;
    const resource = topo.resource || 'device';
    const numaOf = (i) => {
      const n = num((topo.numa_node || [])[i]);
      return n === null ? -1 : n;
    };
    const nicOf = (i) => (topo.nearest_nic || [])[i] || '';

    // NUMA groups in order, unknown (-1) last.
    const groups = new Map();
    for (let i = 0; i < count; i += 1) {
      const n = numaOf(i);
      if (!groups.has(n)) groups.set(n, []);
      groups.get(n).push(i);
    }
    const order = [...groups.keys()].sort((a, b) => (a < 0) - (b < 0) || a - b);

    const links = uniqueLinks(topo.links).filter((l) => l.a < count && l.b < count);
    const deviceX = new Map();
    const groupBoxes = [];
    const nicBoxes = [];
    let cursor = MARGIN;
    for (const numa of order) {
      const members = groups.get(numa);
      const left = cursor;
      members.forEach((dev, k) => deviceX.set(dev, left + PAD + k * (BOX_W + GAP)));
      let right = left + PAD * 2 + members.length * BOX_W + (members.length - 1) * GAP;
      // One NIC box per NIC name, under the middle of the devices nearest to it.
      const byNic = new Map();
      for (const dev of members) {
        const nic = nicOf(dev);
        if (!nic) continue;
        if (!byNic.has(nic)) byNic.set(nic, []);
        byNic.get(nic).push(dev);
      }
      let nicCursor = left + PAD;
      for (const [nic, devs] of byNic) {
        const centre = devs.reduce((sum, d) => sum + deviceX.get(d) + BOX_W / 2, 0) / devs.length;
        const x = Math.max(nicCursor, centre - NIC_W / 2);
        nicBoxes.push({ nic, x, devs });
        nicCursor = x + NIC_W + 6;
      }
      right = Math.max(right, nicCursor - 6 + PAD);
      groupBoxes.push({ numa, left, right, members });
      cursor = right + GROUP_GAP;
    }
    const width = Math.max(cursor - GROUP_GAP + MARGIN, 200);

    const centre = (dev) => deviceX.get(dev) + BOX_W / 2;
    const arcHeight = (l) => Math.min(150, 18 + 0.32 * Math.abs(centre(l.a) - centre(l.b)));
    const maxArc = links.reduce((m, l) => Math.max(m, arcHeight(l)), 0);
    const groupTop = MARGIN + maxArc + 4;
    const devTop = groupTop + GROUP_TOP_PAD;
    const nicTop = devTop + BOX_H + NIC_DROP;
    const groupBottom = (nicBoxes.length ? nicTop + NIC_H : devTop + BOX_H) + GROUP_FOOT;
    const legendY = groupBottom + 18;
    const height = legendY + 8;

    const label = `${nodeLabel}: ${count} ${resource} in ${order.length} NUMA node${order.length === 1 ? '' : 's'}, ${links.length} link${links.length === 1 ? '' : 's'}`;
    this.svg = s('svg', {
      class: 'hw-svg', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label,
    }, s('title', {}, label));

    for (const g of groupBoxes) {
      this.svg.appendChild(s('rect', {
        class: 'numa', x: g.left, y: groupTop, width: g.right - g.left, height: groupBottom - groupTop, rx: 8,
      }));
      this.svg.appendChild(s('text', { class: 'numa-title', x: g.left + PAD, y: groupBottom - 7 },
        g.numa < 0 ? 'NUMA unknown' : `NUMA ${g.numa}`));
    }

    for (const box of nicBoxes) {
      for (const dev of box.devs) {
        this.svg.appendChild(s('line', {
          class: 'nic-wire', x1: centre(dev), y1: devTop + BOX_H, x2: box.x + NIC_W / 2, y2: nicTop,
        }));
      }
      this.svg.appendChild(s('g', {},
        s('title', {}, `NIC ${box.nic}: nearest to ${resource} ${box.devs.join(', ')}`),
        s('rect', { class: 'nic', x: box.x, y: nicTop, width: NIC_W, height: NIC_H, rx: 4 }),
        s('text', { class: 'nic-text', x: box.x + NIC_W / 2, y: nicTop + 14, 'text-anchor': 'middle' }, box.nic)));
    }

    const kinds = new Map();
    for (const link of links) {
      const x1 = centre(link.a);
      const x2 = centre(link.b);
      const rise = arcHeight(link);
      const d = `M${x1},${devTop} Q${(x1 + x2) / 2},${devTop - 2 * rise} ${x2},${devTop}`;
      const gbps = num(link.gigabytes_per_second);
      const lanes = num(link.lanes);
      const kind = link.kind || 'link';
      const words = [kind];
      if (lanes) words.push(`${lanes} lane${lanes === 1 ? '' : 's'}`);
      if (gbps !== null && gbps > 0) words.push(`${gbps} GB/s`);
      const widthPx = 1 + Math.min(4, Math.log2(1 + (gbps || 0) / 25));
      const colour = KIND_COLOURS[kind] || '#2f6fdb';
      this.svg.appendChild(s('g', { class: 'link-group' },
        s('title', {}, `${resource} ${link.a} ↔ ${resource} ${link.b}: ${words.join(', ')}`),
        s('path', { class: 'link', d, 'stroke-width': widthPx.toFixed(2), style: `stroke:${colour}` }),
        s('path', { class: 'link-hit', d })));
      const summary = kinds.get(kind) || { count: 0, gbps: new Set() };
      summary.count += 1;
      if (gbps) summary.gbps.add(gbps);
      kinds.set(kind, summary);
    }

    this.loads = new Map();
    for (let i = 0; i < count; i += 1) {
      const x = deviceX.get(i);
      const nic = nicOf(i);
      const numa = numaOf(i);
      const tip = `${resource} ${i}${type ? ` · ${type}` : ''} · ${numa < 0 ? 'NUMA unknown' : `NUMA ${numa}`}${nic ? ` · NIC ${nic}` : ''}`;
      const load = s('rect', { class: 'dev-load', x: x + 1, y: devTop + BOX_H - 1, width: BOX_W - 2, height: 0, rx: 5 });
      const loadText = s('text', { class: 'dev-sub', x: x + BOX_W / 2, y: devTop + 38, 'text-anchor': 'middle' }, type || '');
      this.svg.appendChild(s('g', { class: 'device' },
        s('title', {}, tip),
        s('rect', { class: 'dev', x, y: devTop, width: BOX_W, height: BOX_H, rx: 6 }),
        load,
        s('text', { class: 'dev-text', x: x + BOX_W / 2, y: devTop + 20, 'text-anchor': 'middle' }, `${resource} ${i}`),
        loadText));
      this.loads.set(i, { rect: load, text: loadText, top: devTop, type: type || '' });
    }

    const legend = [...kinds.entries()].map(([kind, v]) => `${kind} × ${v.count}${v.gbps.size ? ` (${[...v.gbps].join('/')} GB/s)` : ''}`);
    this.svg.appendChild(s('text', { class: 'legend', x: MARGIN, y: legendY },
      legend.length ? `Links: ${legend.join(', ')} — hover a link for its kind and bandwidth` : 'No links between these devices reported'));

    this.el = this.svg;
  }

  // ratio in [0, 1] or null (not measured); what: the figure's short name ("util", "duty").
  setLoad(index, ratio, what = 'util') {
    const entry = this.loads.get(index);
    if (!entry) return;
    const r = num(ratio);
    const h = r === null ? 0 : Math.max(0, Math.min(1, r)) * (BOX_H - 2);
    setAttr(entry.rect, 'height', h.toFixed(1));
    setAttr(entry.rect, 'y', (entry.top + BOX_H - 1 - h).toFixed(1));
    setText(entry.text, r === null ? entry.type : `${what} ${formatPercent(r)}`);
  }
}
