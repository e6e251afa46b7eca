// Where each TPU host (worker) of a slice sits in the slice's grid of hosts, following
// src/vocabulary/chip_grid.h: a host owns a block of chips (1 -> 1x1x1, 4 -> 2x2x1,
// 8 -> 2x4x1), the worker grid is the topology divided by that block, and worker ids run
// x fastest, then y, then z. A topology that does not divide falls back to one row.
// Pure functions.

function hostBlock(chipsPerHost) {
  if (chipsPerHost === 1) return [1, 1, 1];
  if (chipsPerHost === 4) return [2, 2, 1];
  if (chipsPerHost === 8) return [2, 4, 1];
  return null;
}

// "4x4" -> [4, 4, 1]; "2x2x4" -> [2, 2, 4]; null when malformed.
export function parseTopology(text) {
  const parts = String(text || '').toLowerCase().split('x').map((p) => Number(p));
  if (parts.length < 1 || parts.length > 3 || parts.some((p) => !Number.isInteger(p) || p <= 0)) return null;
  while (parts.length < 3) parts.push(1);
  return parts;
}

// {extent: [x, y, z] hosts along each axis, coordOf(worker) -> [x, y, z]}.
export function workerGrid(topologyText, hosts) {
  const fallback = { extent: [Math.max(1, hosts), 1, 1], coordOf: (w) => [w, 0, 0] };
  const dims = parseTopology(topologyText);
  if (!dims || hosts <= 0) return fallback;
  const chips = dims[0] * dims[1] * dims[2];
  if (chips % hosts !== 0) return fallback;
  const block = hostBlock(chips / hosts);
  if (!block) return fallback;
  const extent = dims.map((d, i) => d / block[i]);
  if (extent.some((e) => !Number.isInteger(e)) || extent[0] * extent[1] * extent[2] !== hosts) return fallback;
  return {
    extent,
    coordOf: (w) => [w % extent[0], Math.floor(w / extent[0]) % extent[1], Math.floor(w / (extent[0] * extent[1]))],
  };
}
