// The playground's drawing: the table (an HTML <table> with `sim`'s header cells and numbers)
// and the timeline (SVG, one lane per row under a lane of the traffic itself, which takes clicks
// and keys to add requests). Pure DOM writes from a simulation (ratelimit.js's Sim: `ratelimit
// sim`'s own C in the module); no state of its own.

/** Ticks as the page writes them: ns (BigInt) as an exact decimal, "9.6", "10", "-0.5". */
export function ticksText(ns) {
  const NS = 1000000000n;
  const mag = ns < 0n ? -ns : ns;
  const frac = mag % NS;
  const f = frac ? `.${String(frac).padStart(9, '0').replace(/0+$/, '')}` : '';
  return `${ns < 0n ? '-' : ''}${mag / NS}${f}`;
}
const decFormat = ticksText;

const SVG = 'http://www.w3.org/2000/svg';
export const GEOM = { left: 132, plot: 748, lane: 34, top: 26 };

function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Fills `table` (thead and tbody) with the simulation at its clock, sim's own cells. */
export function drawTable(table, sim) {
  const all = sim.cells();
  const head = all.head.slice(0, 6); // the seed's columns; the contract is each row's title
  const thead = table.tHead || table.createTHead();
  thead.replaceChildren();
  const hr = thead.insertRow();
  for (const h of head) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = h;
    hr.append(th);
  }
  const tbody = table.tBodies[0] || table.createTBody();
  tbody.replaceChildren();
  sim.rows.forEach((r, i) => {
    const tr = tbody.insertRow();
    tr.dataset.row = String(i + 1);
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = r.name;
    tr.append(th);
    if (r.error) {
      const td = tr.insertCell();
      td.colSpan = 5;
      td.className = 'error';
      td.textContent = r.error;
      return;
    }
    const c = all.rows[i];
    for (let k = 1; k < 6; k++) {
      const td = tr.insertCell();
      const n = document.createElement('span');
      n.className = 'n';
      n.textContent = c[k];
      td.append(n);
      if (k === 1) td.className = 'state';
      if (k === 4) {
        td.title = `own contract: ${c[6]}`;
        // Above L is red, as the seed's page shows it (the fixed window's 8 in 10 ticks is the
        // lesson); whether the algorithm's own contract allows it is the note under it, in
        // words: colour is never the only signal.
        const note = document.createElement('span');
        note.className = 'note';
        if (!r.held) {
          td.classList.add('violated');
          note.textContent = '✗ contract broken';
        } else if (r.worst > sim.limit) {
          td.classList.add('over');
          note.textContent = `> L = ${sim.limit}, within its contract (${r.contract})`;
        }
        if (note.textContent) td.append(note);
      }
    }
    tr.title = `own contract: ${c[6]}`;
  });
}

const ticks = (t) => Number(t) / 1e9;

/**
 * Draws the timeline into `svg` over the span `sp` ({t0, t1} in ns) for the simulation at the
 * clock T: the traffic lane (every request, the ones still to come hollow), then one lane per
 * row with what it decided so far. `cursor` (ns or null) marks the keyboard cursor.
 */
export function drawTimeline(svg, sim, sp, cursor) {
  const { left, plot, lane, top } = GEOM;
  const lanes = sim.rows.length + 1;
  const height = top + lanes * lane + 28;
  const width = left + plot + 12;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.replaceChildren();
  const span = ticks(sp.t1 - sp.t0);
  const x = (t) => left + ((ticks(t) - ticks(sp.t0)) / span) * plot;
  const W = sim.window;
  // window boundaries and their labels; faint whole ticks when there are few
  if (span <= 60)
    for (let t = Math.ceil(ticks(sp.t0)); t <= ticks(sp.t1); t++) {
      const xx = left + ((t - ticks(sp.t0)) / span) * plot;
      svg.append(el('line', { x1: xx, x2: xx, y1: top, y2: top + lanes * lane, class: 'tick' }));
    }
  // Every window boundary while there are few; past 100 every k-th (k windows apart), so the
  // work is bounded whatever the number of windows (W = 1 ns over a tick is a billion).
  const nwin = (sp.t1 - sp.t0) / W;
  const every = nwin > 100n ? W * ((nwin + 99n) / 100n) : W;
  // A boundary's label only where it clears the one before (11 px digits: about 6.6 units
  // each), so long numbers never print over each other.
  let clear = -Infinity;
  for (let t = sp.t0; t <= sp.t1; t += every) {
    svg.append(el('line', { x1: x(t), x2: x(t), y1: top - 4, y2: top + lanes * lane, class: 'boundary' }));
    const label = decFormat(t), half = label.length * 3.3;
    if (x(t) - half < clear) continue;
    svg.append(el('text', { x: x(t), y: top + lanes * lane + 16, class: 'axis' }, label));
    clear = x(t) + half + 8;
  }
  // the traffic lane: every request, the ones after the clock hollow
  const ty = top + lane / 2;
  svg.append(el('text', { x: 8, y: ty + 4, class: 'label' }, 'requests'));
  const traffic = el('g', { class: 'traffic', tabindex: '0', role: 'button',
    'aria-label': 'Traffic: click, or move with the arrow keys and press Enter, to add a request at that tick' });
  traffic.append(el('rect', { x: left, y: top + 2, width: plot, height: lane - 4, class: 'hit' }));
  for (let i = 0; i < sim.requests.length; i++) {
    const q = sim.requests[i];
    if (q.t < sp.t0 || q.t > sp.t1) continue;
    traffic.append(el('rect', { x: x(q.t) - 1.5, y: ty - 9, width: 3, height: 18,
      class: i < sim.n ? 'req past' : 'req future' }));
  }
  if (cursor !== null && cursor !== undefined)
    traffic.append(el('path', { d: `M${x(cursor) - 6} ${top} L${x(cursor) + 6} ${top} L${x(cursor)} ${top + 8}Z`, class: 'cursor' }));
  svg.append(traffic);
  // one lane per row
  sim.rows.forEach((r, i) => {
    const y0 = top + (i + 1) * lane;
    const cy = y0 + lane / 2;
    const g = el('g', { class: 'row' });
    g.append(el('text', { x: 8, y: cy + 4, class: 'label' }, r.name));
    g.append(el('line', { x1: left, x2: left + plot, y1: y0, y2: y0, class: 'sep' }));
    if (r.error) { svg.append(g); return; }
    if (r.worst > sim.limit && sim.n) {
      const bw = Math.max(1, x(r.worstT0 + W) - x(r.worstT0));
      g.append(el('rect', { x: x(r.worstT0), y: y0 + 2, width: bw, height: lane - 4, class: 'band' }));
      // How many, as `sim --svg` writes it in its band, where there is room.
      if (bw > 70) g.append(el('text', { x: x(r.worstT0) + 3, y: y0 + 12, class: 'bandlabel' }, `${r.worst} in ${decFormat(W)} ticks`));
    }
    let bars = 0;
    for (let k = 0; k < sim.n; k++) {
      const t = sim.requests[k].t;
      if (r.ok[k] && r.busy[k] > 0n) {
        const end = t + r.busy[k];
        const by = y0 + 4 + (bars++ % 4) * 4; // up to four lanes of bars above the marks
        const queued = r.delay[k] > 0n;
        const until = end < sim.T ? end : sim.T;
        if (until > t)
          g.append(el('line', { x1: x(t), x2: x(until), y1: by, y2: by, class: queued ? 'queued' : 'flight' }));
        if (queued && end <= sim.T) g.append(el('circle', { cx: x(end), cy: by, r: 2.5, class: 'sent' }));
      }
      const xx = x(t);
      const my = y0 + 24;
      if (r.ok[k]) g.append(el('circle', { cx: xx, cy: my, r: 4.5, class: 'ok' }));
      else g.append(el('path', { d: `M${xx - 4} ${my - 4} L${xx + 4} ${my + 4} M${xx - 4} ${my + 4} L${xx + 4} ${my - 4}`, class: 'no' }));
    }
    svg.append(g);
  });
  // the clock
  if (sim.T >= sp.t0 && sim.T <= sp.t1) {
    svg.append(el('line', { x1: x(sim.T), x2: x(sim.T), y1: top - 8, y2: top + lanes * lane, class: 'clock' }));
    svg.append(el('text', { x: x(sim.T), y: top - 12, class: 'clocklabel' }, `t = ${decFormat(sim.T)}`));
  }
  keepInside(svg, width);
}

/** Moves each centred label of the axis and the clock that would stick out of the picture
 * (the clock at the last boundary, a long number at either end) back inside it: an SVG
 * clips what is outside its box. Measured, as the text's width depends on the font; a
 * picture not shown (the live tab) measures nothing and is left as it is. */
function keepInside(svg, width) {
  for (const t of svg.querySelectorAll('text.axis, text.clocklabel')) {
    const b = t.getBBox();
    if (!b.width) continue;
    const x = Number(t.getAttribute('x'));
    if (b.x + b.width > width - 1) t.setAttribute('x', String(x - (b.x + b.width - (width - 1))));
    else if (b.x < 1) t.setAttribute('x', String(x + 1 - b.x));
  }
}

/** The instant (ns) of a click at client x on the timeline, snapped to tenths of a tick. */
export function timeAt(svg, clientX, sp) {
  const box = svg.getBoundingClientRect();
  const vb = svg.viewBox.baseVal;
  const px = ((clientX - box.left) / box.width) * vb.width;
  const f = (px - GEOM.left) / GEOM.plot;
  const t = ticks(sp.t0) + Math.min(1, Math.max(0, f)) * ticks(sp.t1 - sp.t0);
  return BigInt(Math.round(t * 10)) * 100000000n;
}
