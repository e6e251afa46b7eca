// Serve (#/serve): Serve's applications with their status and the proxy's requests, the
// deployments with their status, trigger and message, every replica with its state, node,
// process and why one waits to be placed (the scheduler's explanation), the proxies, and the
// Serve LLM replicas' engine figures (queues, KV cache, tokens, mean latencies).
// Polls GET serve and GET serve/metrics. Main thread only.

import { h, setText, setHidden } from '../dom.js';
import { formatCount, formatDuration, formatPercent, formatTime, num } from '../format.js';
import { DataTable } from '../widgets.js';
import { nodeHref } from '../model.js';
import { engineRows, familiesByName, replicasOf, requestsByApplication } from '../serve_model.js';

function card(label) {
  const figure = h('div', { class: 'figure' }, '—');
  const detail = h('div', { class: 'detail' });
  const el = h('section', { class: 'card', 'aria-label': label }, h('div', { class: 'label' }, label), figure, detail);
  return { el, figure, detail };
}

const seconds = (s) => (num(s) === null ? '—' : formatDuration(num(s) * 1000));
const since = (unixSeconds) => (num(unixSeconds) ? formatDuration(Date.now() - num(unixSeconds) * 1000) : '—');
const nodeCell = (id) => (id ? { href: nodeHref(id), text: id } : '—');

export function createServePage({ api }) {
  const appsCard = card('Applications running');
  const replicasCard = card('Replicas running');
  const requestsCard = card('HTTP requests');
  const tokensCard = card('Tokens generated');
  const stopped = h('p', { class: 'muted' }, 'Serve is not running: no application was deployed, or Serve was shut down.');

  const applications = new DataTable({
    caption: 'Applications',
    captionHidden: true,
    keyOf: (a) => a.name,
    empty: 'No applications.',
    columns: [
      { header: 'Application', className: 'mono', cell: (a) => a.name },
      { header: 'Status', cell: (a) => ({ badge: a.status }) },
      { header: 'Route prefix', className: 'mono', cell: (a) => a.route_prefix || '—' },
      { header: 'Ingress', className: 'mono', cell: (a) => a.ingress_deployment || '—' },
      { header: 'Requests', className: 'num', cell: (a) => formatCount(a.figures.requests) },
      { header: 'Errors', className: 'num', cell: (a) => formatCount(a.figures.errors) },
      { header: 'Mean latency', className: 'num', cell: (a) => (a.figures.latencyMs === null ? '—' : formatDuration(a.figures.latencyMs)) },
      { header: 'Deployed', className: 'nowrap', cell: (a) => formatTime((num(a.last_deployed_time_s) ?? 0) * 1000) },
      { header: 'Message', className: 'wrap', cell: (a) => a.message || '' },
    ],
  });

  const deployments = new DataTable({
    caption: 'Deployments',
    captionHidden: true,
    keyOf: (d) => `${d.application}/${d.name}`,
    empty: 'No deployments.',
    columns: [
      { header: 'Deployment', className: 'mono', cell: (d) => d.name },
      { header: 'Application', className: 'mono', cell: (d) => d.application },
      { header: 'Status', cell: (d) => ({ badge: d.status }) },
      { header: 'Trigger', cell: (d) => (d.status_trigger || '').toLowerCase().replace(/_/g, ' ') },
      { header: 'Running / target', className: 'num', cell: (d) => `${num((d.replica_states || {}).RUNNING) ?? 0} / ${num(d.target_num_replicas) ?? 0}` },
      { header: 'Replicas', cell: (d) => Object.entries(d.replica_states || {}).map(([s, n]) => `${n} ${s.toLowerCase()}`).join(', ') || 'none' },
      { header: 'Message', className: 'wrap', cell: (d) => d.message || '' },
    ],
  });

  const replicas = new DataTable({
    caption: 'Replicas',
    captionHidden: true,
    keyOf: (r) => r.replica_id,
    empty: 'No replicas.',
    columns: [
      { header: 'Replica', className: 'mono', cell: (r) => r.replica_id },
      { header: 'State', cell: (r) => ({ badge: r.state }) },
      { header: 'For', className: 'num nowrap', cell: (r) => since(r.state_since_s) },
      { header: 'Node', className: 'nowrap', cell: (r) => nodeCell(r.node_id) },
      { header: 'PID', className: 'num', cell: (r) => (num(r.pid) ? String(r.pid) : '—') },
      { header: 'Actor', className: 'mono', cell: (r) => r.actor_id || '—' },
      { header: 'Why it waits', className: 'wrap', cell: (r) => r.message || '' },
    ],
  });

  const proxies = new DataTable({
    caption: 'Proxies',
    captionHidden: true,
    keyOf: (p) => p.node_id,
    empty: 'No proxies.',
    columns: [
      { header: 'Node', className: 'mono', cell: (p) => p.node_id },
      { header: 'Status', cell: (p) => ({ badge: p.status }) },
      { header: 'Address', className: 'mono', cell: (p) => p.address || '—' },
    ],
  });

  const engines = new DataTable({
    caption: 'Serve LLM engines',
    captionHidden: true,
    keyOf: (e) => `${e.replica}/${e.model}`,
    empty: 'No Serve LLM replica reports engine metrics.',
    columns: [
      { header: 'Replica', className: 'mono', cell: (e) => e.replica },
      { header: 'Model', className: 'mono', cell: (e) => e.model },
      { header: 'Running', className: 'num', cell: (e) => formatCount(e.running) },
      { header: 'Waiting', className: 'num', cell: (e) => formatCount(e.waiting) },
      { header: 'KV cache', className: 'num', cell: (e) => (e.kvCache === null ? '—' : formatPercent(e.kvCache)) },
      { header: 'Prompt tokens', className: 'num', cell: (e) => formatCount(e.promptTokens) },
      { header: 'Generated tokens', className: 'num', cell: (e) => formatCount(e.generationTokens) },
      { header: 'Finished', className: 'num', cell: (e) => formatCount(e.finished) },
      { header: 'Mean TTFT', className: 'num', cell: (e) => seconds(e.ttft) },
      { header: 'Mean ITL', className: 'num', cell: (e) => seconds(e.itl) },
      { header: 'Mean E2E', className: 'num', cell: (e) => seconds(e.e2e) },
    ],
  });

  const el = h('div', {},
    h('h1', {}, 'Serve'),
    stopped,
    h('div', { class: 'cards' }, appsCard.el, replicasCard.el, requestsCard.el, tokensCard.el),
    h('h2', {}, 'Applications'), applications.el,
    h('h2', {}, 'Deployments'), deployments.el,
    h('h2', {}, 'Replicas'), replicas.el,
    h('h2', {}, 'Serve LLM engines'),
    h('p', { class: 'subtitle' }, 'The engines’ vLLM metrics (ray_vllm_*), as the replicas last reported them (every 10 s).'),
    engines.el,
    h('h2', {}, 'Proxies'), proxies.el);

  async function refresh(signal) {
    const [status, metrics] = await Promise.all([
      api.get('serve', { signal }),
      api.get('serve/metrics', { signal }),
    ]);
    const families = familiesByName(metrics);
    const apps = (status.applications || []).map((a) => ({ ...a, figures: requestsByApplication(families, a.name) }));
    const rows = replicasOf(status);
    const engineList = engineRows(families);

    setHidden(stopped, Boolean(status.started));
    setText(appsCard.figure, `${apps.filter((a) => a.status === 'RUNNING').length} / ${apps.length}`);
    setText(appsCard.detail, `${(status.proxies || []).length} ${(status.proxies || []).length === 1 ? 'proxy' : 'proxies'}`);
    const running = rows.filter((r) => r.state === 'RUNNING').length;
    setText(replicasCard.figure, `${running} / ${rows.length}`);
    const waiting = rows.filter((r) => r.message).length;
    setText(replicasCard.detail, waiting ? `${waiting} waiting for resources` : 'none waiting for resources');
    const requests = apps.reduce((acc, a) => acc + a.figures.requests, 0);
    const errors = apps.reduce((acc, a) => acc + a.figures.errors, 0);
    setText(requestsCard.figure, formatCount(requests));
    setText(requestsCard.detail, `${formatCount(errors)} errors`);
    setText(tokensCard.figure, formatCount(engineList.reduce((acc, e) => acc + e.generationTokens, 0)));
    setText(tokensCard.detail, `${engineList.length} Serve LLM ${engineList.length === 1 ? 'replica' : 'replicas'}`);

    applications.update(apps);
    deployments.update(apps.flatMap((a) => (a.deployments || []).map((d) => ({ ...d, application: a.name }))));
    replicas.update(rows);
    engines.update(engineList);
    proxies.update(status.proxies || []);
  }

  return { title: 'Serve', el, refresh };
}
