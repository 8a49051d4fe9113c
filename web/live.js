// The live page (/ui/live, a tab of the playground's page): what a running ratelimitd decides,
// from its own JSON endpoints: /v1/stats (allowed and denied per second per rule or policy over
// the last 5 minutes, sampled by the daemon every second; the backend; the reservations and
// leases; the RLQS quota buckets), /v1/top (the top offenders), /v1/rules (the config's Envoy rules) and /v1/peek
// (explain a key, under a policy or an Envoy rule, without charging it).  Served by
// `ratelimit sim --serve` or a static server there is no daemon: the page says so.
const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';
const live = /\/ui\/live\/?$/.test(location.pathname);

$(live ? 'tab-live' : 'tab-play').setAttribute('aria-current', 'page');
$(live ? 'tab-play' : 'tab-live').removeAttribute('aria-current');
$('playground').hidden = live;
$('play-intro').hidden = live;
$('live').hidden = !live;
document.querySelector('footer').hidden = live; // the playground's keys

/** The bytes of a name as the daemon writes it in JSON (bytes outside printable ASCII, and
 * '%', '"', '\\', as %XX). */
function bytesOf(s) {
  const out = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) { out.push(parseInt(s.slice(i + 1, i + 3), 16)); i += 2; }
    else out.push(...new TextEncoder().encode(s[i]));
  }
  return Uint8Array.from(out);
}
const utf8 = new TextDecoder('utf-8', { fatal: true });
const hex2 = (c) => `\\x${c.toString(16).padStart(2, '0')}`;
/** The name as text: UTF-8 as it is, else each byte outside printable ASCII as \xHH (so a key
 * named %41 shows as %41, and a key of raw bytes still shows). */
const utf8Text = (b) => { try { return utf8.decode(b); } catch { return null; } };
const decode = (s) => {
  const b = bytesOf(s);
  return utf8Text(b) ?? [...b].map((c) => (c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : hex2(c))).join('');
};
/** An argument as redis-cli reads it: bare when it can be, else in double quotes with \", \\
 * and \xHH for control bytes (and for every non-ASCII byte when the name is not UTF-8). */
const respArg = (s) => {
  const b = bytesOf(s);
  const t = utf8Text(b);
  if (t !== null && t !== '' && !/[\s"'\\\x00-\x1f\x7f]/.test(t)) return t;
  const chars = t !== null ? [...t] : [...b].map((c) => (c < 0x80 ? String.fromCharCode(c) : hex2(c)));
  return `"${chars.map((ch) => (ch === '"' || ch === '\\' ? `\\${ch}` : ch.length === 1 && (ch < ' ' || ch === '\x7f') ? hex2(ch.charCodeAt(0)) : ch)).join('')}"`;
};
/** What to type as a policy for a rule's name: inline policies are named "i:TEXT". */
const asPolicy = (name) => (name.startsWith('i:') ? name.slice(2) : name);

/** What a name of the daemon's stands for (src/server: set_name): "p:NAME" a named policy of
 * the config, "i:TEXT" policy text sent with a request, and an Envoy rule by its path. */
function kindOf(name) {
  if (rules.has(name)) return `Envoy rule ${name} of the config's descriptors (RL.PEEK asks it as r:${name})`;
  if (name.startsWith('p:')) return `named policy ${name.slice(2)}, from the config's policies (tiers use them)`;
  if (name.startsWith('i:')) return `inline policy: the policy text ${name.slice(2)}, sent with the request itself`;
  return `Envoy rule ${name} of the config's descriptors (RL.PEEK asks it as r:${name})`;
}
/** A name that wraps only after '/' or ',' (each piece unbroken, one too long for the column
 * ellipsized), the whole name and its kind in the title. */
function nameEl(name) {
  const code = el('code', { class: 'name', title: `${name}: ${kindOf(name)}` });
  const pieces = name.match(/[^/,]*[/,]|[^/,]+$/g) || [name];
  pieces.forEach((p, i) => {
    if (i) code.append(document.createElement('wbr'));
    code.append(el('span', { class: 'seg' }, p));
  });
  return code;
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}
function svgEl(tag, attrs = {}) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

const token = $('live-token');
token.value = sessionStorage.getItem('rlt-token') || '';
token.addEventListener('change', () => { sessionStorage.setItem('rlt-token', token.value); poll(); });

async function get(path) {
  const headers = token.value ? { Authorization: `Bearer ${token.value}` } : {};
  const r = await fetch(path, { headers, cache: 'no-store' });
  if (!r.ok) {
    const e = new Error(`${path}: ${r.status}`);
    e.status = r.status;
    throw e;
  }
  return r.json();
}

/** A 300-second sparkline of allowed (green, solid) and denied (red, dashed: not by colour
 * alone), on one scale whose top is labelled with its maximum per second. */
function spark(allowed, denied) {
  const w = 300, h = 40, max = Math.max(1, ...allowed, ...denied);
  const svg = svgEl('svg', { class: 'spark', viewBox: `0 0 ${w} ${h}`, role: 'img',
    'aria-label': `allowed (solid) and denied (dashed) per second, at most ${max}` });
  for (const [xs, cls] of [[allowed, 'ok'], [denied, 'no']]) {
    const pts = xs.map((v, i) => `${(i * w) / (xs.length - 1)},${h - 2 - ((h - 4) * v) / max}`).join(' ');
    svg.append(svgEl('polyline', { class: cls, points: pts }));
  }
  const top = svgEl('text', { class: 'max', x: 2, y: 9 });
  top.textContent = `${max}/s`;
  svg.append(top);
  return svg;
}

function drawStats(st) {
  const body = $('live-policies').tBodies[0];
  body.replaceChildren();
  const list = $('peek-policies');
  list.replaceChildren();
  for (const p of st.policies) {
    const name = decode(p.policy);
    const last = (xs) => xs[xs.length - 1];
    const row = el('tr', { 'data-policy': name },
      el('td', {}, nameEl(name)),
      el('td', { class: 'n allowed' }, String(p.allowed_total)),
      el('td', { class: 'n denied' }, String(p.denied_total)),
      el('td', { class: 'n' }, `${last(p.allowed)} / ${last(p.denied)}`),
      el('td', {}, spark(p.allowed, p.denied)));
    body.append(row);
    list.append(el('option', { value: asPolicy(name) }));
  }
  if (!st.policies.length) body.append(el('tr', {}, el('td', { colspan: 5, class: 'muted' }, 'no decisions yet')));
  $('live-untracked').textContent = st.untracked ? `${st.untracked} decisions of rules past the first 64 are not drawn` : '';
  $('live-backend').textContent = st.backend;
  $('live-reservations').textContent = String(st.reservations);
  $('live-leases').textContent = String(st.leases ? st.leases.concurrency : 0);
  $('live-lease-units').textContent = String(st.leases ? st.leases.redis_units : 0);
  // The Redis nodes, from the backend's INFO lines: redis_nodeN:addr=..,engine=..,connected=..,breaker=..
  const nodes = $('live-nodes').tBodies[0];
  nodes.replaceChildren();
  const other = [];
  for (const line of st.backend_info.map(decode)) {
    const m = /^redis_node(\d+):(.*)$/.exec(line);
    if (!m) { other.push(line); continue; }
    const f = Object.fromEntries(m[2].split(',').map((kv) => kv.split('=')));
    nodes.append(el('tr', {}, el('td', {}, m[1]), el('td', {}, el('code', {}, f.addr || '')),
      el('td', {}, f.engine || ''), el('td', {}, f.connected === '1' ? 'yes' : 'no'), el('td', {}, f.breaker || '')));
  }
  $('live-nodes').hidden = !nodes.rows.length;
  $('live-backend-info').textContent = other.join('\n');
  $('live-backend-info').hidden = !other.length;
}

function drawTop(top) {
  const body = $('live-top').tBodies[0];
  body.replaceChildren();
  top.keys.forEach((k, i) => body.append(el('tr', {},
    el('td', { class: 'n' }, String(i + 1)), el('td', { class: 'key' }, el('code', {}, decode(k.key))),
    el('td', { class: 'policy' }, nameEl(decode(k.policy))), el('td', { class: 'n denied' }, String(k.denied)))));
  if (!top.keys.length) body.append(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, 'no key denied yet')));
}

// ---- RLQS quota buckets ----

/** The quota buckets of /v1/stats' one snapshot: the top by demand, then the rest summed.
 * Each number cell carries its value in data-v (the burst in data-b), for tests to read. */
function drawQuotas(q) {
  const body = $('live-quotas').tBodies[0];
  body.replaceChildren();
  if (!q) return; // a daemon before quota buckets were shown
  const num = (v, b) => el('td', b === undefined ? { class: 'n', 'data-v': String(v) } : { class: 'n', 'data-v': String(v), 'data-b': String(b) },
    b === undefined ? String(v) : `${v} (${b})`);
  const claim = (r) => el('td', { class: 'redis-only' }, r.claim === undefined ? ''
    : `${r.claim ? `${r.claim} ` : ''}${r.claim_tokens_per_fill} (${r.claim_max_tokens})`);
  const cells = (r) => [num(r.members), num(r.demand), num(r.assigned_tokens_per_fill, r.assigned_max_tokens),
    num(r.budget_tokens_per_fill, r.budget_max_tokens), num(r.left_tokens_per_fill, r.left_max_tokens), claim(r)];
  for (const r of q.shown) {
    const rule = `#${r.rule} ${r.kind === 'policy' ? decode(r.policy_text) : r.kind}${r.shadow ? ' (shadow)' : ''}`;
    body.append(el('tr', { 'data-kind': r.kind }, el('td', {}, el('code', {}, decode(r.domain))),
      el('td', { class: 'key' }, el('code', {}, decode(r.bucket))), el('td', {}, rule), ...cells(r)));
  }
  if (q.other.buckets > 0 || !q.shown.length) {
    body.append(el('tr', { class: 'other', 'data-buckets': String(q.other.buckets) },
      el('td', { colspan: 3, class: 'muted' }, q.shown.length ? `the other ${q.other.buckets} buckets, summed` : 'no quota bucket yet'),
      ...cells(q.other)));
  }
  $('live-quotas').classList.toggle('redis', q.redis);
  $('live-quota-top').textContent = String(q.top);
  $('live-quota-count').textContent = `${q.buckets} bucket${q.buckets === 1 ? '' : 's'} held.`;
}

// ---- Envoy rules, for explain-a-key ----

/** The rules of /v1/rules by path: their domain and descriptor (value null: any value). */
let rules = new Map();
async function loadRules() {
  try {
    rules = new Map((await get('/v1/rules')).rules.map((r) => [r.rule, r]));
  } catch { rules = new Map(); } // no daemon, or one without /v1/rules
  const sel = $('peek-rule'), was = sel.value;
  sel.replaceChildren(el('option', { value: '' }, '(none: the policy)'));
  for (const [path, r] of rules) sel.append(el('option', { value: path }, `${path} (${r.kind === 'limit' ? r.policy_text : r.kind})`));
  sel.value = rules.has(was) ? was : '';
  pickRule();
}
/** A rule picked: the key field takes the descriptor's entries (a template from the rule). */
function pickRule() {
  const r = rules.get($('peek-rule').value);
  $('peek-policy').disabled = !!r;
  $('peek-policy').required = !r;
  $('peek-key-label').textContent = r ? 'descriptor' : 'key';
  if (r) {
    const tpl = r.descriptor.map((e) => `${e.key}=${e.value === null ? '' : e.value.replace(/\*$/, '')}`).join(',');
    $('peek-key').placeholder = tpl;
    if (!$('peek-key').value.includes('=')) $('peek-key').value = tpl;
  } else {
    $('peek-key').placeholder = '';
  }
}
$('peek-rule').addEventListener('change', pickRule);

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const stats = await get('/v1/stats');
    drawStats(stats);
    drawQuotas(stats.quotas);
    try { drawTop(await get('/v1/top')); } catch (e) {
      if (e.status !== 404) throw e;
      drawTop({ keys: [] });
    }
    $('live-status').textContent = `updated at ${new Date().toLocaleTimeString()}`;
    document.body.dataset.live = String(Number(document.body.dataset.live || 0) + 1);
  } catch (e) {
    $('live-status').textContent = e.status === 401 ? 'the daemon wants a bearer token (below)'
      : e.status === 404 ? 'no ratelimitd here: the live page needs the daemon (this page may be served by ratelimit sim --serve)'
        : `cannot reach the daemon: ${e.message}`;
  } finally {
    polling = false;
  }
}

// ---- Explain a key ----

const ms = (v) => (v >= 1000 ? `${v % 1000 ? (v / 1000).toFixed(3) : v / 1000} s` : `${v} ms`);

/** The key on a timeline, as the playground's: now at the left, the retry and reset marks. */
function drawPeek(p) {
  const svg = $('peek-timeline');
  svg.replaceChildren();
  const W = 1000, H = 90, x0 = 60, x1 = W - 20, span = Math.max(1000, p.retry_after_ms, p.reset_after_ms) * 1.1;
  const X = (t) => x0 + ((x1 - x0) * t) / span;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const step = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7].map((b) => m * b)).sort((a, b) => a - b)
    .find((s) => span / s <= 10);
  for (let t = 0; t <= span; t += step) {
    svg.append(svgEl('line', { class: 'tick', x1: X(t), x2: X(t), y1: 10, y2: 62 }));
    const lab = svgEl('text', { class: 'axis', x: X(t), y: 78 });
    lab.textContent = t === 0 ? 'now' : `+${ms(t)}`;
    svg.append(lab);
  }
  const name = svgEl('text', { x: 2, y: 40 });
  name.textContent = 'key';
  svg.append(name);
  // What is used and what is left of the limit, at now.
  const used = p.limit > 0 ? (p.limit - Math.max(0, p.remaining)) / p.limit : 0;
  const left = Math.max(0, p.remaining);
  for (const [cls, y, h, what] of [['used', 14 + 40 * (1 - used), 40 * used, `used: ${p.limit - left} of ${p.limit}`],
    ['free', 14, 40 * (1 - used), `left: ${left} of ${p.limit}`]]) {
    const r = svgEl('rect', { class: cls, x: x0 - 14, y, width: 8, height: h });
    const t = svgEl('title');
    t.textContent = what;
    r.append(t);
    svg.append(r);
  }
  if (!p.allowed && p.retry_after_ms > 0)
    svg.append(svgEl('line', { class: 'wait', x1: X(0), x2: X(p.retry_after_ms), y1: 28, y2: 28 }));
  svg.append(svgEl('line', { class: 'refill', x1: X(0), x2: X(p.reset_after_ms), y1: 44, y2: 44 }));
  for (const [t, label, y] of [[p.retry_after_ms, 'may retry', 24], [p.reset_after_ms, 'whole again', 58]]) {
    if (t <= 0 && label === 'may retry') continue;
    const tx = svgEl('text', { x: Math.min(X(t) + 4, W - 90), y });
    tx.textContent = label;
    svg.append(tx);
  }
  svg.append(svgEl('line', { class: 'clock', x1: X(0), x2: X(0), y1: 8, y2: 64 }));
  svg.removeAttribute('hidden'); // an SVG element has no .hidden property
  $('peek-legend').hidden = false;
}

$('peek-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const r = rules.get($('peek-rule').value);
  const q = new URLSearchParams(r ? { rule: r.rule, domain: r.domain, descriptor: $('peek-key').value }
    : { key: $('peek-key').value, policy: $('peek-policy').value });
  $('peek-error').textContent = '';
  try {
    const headers = token.value ? { Authorization: `Bearer ${token.value}` } : {};
    const r = await fetch(`/v1/peek?${q}`, { headers, cache: 'no-store' });
    const p = await r.json();
    if (!r.ok) throw new Error(p.error || `${r.status}`);
    $('peek-text').textContent = p.rule ? `Envoy rule ${decode(p.rule)}: ${p.policy_text}` : p.policy_text || decode(p.policy);
    $('peek-resp').textContent = `RL.PEEK ${respArg(p.key)} ${respArg(p.policy)}`;
    $('peek-state').textContent = p.allowed ? (p.remaining > 0 ? 'within its limit' : 'at its limit: the next request is denied')
      : 'denied now';
    $('peek-limit').textContent = String(p.limit);
    $('peek-remaining').textContent = String(p.remaining);
    $('peek-retry').textContent = p.allowed ? '0 (may send now)' : ms(p.retry_after_ms);
    $('peek-retry').dataset.ms = String(p.retry_after_ms);
    $('peek-reset').textContent = ms(p.reset_after_ms);
    $('peek-reset').dataset.ms = String(p.reset_after_ms);
    $('peek-out').hidden = false;
    $('peek-out').dataset.allowed = String(p.allowed);
    drawPeek(p);
    document.body.dataset.peeked = String(Number(document.body.dataset.peeked || 0) + 1);
  } catch (err) {
    $('peek-error').textContent = err.message;
    $('peek-out').hidden = true;
    $('peek-timeline').setAttribute('hidden', '');
    $('peek-legend').hidden = true;
  }
});

if (live) {
  loadRules();
  token.addEventListener('change', loadRules);
  poll();
  setInterval(poll, 1000);
}
