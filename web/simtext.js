// `ratelimit sim`'s text, from the page's simulation (sim.js): the title, the table, the
// timeline and the --accuracy report, character for character as src/cli/sim.c prints them.
// The page shows the accuracy report and offers the whole text; tests/web/sim_vs_cli.sh diffs
// it against the CLI.
import { NS, decFormat, fracFormat, floorDiv, ROUND } from './sim.js';

/** The time span of the timeline: whole windows over every arrival, send, hold and T. */
export function timeSpan(cfg, sim) {
  const W = cfg.window;
  let lo = sim.T;
  let hi = sim.T;
  for (let i = 0; i < sim.n; i++) {
    const t = cfg.requests[i].t;
    if (t < lo) lo = t;
    for (const r of sim.rows) {
      const end = t + (r.busy ? r.busy[i] : 0n);
      if (end > hi) hi = end;
    }
  }
  return { t0: floorDiv(lo, W) * W, t1: (floorDiv(hi, W) + 1n) * W };
}

export function title(cfg, sim) {
  return `ratelimit sim: limit ${cfg.limit} per ${decFormat(cfg.window)} ticks, pattern ${cfg.pattern}, ${sim.n} requests`;
}

/** The header cells of the table, in `sim`'s words. */
export function headers(cfg, sim) {
  return ['algorithm', `state at t = ${decFormat(sim.T)}`, 'ok', 'rejected',
    `worst ${decFormat(cfg.window)}-tick burst`, 'max delay', 'own contract'];
}

/** One row's cells, in `sim`'s words. */
export function cells(r) {
  return [r.name, r.state, String(r.nOk), String(r.nRej), String(r.worst), decFormat(r.maxDelay),
    `${r.contract}: ${r.held ? 'held' : 'VIOLATED'}`];
}

const width = (s) => [...s].length;

export function table(cfg, sim) {
  const rows = [headers(cfg, sim), ...sim.rows.map(cells)];
  const w = rows[0].map((_, c) => Math.max(...rows.map((r) => width(r[c]))));
  const line = (r) => r.map((c, k) => `| ${c}${' '.repeat(w[k] - width(c))} `).join('') + '|';
  return [line(rows[0]), w.map((k) => `|-${'-'.repeat(k)}-`).join('') + '|', ...rows.slice(1).map(line)].join('\n') + '\n';
}

function colOf(t, sp, cols) {
  let c = ((t - sp.t0) * cols) / (sp.t1 - sp.t0);
  if (c < 0n) c = 0n;
  if (c >= cols) c = cols - 1n;
  return Number(c);
}

export function timeline(cfg, sim) {
  const cols = cfg.width;
  const nc = Number(cols);
  const sp = timeSpan(cfg, sim);
  const per = fracFormat(sp.t1 - sp.t0, cols * NS, 3, ROUND, 1);
  let out = `\ntimeline t = ${decFormat(sp.t0)} .. ${decFormat(sp.t1)}, one column = ${per} ticks: ` +
    'o accepted, x rejected, # both, = queued, - in flight\n';
  const labels = new Array(nc + 63).fill(' ');
  const ruler = new Array(nc + 1).fill('-');
  let freeFrom = 0;
  let lastLabel = 0;
  // sim's loop runs over every window boundary t0 + kW; only the first boundary in each column
  // can mark it or place a label (the rest fall in a column already marked and labelled), so
  // one boundary per column: the work is the width's, not the number of windows (W = 1 ns
  // over a whole tick would be a billion turns).
  const span = sp.t1 - sp.t0;
  const W = cfg.window;
  for (let col = 0n; col <= cols; col++) {
    const k = (col * span + W * cols - 1n) / (W * cols); // the first boundary at or after col
    const t = sp.t0 + k * W;
    if (t > sp.t1) break;
    const c = Number(((t - sp.t0) * cols) / span);
    if (BigInt(c) !== col) continue;
    ruler[c] = '|';
    const a = decFormat(t);
    if (c >= freeFrom && c + a.length < nc + 63) {
      for (let j = 0; j < a.length; j++) labels[c + j] = a[j];
      freeFrom = c + a.length + 1;
      lastLabel = c + a.length;
    }
  }
  const pad = ' '.repeat(16);
  out += `${pad}${labels.slice(0, lastLabel).join('')}\n${pad}${ruler.join('')}\n`;
  sim.rows.forEach((r, i) => {
    const flags = new Uint8Array(nc);
    for (let k = 0; k < sim.n; k++) {
      const c = colOf(cfg.requests[k].t, sp, cols);
      flags[c] |= r.ok[k] ? 1 : 2;
      if (r.ok[k] && r.busy[k] > 0n) {
        const e = colOf(cfg.requests[k].t + r.busy[k] - 1n, sp, cols);
        for (let j = c + 1; j <= e; j++) flags[j] |= i === 6 ? 8 : 4;
      }
    }
    let row = '';
    for (const f of flags)
      row += (f & 3) === 3 ? '#' : f & 1 ? 'o' : f & 2 ? 'x' : f & 4 ? '=' : f & 8 ? '-' : '.';
    out += r.name.padEnd(16) + row + '\n';
  });
  return out;
}

/** The whole of `ratelimit sim`'s standard output for this run. */
export function text(cfg, sim) {
  return `${title(cfg, sim)}\n\n${table(cfg, sim)}${timeline(cfg, sim)}`;
}

// ---- --accuracy (judge, print_accuracy) ----

/** The counter (row 3) against the exact rule on the counter's own history, as sim.c judges. */
export function judge(cfg, sim) {
  const lg = sim.rows[1];
  const sw = sim.rows[2];
  const W = cfg.window;
  const L = cfg.limit;
  const reqs = cfg.requests;
  const acc = { n: [0, 0, 0, 0], split: 0, errSum: 0n };
  let k = null;
  let prev = 0n;
  let curr = 0n;
  let exact = 0n;
  let lo = 0;
  for (let i = 0; i < sim.n; i++) {
    const t = reqs[i].t;
    const ki = floorDiv(t, W);
    if (k === null || ki > k + 1n) { prev = 0n; curr = 0n; } else if (ki === k + 1n) { prev = curr; curr = 0n; }
    k = ki;
    while (lo < i && reqs[lo].t <= t - W) {
      if (sw.ok[lo]) exact -= reqs[lo].cost;
      lo++;
    }
    const est = prev * (W - (t - k * W)) + curr * W;
    const diff = est - exact * W;
    acc.errSum += diff < 0n ? -diff : diff;
    const exactOk = exact + reqs[i].cost <= L;
    acc.n[sw.ok[i] && exactOk ? 0 : !sw.ok[i] && !exactOk ? 1 : sw.ok[i] ? 2 : 3]++;
    if (sw.ok[i] !== lg.ok[i]) acc.split++;
    if (sw.ok[i]) { curr += reqs[i].cost; exact += reqs[i].cost; }
  }
  return acc;
}

const pct = (part, whole) => fracFormat(BigInt(part) * 100n, BigInt(whole > 0 ? whole : 1), 3, ROUND, 0);
const pad = (s, n) => String(s).padStart(n);

export function accuracy(cfg, sim, acc) {
  const lg = sim.rows[1];
  const sw = sim.rows[2];
  const n = sim.n;
  const w = decFormat(cfg.window);
  const [bothOk, bothNo, wrongOk, wrongNo] = acc.n;
  let o = `accuracy: sliding window counter vs the exact sliding log, limit ${cfg.limit} per ${w} ticks\n`;
  o += `trace: ${cfg.pattern}, ${n} requests`;
  if (n) o += `, t = ${decFormat(cfg.requests[0].t)} .. ${decFormat(cfg.requests[n - 1].t)}`;
  o += '\n\neach request judged by both rules on the same history (what the counter let through):\n';
  o += '                   requests    share\n';
  o += `both allow       ${pad(bothOk, 10)}  ${pad(pct(bothOk, n), 7)}%\n`;
  o += `both reject      ${pad(bothNo, 10)}  ${pad(pct(bothNo, n), 7)}%\n`;
  o += `wrongly allowed  ${pad(wrongOk, 10)}  ${pad(pct(wrongOk, n), 7)}%  (the exact count of the last ${w} ticks was full)\n`;
  o += `wrongly rejected ${pad(wrongNo, 10)}  ${pad(pct(wrongNo, n), 7)}%  (the exact count had room)\n`;
  o += `disagree         ${pad(wrongOk + wrongNo, 10)}  ${pad(pct(wrongOk + wrongNo, n), 7)}%\n\n`;
  const den = BigInt(n || 1) * cfg.window;
  o += `mean rate error: |estimate - exact count| = ${fracFormat(acc.errSum, den, 4, ROUND, 0)} requests on average at each\n`;
  o += `                 arrival (${fracFormat(acc.errSum * 100n, den * cfg.limit, 2, ROUND, 0)}% of the limit)\n`;
  o += `run separately:  counter accepted ${sw.nOk}, log accepted ${lg.nOk}; their verdicts differ\n`;
  o += `                 on ${acc.split} requests (${pct(acc.split, n)}%), later ones because their histories part\n`;
  o += '(Cloudflare measured 0.003% of 400M requests wrongly allowed or rejected and a\n';
  o += ' 6% average difference between the real and the estimated rate.)\n';
  return o;
}
