// The dashboard's building blocks, each updated in place by set()/update(): a semantic table
// with keyed rows, usage bars, state badges, SVG sparklines, and fact lists.
// Main thread only.

import { h, s, setText, setAttr, setClass, reconcile, clear } from './dom.js';
import { stateWord, stateTone, num } from './format.js';

// A state badge: <span class="badge tone-good">alive</span>.
export function badge(state) {
  return h('span', { class: `badge tone-${stateTone(state)}` }, stateWord(state));
}

export function setBadge(el, state) {
  setClass(el, `badge tone-${stateTone(state)}`);
  setText(el, stateWord(state));
}

// A horizontal bar with "used / total" beside it. set(used, total, label).
export class UsageBar {
  constructor(name = '') {
    this.fill = h('div', { class: 'bar-fill' });
    this.track = h('div', { class: 'bar-track' }, this.fill);
    this.text = h('span', { class: 'bar-label' });
    this.el = h('div', { class: 'bar', role: 'meter', 'aria-valuemin': '0', 'aria-label': name }, this.track, this.text);
  }

  set(used, total, label) {
    const u = num(used) ?? 0;
    const t = num(total) ?? 0;
    const ratio = t > 0 ? Math.min(1, Math.max(0, u / t)) : 0;
    this.fill.style.width = `${(ratio * 100).toFixed(1)}%`;
    setClass(this.fill, ratio >= 0.999 && t > 0 ? 'bar-fill full' : ratio >= 0.85 ? 'bar-fill high' : 'bar-fill');
    setAttr(this.el, 'aria-valuemax', String(t));
    setAttr(this.el, 'aria-valuenow', String(u));
    setAttr(this.el, 'aria-valuetext', label);
    setText(this.text, label);
  }
}

// A small line chart of the last samples: values (numbers, or null where a sample has no
// figure) scaled to [0, max]; a gap where a figure is missing. set(values, max, valueText).
export class Sparkline {
  constructor(label, { width = 120, height = 26 } = {}) {
    this.width = width;
    this.height = height;
    this.area = s('path', { class: 'area' });
    this.line = s('path', { class: 'line' });
    this.title = s('title', {}, label);
    this.svg = s('svg', {
      width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label,
    }, this.title, this.area, this.line);
    this.value = h('span', { class: 'value' });
    this.el = h('span', { class: 'spark' }, this.svg, this.value);
  }

  set(values, max, valueText) {
    const n = values.length;
    const top = max > 0 ? max : Math.max(1e-9, ...values.filter((v) => v !== null));
    const step = n > 1 ? this.width / (n - 1) : 0;
    const y = (v) => (this.height - 2 - (Math.min(v, top) / top) * (this.height - 4)).toFixed(1);
    let line = '';
    let area = '';
    let runStart = -1;
    const closeRun = (end) => {
      if (runStart >= 0 && end > runStart) {
        area += `L${(end * step).toFixed(1)},${this.height}L${(runStart * step).toFixed(1)},${this.height}Z`;
      }
      runStart = -1;
    };
    for (let i = 0; i < n; i += 1) {
      const v = values[i];
      if (v === null || v === undefined) {
        closeRun(i - 1);
        continue;
      }
      const point = `${(i * step).toFixed(1)},${y(v)}`;
      if (runStart < 0) {
        runStart = i;
        line += `M${point}`;
        area += `M${point}`;
      } else {
        line += `L${point}`;
        area += `L${point}`;
      }
    }
    closeRun(n - 1);
    setAttr(this.line, 'd', line || 'M0,0');
    setAttr(this.area, 'd', area || 'M0,0');
    setText(this.value, valueText);
  }
}

// A <dl> of label -> value pairs, updated in place. set([[label, value or Node], ...]).
export class Facts {
  constructor() {
    this.el = h('dl', { class: 'facts' });
  }

  set(pairs) {
    const items = pairs.filter((p) => p);
    const flat = [];
    for (const [label, value] of items) flat.push({ key: `dt:${label}`, label }, { key: `dd:${label}`, value });
    reconcile(this.el, flat, (x) => x.key,
      (x) => (x.label !== undefined ? h('dt', {}, x.label) : h('dd')),
      (el, x) => {
        if (x.label !== undefined) return;
        renderCell(el, x.value);
      });
  }
}

// Writes one cell from a description: text (string/number/null), {href, text}, {badge: state},
// {bar: {used, total, label}}, {nodes: () => Node} (rebuilt only when `key` changes), or a Node.
export function renderCell(cell, value) {
  let kind;
  if (value instanceof Node) kind = 'node';
  else if (value && typeof value === 'object') {
    if ('href' in value) kind = 'link';
    else if ('badge' in value) kind = 'badge';
    else if ('bar' in value) kind = 'bar';
    else if ('build' in value) kind = 'build';
    else kind = 'text';
  } else kind = 'text';

  if (cell.__kind !== kind) {
    clear(cell);
    cell.__kind = kind;
    cell.__state = null;
  }
  switch (kind) {
    case 'text':
      setText(cell, value === null || value === undefined ? '' : (typeof value === 'object' ? '' : value));
      break;
    case 'node':
      if (cell.firstChild !== value || cell.childNodes.length !== 1) {
        clear(cell);
        cell.appendChild(value);
      }
      break;
    case 'link': {
      let a = cell.firstChild;
      if (!a) {
        a = h('a');
        cell.appendChild(a);
      }
      setAttr(a, 'href', value.href);
      setText(a, value.text);
      setAttr(a, 'title', value.title);
      break;
    }
    case 'badge': {
      let b = cell.firstChild;
      if (!b) {
        b = badge(value.badge);
        cell.appendChild(b);
      }
      setBadge(b, value.badge);
      break;
    }
    case 'bar': {
      if (!cell.__state) {
        cell.__state = new UsageBar(value.bar.name || '');
        cell.appendChild(cell.__state.el);
      }
      cell.__state.set(value.bar.used, value.bar.total, value.bar.label);
      break;
    }
    case 'build': {
      // value.key says when to rebuild; value.build() makes the content.
      if (!cell.__state || cell.__state.key !== value.key) {
        clear(cell);
        const node = value.build();
        cell.__state = { key: value.key };
        if (node) cell.appendChild(node);
      }
      break;
    }
    default:
      break;
  }
}

// A table of items with one row per key. columns: [{header, cell(item) -> description,
// className}]; options: {caption, keyOf, empty}. update(items) rewrites only what changed.
export class DataTable {
  constructor({ caption, columns, keyOf, empty = 'Nothing to show.', captionHidden = false }) {
    this.columns = columns;
    this.keyOf = keyOf;
    this.empty = empty;
    this.body = h('tbody');
    const head = h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.className || null }, c.header)));
    this.captionEl = caption ? h('caption', { class: captionHidden ? 'visually-hidden' : null }, caption) : null;
    this.table = h('table', {}, this.captionEl, h('thead', {}, head), this.body);
    this.el = h('div', { class: 'table-wrap' }, this.table);
  }

  setCaption(text) {
    if (this.captionEl) setText(this.captionEl, text);
  }

  update(items) {
    if (items.length === 0) {
      reconcile(this.body, [null], () => '__empty__',
        () => h('tr', { class: 'empty' }, h('td', { colspan: String(this.columns.length) })),
        (row) => setText(row.firstChild, this.empty));
      return;
    }
    const first = this.body.firstElementChild;
    if (first && first.__key === '__empty__') first.remove();
    reconcile(this.body, items, this.keyOf,
      () => h('tr', {}, this.columns.map((c) => h('td', { class: c.className || null }))),
      (row, item) => {
        const cells = row.children;
        this.columns.forEach((column, i) => renderCell(cells[i], column.cell(item)));
      },
      { recycle: true });
  }
}

// A section with a heading: returns {el, body}.
export function section(title, ...children) {
  const heading = h('h2', {}, title);
  const el = h('section', {}, heading, ...children);
  return { el, heading };
}
