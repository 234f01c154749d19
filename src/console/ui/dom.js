// Building the page. Every string from the server (keys, owners, election values: they may hold
// markup) reaches the page as a text node or through textContent, never as HTML; the CSP's
// Trusted Types requirement makes an innerHTML assignment throw besides.

// el('td', {class: 'num'}, 'text', childNode, ...): strings become text nodes.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) append(node, child);
  return node;
}

function append(node, child) {
  if (child === undefined || child === null) return;
  if (Array.isArray(child)) child.forEach((item) => append(node, item));
  else if (child instanceof Node) node.appendChild(child);
  else node.appendChild(document.createTextNode(String(child)));
}

// Sets a cell to `value`: a string (as text) or a node. Skips the write when nothing changed, so
// a focused link inside keeps its focus across the once-a-second refresh.
export function setCell(cell, value) {
  if (value instanceof Node) {
    const old = cell.firstChild;
    if (old && old.nodeName === value.nodeName && old.textContent === value.textContent &&
        old.getAttribute && old.getAttribute('href') === value.getAttribute('href')) return;
    cell.replaceChildren(value);
    return;
  }
  const text = value === undefined || value === null ? '' : String(value);
  if (cell.childElementCount === 0 && cell.textContent === text) return;
  cell.textContent = text;
}

// A table whose rows are kept by key across refreshes: rows of vanished keys are removed, new
// ones added, the others updated cell by cell (focus and selection survive).
export class LiveTable {
  // columns: [{title, numeric?}], label: the table's caption (its accessible name).
  constructor(label, columns, empty) {
    this.columns = columns;
    this.empty = empty;
    this.body = el('tbody');
    this.table = el('table', {},
      el('caption', { class: 'muted' }, label),
      el('thead', {}, el('tr', {}, columns.map((c) => el('th', { scope: 'col' }, c.title)))),
      this.body);
    this.note = el('p', { class: 'muted' });
    this.node = el('div', {}, this.table, this.note);
    this.rows = new Map();
  }

  // items: [{key, cells: [string|Node, ...]}]
  update(items) {
    const seen = new Set();
    let previous = null;
    for (const item of items) {
      seen.add(item.key);
      let row = this.rows.get(item.key);
      if (!row) {
        row = el('tr', { 'data-key': item.key },
          this.columns.map((c) => el('td', c.numeric ? { class: 'num' } : {})));
        this.rows.set(item.key, row);
      }
      item.cells.forEach((value, i) => setCell(row.children[i], value));
      const want = previous ? previous.nextSibling : this.body.firstChild;
      if (want !== row) this.body.insertBefore(row, want);
      previous = row;
    }
    for (const [key, row] of this.rows) {
      if (!seen.has(key)) {
        row.remove();
        this.rows.delete(key);
      }
    }
    this.note.textContent = items.length === 0 ? this.empty : '';
  }
}

// <dl> of label/value pairs, values as text or nodes.
export function facts(pairs) {
  return el('dl', { class: 'facts' },
    pairs.map(([label, value]) => [el('dt', {}, label), el('dd', {}, value)]));
}

export function link(href, text) {
  return el('a', { href }, text);
}
