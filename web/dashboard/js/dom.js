// Small DOM helpers: element builders, writes that skip unchanged values, and keyed
// reconciliation so a poll updates rows in place instead of rebuilding them.
// Main thread only; each helper touches only the elements it is given.

const SVG_NS = 'http://www.w3.org/2000/svg';

function append(parent, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(parent, c);
  } else if (child instanceof Node) {
    parent.appendChild(child);
  } else {
    parent.appendChild(document.createTextNode(String(child)));
  }
}

function applyProps(el, props) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') el.setAttribute('class', value);
    else if (name === 'text') el.textContent = String(value);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
}

// h('td', {class: 'num'}, 'text', childNode, [more]) -> HTMLElement.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  applyProps(el, props);
  append(el, children);
  return el;
}

// The same for SVG elements.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  applyProps(el, props);
  append(el, children);
  return el;
}

export function setText(el, value) {
  const text = value === null || value === undefined ? '' : String(value);
  if (el.textContent !== text) el.textContent = text;
}

export function setAttr(el, name, value) {
  if (value === null || value === undefined || value === false) {
    if (el.hasAttribute(name)) el.removeAttribute(name);
    return;
  }
  const text = value === true ? '' : String(value);
  if (el.getAttribute(name) !== text) el.setAttribute(name, text);
}

export function setClass(el, className) {
  if (el.getAttribute('class') !== className) el.setAttribute('class', className);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function setHidden(el, hidden) {
  if (el.hidden !== hidden) el.hidden = hidden;
}

// Makes container's children match items, in order: an existing child with the item's key is
// updated and moved, a vanished key is removed, a new key is created. create(item) -> Element;
// update(element, item) writes only what changed (setText / setAttr). With {recycle: true}, a new
// key reuses a vanished key's element first (for rows whose update() rewrites every cell), so
// paging through a table rewrites text instead of building rows.
export function reconcile(container, items, keyOf, create, update, { recycle = false } = {}) {
  const existing = new Map();
  for (const child of Array.from(container.children)) {
    if (child.__key !== undefined) existing.set(child.__key, child);
    else container.removeChild(child);
  }
  const keys = items.map(keyOf);
  let spare = [];
  if (recycle) {
    const wanted = new Set(keys);
    for (const [key, el] of existing) {
      if (!wanted.has(key)) {
        spare.push(el);
        existing.delete(key);
      }
    }
  }
  let cursor = container.firstElementChild;
  items.forEach((item, i) => {
    const key = keys[i];
    let el = existing.get(key);
    if (el) {
      existing.delete(key);
    } else {
      el = spare.length ? spare.shift() : create(item);
      el.__key = key;
    }
    update(el, item);
    if (el === cursor) {
      cursor = cursor.nextElementSibling;
    } else {
      container.insertBefore(el, cursor);
    }
  });
  for (const el of existing.values()) el.remove();
  for (const el of spare) el.remove();
  spare = null;
}
