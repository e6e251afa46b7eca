// Reading the API's messages: a node's resources (total, available, used), which resources are
// the main ones, accelerator summaries, slice hosts from node labels, jobs by the reservation
// they hold, and the live event feed (GET events?after=SEQ).
// Pure functions, except EventFeed, which one page owns.

import { num, formatAmount, formatCount } from './format.js';

export const LABEL_PREFIX = 'tessera.io/';
export const SLICE_NAME_LABEL = `${LABEL_PREFIX}tpu-slice-name`;
export const WORKER_ID_LABEL = `${LABEL_PREFIX}tpu-worker-id`;
export const ACCELERATOR_TYPE_LABEL = `${LABEL_PREFIX}accelerator-type`;

const LEADING = ['CPU', 'memory', 'object_store_memory'];

export function nodeId(info) {
  return (info && info.node && info.node.node_id) || '';
}

export function nodeLabels(info) {
  return (info && info.node && info.node.labels) || {};
}

export function nodeDevices(info) {
  return (info && info.node && Array.isArray(info.node.devices)) ? info.node.devices : [];
}

export function isAlive(info) {
  return info && info.state === 'ALIVE';
}

// Resource names a person reads first: CPU, memory, object store, then device resources; the
// rest (slice markers, accelerator_type:X) are "other".
export function isPrimaryResource(name, deviceResources) {
  return LEADING.includes(name) || deviceResources.has(name);
}

export function orderResources(names, deviceResources) {
  const rank = (n) => {
    const i = LEADING.indexOf(n);
    if (i >= 0) return i;
    return deviceResources.has(n) ? 10 : 20;
  };
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

export function deviceResourceNames(nodes) {
  const names = new Set();
  for (const info of nodes) for (const d of nodeDevices(info)) if (d.resource) names.add(d.resource);
  return names;
}

// [{resource, total, available, used}] of one NodeInfo, main resources first.
export function nodeResources(info) {
  const total = (info && info.node && info.node.resources) || {};
  const available = (info && info.available) || {};
  const devices = new Set(nodeDevices(info).map((d) => d.resource));
  return orderResources(Object.keys(total), devices).map((resource) => {
    const t = num(total[resource]) ?? 0;
    const a = num(available[resource]) ?? 0;
    return { resource, total: t, available: a, used: Math.max(0, t - a) };
  });
}

export function usageText(resource, used, total) {
  return `${formatAmount(resource, used)} / ${formatAmount(resource, total)}`;
}

// "8 × H100" / "4 × TPU-V6E" / "" for a node without devices.
export function acceleratorSummary(info) {
  const type = nodeLabels(info)[ACCELERATOR_TYPE_LABEL] || '';
  const parts = nodeDevices(info)
    .filter((d) => (num(d.count) ?? 0) > 0)
    .map((d) => `${formatCount(num(d.count))} × ${type || d.resource}`);
  return parts.join(', ');
}

// Every node's labels and id as one lower-case string, for the filter box.
export function searchText(info) {
  const labels = Object.entries(nodeLabels(info)).map(([k, v]) => `${k}=${v}`).join(' ');
  return `${nodeId(info)} ${(info.node && info.node.address) || ''} ${info.state || ''} ${labels} ${acceleratorSummary(info)}`.toLowerCase();
}

// slice name -> [{worker, node: NodeInfo}] from the hosts' labels.
export function sliceHostsFromNodes(nodes) {
  const bySlice = new Map();
  for (const info of nodes) {
    const labels = nodeLabels(info);
    const name = labels[SLICE_NAME_LABEL];
    if (!name) continue;
    const worker = num(labels[WORKER_ID_LABEL]);
    if (!bySlice.has(name)) bySlice.set(name, []);
    bySlice.get(name).push({ worker: worker ?? -1, node: info });
  }
  return bySlice;
}

// reservation name (placement group or slice group) -> gang JobStatus holding it now.
export function jobsByReservation(jobsResponse) {
  const map = new Map();
  for (const job of (jobsResponse && jobsResponse.jobs) || []) {
    if (job.reservation) map.set(job.reservation, job);
  }
  return map;
}

export function jobHref(job) {
  return `#/jobs/${encodeURIComponent(job.job_id)}`;
}

export function nodeHref(id) {
  return `#/nodes/${encodeURIComponent(id)}`;
}

// The resources of an Allocation in one line: "TPU 4 (0-3), CPU 8".
export function allocationText(allocation) {
  if (!allocation) return '';
  const resources = allocation.resources || {};
  const instances = new Map();
  for (const grant of allocation.devices || []) instances.set(grant.resource, grant.instances || []);
  const names = orderResources(Object.keys(resources), new Set(instances.keys()));
  return names.map((name) => {
    const list = instances.get(name);
    const which = list && list.length ? ` [${list.join(',')}]` : '';
    return `${name} ${formatAmount(name, resources[name])}${which}`;
  }).join(', ');
}

// The event feed: polls events (then events?after=<last seq seen>, keeping only seqs above it,
// so it does not matter whether the head reads `after` as ">" or ">=") and keeps the newest
// `keep` events, oldest first. A head whose `next` went back (it restarted) starts the feed again.
export class EventFeed {
  constructor(api, { keep = 2000 } = {}) {
    this.api = api;
    this.keep = keep;
    this.events = [];
    this.lastSeq = null;
  }

  async poll(signal) {
    for (let round = 0; round < 10; round += 1) {
      const query = this.lastSeq === null ? {} : { after: this.lastSeq };
      const body = await this.api.get('events', { signal, query });
      const events = Array.isArray(body.events) ? body.events : [];
      const next = num(body.next);
      if (this.lastSeq !== null && next !== null && next < this.lastSeq) {
        this.events = [];
        this.lastSeq = null;
        continue;
      }
      const floor = this.lastSeq === null ? -Infinity : this.lastSeq;
      const fresh = events
        .filter((e) => (num(e.seq) ?? -Infinity) > floor)
        .sort((a, b) => num(a.seq) - num(b.seq));
      if (!fresh.length) return;
      this.events.push(...fresh);
      if (this.events.length > this.keep) this.events.splice(0, this.events.length - this.keep);
      this.lastSeq = num(fresh[fresh.length - 1].seq);
    }
  }

  newestFirst() {
    return [...this.events].reverse();
  }
}
