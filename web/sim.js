// `ratelimit sim` in the page: the simulator of src/cli/sim.c written again over the core's own
// decisions (ratelimit.wasm through ratelimit.js), so that every row's ok, rejected, worst burst,
// max delay, contract and state text equal the CLI's for the same input; tests/web/sim_vs_cli.sh
// compares the two outputs byte for byte. All times are BigInt ns, as int64/int128 in C; a tick
// is one second of the virtual clock.
import { FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW, TOKEN_BUCKET, GCRA, LEAKY_BUCKET,
  CONCURRENCY, ENOENT } from './ratelimit.js';

export const NS = 1000000000n;
const MS = 1000000n;
const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);
const T_LIMIT = 1n << 61n;
const SLIDING_LOG_MAX = 1048576n;
/** The page's own cap on requests (the CLI's is 5 000 000): it redraws on every tick. */
export const MAX_REQUESTS = 200000;

/** The seven rows of `sim`: its names, and the policy each runs for L and W. */
export const ROWS = [
  { name: 'Fixed window', algo: 'fixed_window' },
  { name: 'Sliding log', algo: 'sliding_log' },
  { name: 'Sliding counter', algo: 'sliding_window' },
  { name: 'Token bucket', algo: 'token_bucket' },
  { name: 'GCRA', algo: 'gcra' },
  { name: 'Leaky bucket', algo: 'leaky_bucket' },
  { name: 'Concurrency', algo: 'concurrency' },
];
/** The name `sim` prints for each algorithm (by rlt_algo number). */
export const NAMES = ['?', ...ROWS.map((r) => r.name)];

// ---- Exact decimals (src/cli/decimal.c) ----

const abs = (v) => (v < 0n ? -v : v);
export const floorDiv = (a, b) => {
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
};

/** Decimal text to an integer count of 1/scale units: { v } or { err } (the CLI's words). */
export function decParse(s, scale) {
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?$/.exec(s);
  if (!m) return { err: 'not a decimal number' };
  const places = String(scale).length - 1;
  const frac = m[3] || '';
  if (/[1-9]/.test(frac.slice(places))) return { err: 'more precise than the unit allows', precision: true };
  let v = BigInt(m[2]) * scale + BigInt((frac.slice(0, places) + '0'.repeat(places)).slice(0, places) || '0');
  if (v > I64_MAX) return { err: 'out of range' };
  return { v: m[1] ? -v : v };
}

/** An integer count of 1/scale units as a trimmed decimal ("9.6", "10", "-0.5"). */
export function decFormat(v, scale = NS) {
  const mag = abs(v);
  const ip = mag / scale;
  let fp = mag % scale;
  let s = (v < 0n ? '-' : '') + ip;
  if (fp) {
    const places = String(scale).length - 1;
    s += '.' + String(fp).padStart(places, '0').replace(/0+$/, '');
  }
  return s;
}

export const FLOOR = 0;
export const ROUND = 1;
/** num/den (den > 0) with `places` decimals, floored or rounded half up; trim drops zeros. */
export function fracFormat(num, den, places, mode, trim) {
  const p10 = 10n ** BigInt(places);
  const scaled = mode === ROUND ? floorDiv(2n * num * p10 + den, 2n * den) : floorDiv(num * p10, den);
  const digits = String(abs(scaled)).padStart(places + 1, '0');
  let ip = digits.slice(0, digits.length - places);
  let fp = digits.slice(digits.length - places);
  if (trim) fp = fp.replace(/0+$/, '');
  return (scaled < 0n ? '-' : '') + ip + (fp ? '.' + fp : '');
}

/** A policy's duration text for W ns: the largest unit that divides it ("10s", "2500ms"). */
export function durationText(w) {
  for (const [ns, u] of [[3600n * NS, 'h'], [60n * NS, 'm'], [NS, 's'], [MS, 'ms'], [1000n, 'us']])
    if (w % ns === 0n) return `${w / ns}${u}`;
  return `${w}ns`;
}

/** The policy text `sim` runs in row `i` for L and W (rlt_policy_init's numbers, as text). */
export function defaultPolicy(i, L, W) {
  const a = ROWS[i].algo;
  return `${a}:${L}/${durationText(W)}${a === 'leaky_bucket' ? `,queue=${L}` : ''}`;
}

// ---- Options (sim_main) ----

function optDec(errs, name, val, scale, min, max) {
  const r = decParse(val, scale);
  if (r.err) {
    errs.push(`--${name} '${val}': ${r.precision && scale === 1n ? 'not a whole number' : r.err}`);
    return null;
  }
  if (r.v < min || r.v > max) {
    errs.push(`--${name} '${val}': must be between ${decFormat(min, scale)} and ${decFormat(max, scale)}`);
    return null;
  }
  return r.v;
}

function untilOpt(errs, val) {
  return optDec(errs, 'until', val, NS, I64_MIN / 4n, I64_MAX / 4n);
}

/** `--until`'s value in ns as `sim` reads it: { v } or { error } (sim's message). */
export function parseUntil(val) {
  const errs = [];
  const v = untilOpt(errs, val);
  return errs.length ? { error: errs[0] } : { v };
}

/** `sim`'s message for a --block spec the policy grammar refuses, or null (checked once, on a
 * policy of its own, as sim.c's apply_block does). */
export function blockError(core, block) {
  if (!block || core.parse(`gcra:1/1s,block=${block}`).error === undefined) return null;
  return `--block '${block}': expected DURATION or DURATION*FACTOR..MAX, e.g. 5s or 5s*2..1m`;
}

/**
 * Reads `sim`'s options from an object of strings keyed by their names without dashes
 * (limit, window, pattern, at, trace (the trace's text), rate, seed, duration, until, width,
 * hold, block) and rowN (row N's policy text, 1..7). Returns { cfg } or { error }.
 */
export function configure(o) {
  const errs = [];
  const cfg = { limit: 4n, window: 10n * NS, rateE9: NS / 2n, seed: 1n, width: 60n, until: null };
  if (o.limit !== undefined) cfg.limit = optDec(errs, 'limit', o.limit, 1n, 1n, SLIDING_LOG_MAX);
  if (o.window !== undefined) cfg.window = optDec(errs, 'window', o.window, NS, 1n, I64_MAX / 1024n);
  if (o.seed !== undefined) cfg.seed = optDec(errs, 'seed', o.seed, 1n, 0n, I64_MAX);
  if (o.until !== undefined && o.until !== '') cfg.until = untilOpt(errs, o.until);
  if (o.width !== undefined) cfg.width = optDec(errs, 'width', o.width, 1n, 10n, 1000n);
  const sources = ['at', 'trace', 'pattern'].filter((k) => o[k] !== undefined);
  if (sources.length > 1) errs.push('--pattern, --at and --trace are alternatives: give one');
  if (o.rate !== undefined) cfg.rateE9 = optDec(errs, 'rate', o.rate, NS, 1n, 1000000n * NS);
  if (errs.length) return { error: errs[0] };
  cfg.duration = 3n * cfg.window;
  if (o.duration !== undefined) cfg.duration = optDec(errs, 'duration', o.duration, NS, 1n, I64_MAX / 4n);
  cfg.hold = cfg.window / 2n;
  if (o.hold !== undefined) cfg.hold = optDec(errs, 'hold', o.hold, NS, 1n, I64_MAX / 4n);
  cfg.block = o.block || null;
  if (errs.length) return { error: errs[0] };
  cfg.pattern = o.at !== undefined ? 'at' : o.trace !== undefined ? 'trace' : o.pattern || 'boundary';
  const reqs = [];
  const err = cfg.pattern === 'at' ? parseAt(reqs, o.at)
    : cfg.pattern === 'trace' ? parseTrace(reqs, o.trace) : genPattern(reqs, cfg);
  if (err) return { error: err };
  if (!reqs.length) return { error: 'no requests to simulate' };
  reqs.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0)); // stable, as req_cmp
  cfg.requests = reqs;
  cfg.last = reqs[reqs.length - 1].t;
  if (cfg.until !== null && cfg.until < cfg.last)
    return { error: `--until must not be before the last request (t = ${decFormat(cfg.last)})` };
  cfg.policies = ROWS.map((_, i) => o[`row${i + 1}`] || defaultPolicy(i, cfg.limit, cfg.window));
  cfg.custom = ROWS.map((_, i) => Boolean(o[`row${i + 1}`]));
  return { cfg };
}

function addReq(reqs, t, cost) {
  if (t < -T_LIMIT || t > T_LIMIT)
    return `time ${decFormat(t)} is outside the simulator's range (+-${T_LIMIT / NS} ticks)`;
  if (reqs.length >= MAX_REQUESTS)
    return `more than ${MAX_REQUESTS} requests; lower --rate or --duration (the page draws every request, so it ` +
      `stops at ${MAX_REQUESTS}; ratelimit sim takes up to 5000000)`;
  reqs.push({ t, cost });
  return null;
}

const M64 = (1n << 64n) - 1n;
/** splitmix64, as sim.c's next_u64; `x` is a one-element array holding the state. */
function nextU64(x) {
  x[0] = (x[0] + 0x9E3779B97F4A7C15n) & M64;
  let z = x[0];
  z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & M64;
  return z ^ (z >> 31n);
}

/** An Exp(1) variate as k + frac/2^64 by von Neumann's comparisons (sim.c's exp_draw). */
function expDraw(x) {
  for (let k = 0n; ; k++) {
    const first = nextU64(x);
    let u = first;
    let n = 1;
    for (;;) {
      const v = nextU64(x);
      if (v >= u) break;
      u = v;
      n++;
    }
    if (n & 1) return [k, first];
  }
}

function roundMs(t) {
  let q = t / MS;
  let r = t % MS;
  if (r < 0n) { q--; r += MS; }
  return (q + (r * 2n >= MS ? 1n : 0n)) * MS;
}

function genPattern(reqs, cfg) {
  const L = cfg.limit;
  const W = cfg.window;
  let gap = W / (25n * L);
  if (gap < 1n) gap = 1n;
  let e;
  if (cfg.pattern === 'boundary') {
    gap = W / (2n * L + 2n);
    if (gap < 1n) gap = 1n;
    for (let i = 0n; i < L; i++) if ((e = addReq(reqs, W - (L - i) * gap, 1n))) return e;
    for (let i = 0n; i < L; i++) if ((e = addReq(reqs, W + i * gap, 1n))) return e;
    return null;
  }
  if (cfg.pattern === 'burst') {
    for (let b = 0n; b < 2n; b++)
      for (let i = 0n; i < 2n * L; i++) if ((e = addReq(reqs, W / 10n + b * 2n * W + i * gap, 1n))) return e;
    return null;
  }
  let mean = (NS * NS) / cfg.rateE9;
  if (mean < 1n) mean = 1n;
  if (cfg.pattern === 'steady') {
    for (let i = 0n; ; i++) {
      const t = mean * i;
      if (t >= cfg.duration) return null;
      if ((e = addReq(reqs, roundMs(t), 1n))) return e;
    }
  }
  if (cfg.pattern === 'random') {
    const x = [cfg.seed & M64];
    let t = 0n;
    for (;;) {
      const [k, frac] = expDraw(x);
      t += mean * k + ((frac * mean) >> 64n);
      if (t >= cfg.duration) return null;
      if ((e = addReq(reqs, roundMs(t), 1n))) return e;
    }
  }
  return `unknown --pattern '${cfg.pattern}' (boundary, steady, burst, random)`;
}

function parseAt(reqs, list) {
  for (const p of list.split(',')) {
    const r = decParse(p, NS);
    if (r.err) return `--at: bad time '${p}': ${r.precision ? 'more precise than 1 ns' : r.err}`;
    const e = addReq(reqs, r.v, 1n);
    if (e) return e;
  }
  return null;
}

/** Trace lines 'TIME [KEY [COST]]' (src/cli/input.c's rules; KEY is ignored). */
function parseTrace(reqs, text) {
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (let n = 0; n < lines.length; n++) {
    const f = lines[n].replace(/\r$/, '').split(/[ \t]+/).filter((x) => x !== '');
    if (!f.length || f[0].startsWith('#')) continue;
    const where = `trace:${n + 1}: `;
    if (f.length > 3) return where + 'too many fields (expected TIME KEY [COST])';
    const t = decParse(f[0], NS);
    if (t.err) return where + `bad TIME '${f[0]}': ${t.precision ? 'more precise than 1 ns' : t.err}`;
    let cost = 1n;
    if (f.length === 3) {
      const c = decParse(f[2], 1n);
      if (c.err) return where + `bad COST '${f[2]}': ${c.precision ? 'not a whole number' : c.err}`;
      if (c.v < 0n) return where + `bad COST '${f[2]}': negative`;
      cost = c.v;
    }
    const e = addReq(reqs, t.v, cost);
    if (e) return e;
  }
  return null;
}

// ---- Running (run_all, run_concurrency) ----

/** Parses each row's policy (with --block added), giving { policy } or { error } per row. */
export function policies(core, cfg) {
  const bad = blockError(core, cfg.block);
  // A bad spec is sim's one message; a good one a row's policy refuses (its own block=, "given
  // twice") is the parser's message for that row.
  return cfg.policies.map((text) => (bad ? { error: bad } : core.parse(cfg.block ? `${text},block=${cfg.block}` : text)));
}

/**
 * Runs one row's policy over the first `n` requests of cfg (all by default), as sim.c does:
 * per request ok, delay and busy, the counts, the worst W-tick burst, the max delay, the
 * contract and the state after the run (to peek at for the state column).
 */
export function runRow(policy, cfg, n = cfg.requests.length) {
  const reqs = cfg.requests;
  const st = policy.state();
  const r = { policy, st, ok: new Uint8Array(n), delay: new Array(n).fill(0n),
    busy: new Array(n).fill(0n), nOk: 0n, nRej: 0n, maxDelay: 0n, error: null };
  if (policy.algo === CONCURRENCY) {
    const held = cfg.hold < policy.period ? cfg.hold : policy.period;
    const fifo = []; // [request index, lease] in arrival order: equal holds end in that order
    let head = 0;
    for (let i = 0; i < n; i++) {
      const t = reqs[i].t;
      while (head < fifo.length && reqs[fifo[head][0]].t + held <= t) {
        const rc = st.release(reqs[fifo[head][0]].t + held, fifo[head][1]);
        if (rc !== 0 && rc !== ENOENT) break; // as sim.c, which ignores the status
        head++;
      }
      const d = st.decide(t, reqs[i].cost > 0n ? 1n : 0n);
      if (d.status !== 0) { r.error = `${NAMES[policy.algo]} at t = ${decFormat(t)}: ${policy.core.strerror(d.status)}`; break; }
      r.ok[i] = d.allowed ? 1 : 0;
      if (d.allowed && reqs[i].cost > 0n) {
        r.nOk++;
        r.busy[i] = held;
        fifo.push([i, d.lease]);
      } else if (!d.allowed) r.nRej++;
      else r.nOk++;
    }
  } else {
    // One call into the module for the whole run: the same rlt_decide calls, in order, over
    // the trace written straight into the module's batch arrays; out is read before anything
    // else runs in the module.
    const { times, costs } = st.batchArrays(n);
    for (let i = 0; i < n; i++) {
      times[i] = reqs[i].t;
      costs[i] = reqs[i].cost;
    }
    const { made, out } = st.decideBatch(times, costs);
    for (let i = 0; i < made; i++) {
      const allowed = out[2 * i] === 1n;
      r.ok[i] = allowed ? 1 : 0;
      r.delay[i] = allowed ? out[2 * i + 1] : 0n;
      r.busy[i] = r.delay[i];
      if (allowed) {
        r.nOk++;
        if (r.delay[i] > r.maxDelay) r.maxDelay = r.delay[i];
      } else r.nRej++;
    }
    if (made < n)
      r.error = `${NAMES[policy.algo]} at t = ${decFormat(reqs[made].t)}: ${policy.core.strerror(Number(out[2 * made]))}`;
  }
  const conc = policy.algo === CONCURRENCY;
  const evs = [];
  for (let i = 0; i < n; i++)
    if (r.ok[i]) evs.push({ t: reqs[i].t + r.delay[i], cost: conc ? (reqs[i].cost > 0n ? 1n : 0n) : reqs[i].cost });
  evs.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0));
  r.evs = evs;
  [r.worst, r.worstT0] = worstSpan(evs, cfg.window);
  [r.held, r.contract] = contractCheck(policy, evs, r.maxDelay, cfg.hold);
  return r;
}

/** The largest accepted cost inside any half-open span [x, x + W), and where it starts. */
export function worstSpan(e, W) {
  let best = 0n;
  let sum = 0n;
  let lo = 0;
  let at = e.length ? e[0].t : 0n;
  for (let hi = 0; hi < e.length; hi++) {
    sum += e[hi].cost;
    while (e[hi].t - e[lo].t >= W) sum -= e[lo++].cost;
    if (sum > best) { best = sum; at = e[lo].t; }
  }
  return [best, at];
}

// ---- Contracts (src/cli/contract.c) ----

function perAlignedWindow(e, W, N) {
  let k = null;
  let count = 0n;
  for (const x of e) {
    const ki = floorDiv(x.t, W);
    count = ki === k ? count + x.cost : x.cost;
    k = ki;
    if (count > N) return false;
  }
  return true;
}

function bucketHeld(e, W, N, B) {
  let sum = 0n;
  let best = 0n;
  for (let j = 0; j < e.length; j++) {
    const cand = sum * W - e[j].t * N;
    if (j === 0 || cand < best) best = cand;
    sum += e[j].cost;
    if (sum * W - e[j].t * N > B * W + best) return false;
  }
  return true;
}

function shaperHeld(e, W, N, Q, wait) {
  for (let i = 1; i < e.length; i++) if ((e[i].t - e[i - 1].t + 1n) * N <= e[i - 1].cost * W) return false;
  return wait * N <= Q * W + N;
}

function inFlightHeld(e, N, hold) {
  let lo = 0;
  let live = 0n;
  for (let i = 0; i < e.length; i++) {
    if (e[i].cost === 0n) continue;
    while (lo < i && (e[lo].cost === 0n || e[lo].t + hold <= e[i].t)) {
      if (e[lo].cost > 0n) live--;
      lo++;
    }
    if (++live > N) return false;
  }
  return true;
}

/** [held, the contract in words], as rlt__contract_check. */
export function contractCheck(p, e, maxWait, hold) {
  const N = p.limit;
  const W = p.period;
  const w = decFormat(W);
  switch (p.algo) {
    case FIXED_WINDOW:
      return [perAlignedWindow(e, W, N), `≤ ${N} per aligned window`];
    case SLIDING_LOG:
      return [worstSpan(e, W)[0] <= N, `≤ ${N} in any ${w} ticks`];
    case SLIDING_WINDOW:
      return [perAlignedWindow(e, W, N) && worstSpan(e, W)[0] <= 2n * N,
        `≤ ${N} per window, ≤ ${2n * N} in any ${w} ticks`];
    case TOKEN_BUCKET:
    case GCRA:
      return [bucketHeld(e, W, N, p.burst), `≤ ${p.burst} + ${fracFormat(N * NS, W, 2, ROUND, 1)} per tick over any span`];
    case LEAKY_BUCKET:
      return [shaperHeld(e, W, N, p.queue, maxWait), `sends ≥ ${fracFormat(W, N * NS, 2, ROUND, 1)} ticks apart, queue ≤ ${p.queue}`];
    case CONCURRENCY:
      return [inFlightHeld(e, N, hold < W ? hold : W), `≤ ${N} in flight`];
    default:
      return [false, '?'];
  }
}

// ---- The state column (describe_state) ----

/** Row r's state at T in `sim`'s words, from a peek of the library and the record of the run. */
export function describeState(r, cfg, T, n = r.ok.length) {
  const p = r.policy;
  const W = p.period;
  const L = p.limit;
  const reqs = cfg.requests;
  const d = r.st.peek(T);
  const remaining = d.status === 0 ? d.remaining : 0n;
  const resetAfter = d.status === 0 ? d.resetAfter : 0n;
  switch (p.algo) {
    case FIXED_WINDOW: {
      const k = floorDiv(T, W);
      return `window [${decFormat(k * W)}, ${decFormat((k + 1n) * W)}): count ${L - remaining}/${L}`;
    }
    case SLIDING_LOG: {
      const inside = [];
      for (let i = 0; i < n; i++) if (r.ok[i] && reqs[i].t > T - W && reqs[i].t <= T) inside.push(decFormat(reqs[i].t));
      const shown = inside.length > 4 ? [...inside.slice(0, 3), '...', inside[inside.length - 1]] : inside;
      return `log [${shown.join(', ')}]: ${L - remaining}/${L}`;
    }
    case SLIDING_WINDOW: {
      const k = floorDiv(T, W);
      let prev = 0n;
      let curr = 0n;
      for (let i = 0; i < n; i++) {
        if (!r.ok[i] || reqs[i].t > T) continue;
        const ki = floorDiv(reqs[i].t, W);
        if (ki === k) curr += reqs[i].cost;
        if (ki === k - 1n) prev += reqs[i].cost;
      }
      const e = T - k * W;
      return `${prev}×${fracFormat(W - e, W, 2, ROUND, 0)} + ${curr} ≈ ${fracFormat(prev * (W - e) + curr * W, W, 2, ROUND, 0)} of ${L}`;
    }
    case TOKEN_BUCKET:
    case GCRA: {
      const num = p.burst * W - resetAfter * L;
      const tokens = fracFormat(num < 0n ? 0n : num, W, 2, FLOOR, 0);
      const rate = fracFormat(L * NS, W, 2, ROUND, 0);
      const s = `tokens ${tokens} / ${p.burst}, +${rate} per tick`;
      return p.algo === GCRA ? `tat ${decFormat(T + resetAfter)}: ${s}` : s;
    }
    case LEAKY_BUCKET: {
      let queued = 0;
      for (let i = 0; i < n; i++) if (r.ok[i] && reqs[i].t <= T && reqs[i].t + r.delay[i] > T) queued++;
      return `queue ${queued}/${p.queue}, drains 1 per ${fracFormat(W, L * NS, 2, ROUND, 1)} ticks`;
    }
    case CONCURRENCY: {
      let live = 0;
      for (let i = 0; i < n; i++) if (r.ok[i] && reqs[i].t <= T && reqs[i].t + r.busy[i] > T) live++;
      return `in flight ${live}/${L}, each held ${decFormat(cfg.hold < W ? cfg.hold : W)} ticks`;
    }
    default:
      return '?';
  }
}

/**
 * The whole simulation of cfg up to the clock at `T` (all requests at or before T; T null:
 * every request, with the state at --until or the last request), as `ratelimit sim` would
 * print it for those requests with --until T. Returns { T, n, rows: [{ name, state, ...run }] }
 * or { error } when a row's policy does not parse (error and row index).
 */
export function simulate(core, cfg, T = null) {
  const parsed = policies(core, cfg);
  const reqs = cfg.requests;
  let n = reqs.length;
  if (T === null) T = cfg.until !== null ? cfg.until : cfg.last;
  else while (n > 0 && reqs[n - 1].t > T) n--;
  const rows = parsed.map((pp, i) => {
    if (pp.error !== undefined) return { name: ROWS[i].name, error: pp.error, parseError: true };
    const r = runRow(pp.policy, cfg, n);
    r.name = cfg.custom[i] ? NAMES[pp.policy.algo] : ROWS[i].name;
    if (!r.error) r.state = describeState(r, cfg, T, n);
    return r;
  });
  // Two rows of one algorithm (tiers: token_bucket:2/10s and :8/10s) are told apart by their
  // policies' parameters.
  const names = rows.map((r) => r.name);
  rows.forEach((r, i) => {
    if (cfg.custom[i] && names.some((q, j) => j !== i && q === names[i]))
      r.name = `${names[i]} ${cfg.policies[i].slice(cfg.policies[i].indexOf(':') + 1)}`;
  });
  return { T, n, rows };
}

/** Frees what simulate() allocated in the module. */
export function release(sim) {
  for (const r of sim.rows) {
    if (!r.st) continue;
    r.st.free();
    r.policy.free();
  }
}
