// The playground's controller: the options (`sim`'s names, kept in the URL fragment), the
// virtual clock (play, pause, step, speed, reset), the ways to add requests (click the traffic
// lane, "Fire now"), the rows' policies with the parser's errors inline, and the presets.
// The numbers, texts and messages are `ratelimit sim`'s own C in ratelimit.wasm (ratelimit.js's
// Sim); view.js draws them.
import { Core, Sim, SIM_ROWS } from './ratelimit.js';
import { drawTable, drawTimeline, timeAt, ticksText as decFormat } from './view.js';

const $ = (id) => document.getElementById(id);
const NS = 1000000000n;
const ROWS = Array.from({ length: SIM_ROWS }, (_, i) => i);
/** sim's options the page sets, in the order it hands them to sim. */
const SIM_KEYS = ['limit', 'window', 'pattern', 'at', 'trace', 'rate', 'seed', 'duration', 'hold', 'block'];
const core = await Core.fetch();
const KEYS = ['pattern', 'at', 'trace', 'limit', 'window', 'rate', 'seed', 'duration', 'hold', 'block',
  'until', ...Array.from({ length: SIM_ROWS }, (_, i) => `row${i + 1}`)];
const reduced = matchMedia('(prefers-reduced-motion: reduce)');

const S = {
  opts: {},      // the options, as strings (what the fragment holds, until aside)
  sim: null,     // sim's engine over the options (ratelimit.js's Sim), run up to the clock
  ran: -1,       // how many requests its last run covered (-1: none yet)
  sp: null,      // the timeline's span, from the whole run
  T: 0n,         // the clock, ns
  playing: false,
  speed: 2,      // ticks per second
  cursor: null,  // the traffic lane's keyboard cursor (ns)
  hashError: '', // the fragment's malformed parts, shown with the parser's messages
};

// ---- The fragment ----

/** The options in the fragment; a part whose percent-escapes are malformed (`limit=%`) is left
 * out and named in S.hashError, shown where the parser's messages go, so the page still draws. */
function readHash() {
  const o = {};
  const bad = [];
  const dec = (v) => { try { return decodeURIComponent(v); } catch { return undefined; } };
  for (const part of location.hash.replace(/^#/, '').split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const k = dec(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? '' : dec(part.slice(eq + 1).replace(/\+/g, ' '));
    if (k === undefined || v === undefined) bad.push(part);
    else if (KEYS.includes(k)) o[k] = v;
  }
  S.hashError = bad.length ? `the link's ${bad.map((b) => `'${b}'`).join(', ')}: a malformed %-escape (%XX, XX hex, UTF-8), left out` : '';
  return o;
}

const enc = (v) => encodeURIComponent(v).replace(/%(2C|3A|2F|40|3D)/g, (m) => decodeURIComponent(m));

/** The fragment for the current state: the options set, and the clock when it is stopped. */
export function hashFor() {
  const parts = KEYS.filter((k) => k !== 'until' && S.opts[k] !== undefined).map((k) => `${k}=${enc(S.opts[k])}`);
  if (!S.playing && S.T !== start()) parts.push(`until=${decFormat(S.T)}`);
  return parts.length ? `#${parts.join('&')}` : '';
}

function writeHash() {
  const h = hashFor();
  if (h !== location.hash && !(h === '' && location.hash === '#'))
    history.replaceState(null, '', h || location.pathname + location.search);
}

// ---- Building and drawing ----

/** Where the clock starts and resets to: the first window of the picture. */
function start() {
  return S.sp ? S.sp.t0 : 0n;
}

/** sim's message as the page shows it: its line without the pointer to --help. */
const said = (stderr) => stderr.trim().replace(/ \(see ratelimit sim --help\)$/, '');

/** sim's arguments for the options, led by the page's own --rowN TEXT. */
function argsOf(o) {
  const args = [];
  ROWS.forEach((i) => { if (o[`row${i + 1}`]) args.push(`--row${i + 1}`, o[`row${i + 1}`]); });
  for (const k of SIM_KEYS) if (o[k] !== undefined) args.push(`--${k}`, k === 'trace' ? 'trace' : o[k]);
  return args;
}

/** Re-reads the options into sim's engine; false (and the message shown) when they are bad. */
function rebuild() {
  const o = { ...S.opts };
  delete o.until;
  const opened = Sim.open(core, argsOf(o), o.trace);
  let error = opened.error !== undefined ? said(opened.error) : '';
  const sim = opened.sim;
  // A bad until (sim's message) or one before the picture's first window leaves the clock at
  // the start; one before the last request is the clock stopped mid-run (the page's own).
  const u = S.opts.until !== undefined ? Sim.ticks(core, S.opts.until) : {};
  const until = u.v;
  if (sim) {
    // The whole run, for the picture's span (a --block no row takes fails here).
    const end = until !== undefined && until > sim.last ? until : sim.last;
    const e = sim.run(end, false);
    if (e !== null) error = said(e);
    else S.sp = sim.span();
  }
  const show = (untilError) => {
    $('error').textContent = [S.hashError, error, untilError ? said(untilError) : ''].filter(Boolean).join(' — ');
  };
  show(u.error);
  if (error) {
    if (sim) sim.close();
    return false;
  }
  // The new simulation replaces the last one only when it runs (a bad option keeps the picture).
  if (S.sim) S.sim.close();
  S.sim = sim;
  S.ran = -1;
  if (u.error) delete S.opts.until;
  if (until !== undefined && until < S.sp.t0) {
    show(`ratelimit sim: --until '${S.opts.until}': before the picture's first window (t = ${decFormat(S.sp.t0)}), where the clock ` +
      `starts (ratelimit sim refuses an --until before the last request, t = ${decFormat(sim.last)})`);
    delete S.opts.until;
  }
  drawPolicies();
  return true;
}

/** The simulation at the clock: re-run when the requests it covers change, else re-peek. */
function draw() {
  if (!S.sim) return;
  const sim = S.sim;
  const n = countUpTo(S.T);
  if (S.ran === n) sim.states(S.T);
  else {
    const e = sim.run(S.T, true);
    S.ran = e === null ? n : -1;
    if (e !== null) $('error').textContent = said(e);
  }
  drawTable($('table'), sim);
  drawTimeline($('timeline'), sim, S.sp, S.cursor);
  const rowsOk = sim.rows.length > 0 && sim.rows.every((r) => !r.error);
  $('accuracy').textContent = rowsOk ? sim.text(true) : '';
  $('simtext').textContent = rowsOk ? sim.text(false) : '';
  $('command').textContent = command();
  $('clock').textContent = `t = ${decFormat(S.T)}`;
  const slider = $('scrub');
  slider.min = String(Number(S.sp.t0) / 1e9);
  slider.max = String(Number(S.sp.t1) / 1e9);
  slider.value = String(Number(S.T) / 1e9);
  $('play').textContent = S.playing ? 'Pause' : 'Play';
  $('play').setAttribute('aria-pressed', String(S.playing));
}

function countUpTo(T) {
  const r = S.sim.requests;
  let lo = 0;
  let hi = r.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (r[m].t <= T) lo = m + 1; else hi = m;
  }
  return lo;
}

/** The `ratelimit sim` command that prints this table. */
function command() {
  const args = KEYS.filter((k) => k !== 'until' && !k.startsWith('row') && k !== 'trace' && S.opts[k] !== undefined)
    .map((k) => `--${k} ${/^[\w.,:/*-]+$/.test(S.opts[k]) ? S.opts[k] : `'${S.opts[k]}'`}`);
  if (S.opts.trace !== undefined) args.push('--trace FILE');
  if (S.T >= S.sim.last) args.push(`--until ${decFormat(S.T)}`);
  else args.push(`(the requests up to t = ${decFormat(S.T)} only: --at ${S.sim.requests.slice(0, S.sim.n).map((q) => decFormat(q.t)).join(',') || 'none'} --until ${decFormat(S.T)})`);
  const custom = S.sim.custom.some(Boolean) ? '  # rows with their own policies: sim runs the defaults' : '';
  return `ratelimit sim ${args.join(' ')}${custom}`;
}

// ---- Controls ----

function drawPolicies() {
  ROWS.forEach((i) => {
    const input = $(`row${i + 1}`);
    if (document.activeElement !== input) input.value = S.sim.policies[i];
    const text = S.sim.block ? `${input.value},block=${S.sim.block}` : input.value;
    const p = core.parse(text);
    const out = $(`row${i + 1}-error`);
    out.textContent = p.error !== undefined ? p.error : '';
    input.setAttribute('aria-invalid', String(p.error !== undefined));
    if (p.policy) p.policy.free();
  });
}

function syncInputs() {
  const o = S.opts;
  const pattern = o.at !== undefined ? 'at' : o.trace !== undefined ? 'trace' : o.pattern || 'boundary';
  $('pattern').value = pattern;
  for (const k of ['limit', 'window', 'rate', 'seed', 'duration', 'hold', 'block'])
    $(k).value = o[k] !== undefined ? o[k] : '';
  $('at').value = o.at || '';
  $('trace').value = o.trace || '';
  for (const el of document.querySelectorAll('[data-for]'))
    el.hidden = !el.dataset.for.split(' ').includes(pattern);
}

function changed({ keepClock = true } = {}) {
  const T = S.T;
  if (!rebuild()) return;
  S.T = keepClock ? T : start();
  syncInputs();
  draw();
  writeHash();
}

function setOpt(k, v) {
  if (v === '' || v === undefined) delete S.opts[k];
  else S.opts[k] = v;
}

function setPattern(p) {
  const times = S.sim ? S.sim.requests.map((q) => decFormat(q.t)).join(',') : '1';
  delete S.opts.pattern;
  delete S.opts.at;
  delete S.opts.trace;
  if (p === 'at') S.opts.at = $('at').value || times;
  else if (p === 'trace') S.opts.trace = $('trace').value || S.sim.requests.map((q) => `${decFormat(q.t)} client ${q.cost}`).join('\n') + '\n';
  else if (p !== 'boundary') S.opts.pattern = p;
}

/** Adds a request at t: to the pasted trace, or to the explicit list the pattern becomes. */
export function addRequest(t) {
  if (S.opts.trace !== undefined) S.opts.trace = S.opts.trace.replace(/\n?$/, '\n') + `${decFormat(t)}\n`;
  else {
    S.opts.at = [...S.sim.requests.map((q) => decFormat(q.t)), decFormat(t)].join(',');
    delete S.opts.pattern;
  }
  changed();
}

// ---- The clock ----

let last = 0;
let carry = 0;
function frame(now) {
  if (!S.playing) return;
  const dt = Math.min(250, now - last);
  last = now;
  carry += (dt / 1000) * S.speed;
  // Reduced motion: the clock moves a whole tick at a time instead of gliding.
  const whole = reduced.matches ? Math.floor(carry) : carry;
  if (whole > 0) {
    carry -= whole;
    S.T += BigInt(Math.round(whole * 1e9));
  }
  if (S.T >= S.sp.t1) {
    S.T = S.sp.t1;
    S.playing = false;
  }
  draw();
  if (S.playing) requestAnimationFrame(frame);
  else { writeHash(); announce(); }
}

function play(on) {
  S.playing = on;
  if (on) {
    if (S.T >= S.sp.t1) S.T = start();
    last = performance.now();
    carry = 0;
    requestAnimationFrame(frame);
  } else {
    writeHash();
    announce();
  }
  draw();
}

function announce() {
  $('status').textContent = `Clock stopped at t = ${decFormat(S.T)}.`;
}

function step(by) {
  play(false);
  S.T += by;
  if (S.T < S.sp.t0) S.T = S.sp.t0;
  if (S.T > S.sp.t1) S.T = S.sp.t1;
  draw();
  writeHash();
  announce();
}

// ---- Wiring ----

function wire() {
  $('play').addEventListener('click', () => play(!S.playing));
  $('step').addEventListener('click', () => step(NS));
  $('back').addEventListener('click', () => step(-NS));
  $('reset').addEventListener('click', () => { play(false); S.T = start(); draw(); writeHash(); announce(); });
  $('speed').addEventListener('change', (e) => { S.speed = Number(e.target.value); });
  $('fire').addEventListener('click', () => addRequest(S.T - (S.T % 1000000n)));
  $('scrub').addEventListener('input', (e) => {
    play(false);
    S.T = BigInt(Math.round(Number(e.target.value) * 10)) * 100000000n;
    draw();
  });
  $('scrub').addEventListener('change', () => { writeHash(); announce(); });
  $('pattern').addEventListener('change', (e) => { setPattern(e.target.value); changed({ keepClock: false }); });
  for (const k of ['limit', 'window', 'rate', 'seed', 'duration', 'hold', 'block', 'at', 'trace'])
    $(k).addEventListener('change', (e) => { setOpt(k, e.target.value.trim() === '' ? '' : e.target.value); changed(); });
  ROWS.forEach((i) => {
    const input = $(`row${i + 1}`);
    input.addEventListener('change', () => {
      const v = input.value.trim();
      setOpt(`row${i + 1}`, S.sim && v === S.sim.defaults[i] ? '' : v);
      changed();
    });
  });
  $('restore').addEventListener('click', () => {
    ROWS.forEach((i) => delete S.opts[`row${i + 1}`]);
    changed();
  });
  const svg = $('timeline');
  svg.addEventListener('click', (e) => {
    if (e.target.closest('.traffic')) addRequest(timeAt(svg, e.clientX, S.sp));
  });
  svg.addEventListener('keydown', (e) => {
    if (!e.target.closest('.traffic')) return;
    const tenth = 100000000n;
    if (S.cursor === null) S.cursor = S.T;
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
      const by = (e.shiftKey ? 10n : 1n) * tenth * (e.key === 'ArrowRight' ? 1n : -1n);
      S.cursor += by;
      if (S.cursor < S.sp.t0) S.cursor = S.sp.t0;
      if (S.cursor > S.sp.t1) S.cursor = S.sp.t1;
      $('status').textContent = `Cursor at t = ${decFormat(S.cursor)}; Enter adds a request there.`;
    } else if (e.key === 'Enter' || e.key === ' ') {
      addRequest(S.cursor);
    } else return;
    e.preventDefault();
    draw();
    svg.querySelector('.traffic').focus();
  });
  document.addEventListener('keydown', (e) => {
    if (e.target.closest('input, textarea, select, button, [tabindex]')) return;
    if (e.key === ' ' || e.key === 'k') { play(!S.playing); e.preventDefault(); }
    else if (e.key === '.' || e.key === 'l') step(NS);
    else if (e.key === ',' || e.key === 'j') step(-NS);
    else if (e.key === 'f') $('fire').click();
  });
  for (const b of document.querySelectorAll('[data-preset]'))
    b.addEventListener('click', () => {
      play(false);
      location.hash = b.dataset.preset;
    });
  window.addEventListener('hashchange', () => {
    if (hashFor() === location.hash) return;
    load();
  });
}

function load() {
  S.opts = readHash();
  S.playing = false;
  S.cursor = null;
  if (!rebuild()) { syncInputs(); return; }
  const u = S.opts.until !== undefined ? Sim.ticks(core, S.opts.until) : null;
  S.T = u && u.v !== undefined ? u.v : start();
  delete S.opts.until;
  syncInputs();
  draw();
}

wire();
load();
performance.mark('table-drawn'); // bench/web: the time to the first drawn table
document.body.dataset.ready = 'true';
