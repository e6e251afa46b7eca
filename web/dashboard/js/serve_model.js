// Reading Serve's answers for the Serve page: the replicas of GET serve (ServeStatus with each
// deployment's replicas) and the figures of GET serve/metrics (Serve's metric families as JSON:
// {families: [{name, type, help, series: [{labels, value} | {labels, count, sum, bounds,
// counts}]}]}), summed per application and per Serve LLM replica.
// Pure functions.

import { num } from './format.js';

// name -> family.
export function familiesByName(body) {
  const map = new Map();
  for (const family of (body && body.families) || []) map.set(family.name, family);
  return map;
}

// Every series of `name` whose labels include `match`.
export function seriesOf(families, name, match = {}) {
  const family = families.get(name);
  if (!family) return [];
  return (family.series || []).filter((s) => Object.entries(match).every(([k, v]) => (s.labels || {})[k] === v));
}

// The sum of the values (counters, gauges) or of count and sum (histograms) of those series.
export function total(families, name, match = {}) {
  return seriesOf(families, name, match).reduce((acc, s) => acc + (num(s.value) ?? 0), 0);
}

export function histogramTotals(families, name, match = {}) {
  let count = 0;
  let sum = 0;
  for (const s of seriesOf(families, name, match)) {
    count += num(s.count) ?? 0;
    sum += num(s.sum) ?? 0;
  }
  return { count, sum, mean: count > 0 ? sum / count : null };
}

// Every (application, deployment, replica) of a ServeStatus, in the controller's order.
export function replicasOf(status) {
  const rows = [];
  for (const app of (status && status.applications) || []) {
    for (const deployment of app.deployments || []) {
      for (const replica of deployment.replicas || []) {
        rows.push({ application: app.name, deployment: deployment.name, ...replica });
      }
    }
  }
  return rows;
}

// One row per application: the proxy's requests, errors and mean latency (ms).
export function requestsByApplication(families, application) {
  const match = { application };
  const latency = histogramTotals(families, 'ray_serve_http_request_latency_ms', match);
  return {
    requests: total(families, 'ray_serve_num_http_requests_total', match),
    errors: total(families, 'ray_serve_num_http_error_requests_total', match),
    latencyMs: latency.mean,
  };
}

// One row per Serve LLM replica (ray_vllm_* by ReplicaId and model_name): its queues, KV cache,
// tokens, finished requests and mean latencies (seconds).
export function engineRows(families) {
  const keys = new Map();
  for (const family of families.values()) {
    if (!family.name.startsWith('ray_vllm_')) continue;
    for (const s of family.series || []) {
      const labels = s.labels || {};
      if (!labels.ReplicaId) continue;
      const key = `${labels.ReplicaId}\u0000${labels.model_name || ''}`;
      if (!keys.has(key)) keys.set(key, { ReplicaId: labels.ReplicaId, model_name: labels.model_name || '' });
    }
  }
  return [...keys.values()].sort((a, b) => a.ReplicaId.localeCompare(b.ReplicaId)).map((match) => ({
    replica: match.ReplicaId,
    model: match.model_name,
    running: total(families, 'ray_vllm_num_requests_running', match),
    waiting: total(families, 'ray_vllm_num_requests_waiting', match),
    kvCache: seriesOf(families, 'ray_vllm_kv_cache_usage_perc', match).length
      ? total(families, 'ray_vllm_kv_cache_usage_perc', match) : null,
    promptTokens: total(families, 'ray_vllm_prompt_tokens_total', match),
    generationTokens: total(families, 'ray_vllm_generation_tokens_total', match),
    finished: total(families, 'ray_vllm_request_success_total', match),
    ttft: histogramTotals(families, 'ray_vllm_time_to_first_token_seconds', match).mean,
    itl: histogramTotals(families, 'ray_vllm_inter_token_latency_seconds', match).mean,
    e2e: histogramTotals(families, 'ray_vllm_e2e_request_latency_seconds', match).mean,
  }));
}
