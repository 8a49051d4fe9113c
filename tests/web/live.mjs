// The playground served by ratelimitd and by `ratelimit sim --serve`, and the live page, in a
// real browser (Debian's chromium, headless, puppeteer-core): a live daemon on free ports
// answers GET / with the page (no console error, no request to another host: intercepted and
// failed), its files with their types, ETag/304, HEAD, 404 and no way out of the site; after
// traffic on RESP, HTTP and gRPC the live page's per-rule counts equal /metrics' counters and
// its top offenders /v1/top's; names wrap only after '/' or ',' (or are ellipsized with a
// title), each says in its title what its prefix means and a legend says it for all;
// explain-a-key (its bar and lines with a legend in their colours) equals RL.PEEK of the same key and charges
// nothing, under a policy and under an Envoy rule (picked from /v1/rules, after gRPC traffic
// on it); the leases held (RL.ACQUIRE) show on the page, /v1/stats and /metrics, and go back
// to 0 when released; --no-ui turns the page off, a password puts it behind the bearer token or
// HTTP Basic with the same password (a browser prompts for it; the page and its fetches work).
// Usage: node live.mjs NODE_MODULES RATELIMITD RATELIMIT_CLI REPO WASM(0|1) [SCREENSHOT_DIR]
import { spawn, spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, daemonBin, cli, repo, wasmFlag, shots] = process.argv.slice(2);
const wasm = wasmFlag === '1';
const { default: puppeteer } = await import(pathToFileURL(join(modules, 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js')).href);

let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL ${what}`); };
const check = (cond, what) => { if (!cond) fail(what); return cond; };
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const tmp = await mkdtemp(join(tmpdir(), 'rlt-live-'));
const children = [];

/** Starts a program and resolves with its first stdout line (its ports or its address). */
function start(bin, args) {
  const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(p);
  return new Promise((ok, ko) => {
    let out = '';
    p.stdout.on('data', (b) => { out += b; if (out.includes('\n')) ok({ p, line: out.split('\n')[0] }); });
    p.on('exit', (c) => ko(new Error(`${bin} exited ${c} before it listened`)));
  });
}
async function daemon(...extra) {
  const { p, line } = await start(daemonBin, ['--port', '0', '--http-port', '0', '--grpc-port', '0', '--no-snapshot', ...extra]);
  const port = (name) => Number(new RegExp(`${name} [^ ]*:(\\d+)`).exec(line)[1]);
  return { p, resp: port('resp'), http: port('http'), grpc: port('grpc') };
}
/** One raw HTTP request (the path sent as it is, no normalisation). */
function raw(port, path, { method = 'GET', headers = {} } = {}) {
  return new Promise((ok, ko) => {
    const r = request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    r.on('error', ko);
    r.end();
  });
}
const redis = (port, ...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim().split('\n');

/** ratelimitd_policy_decisions_total as {policy: {allowed, denied}}, the policies with decisions. */
async function metrics(port) {
  const text = (await raw(port, '/metrics')).body;
  const m = {};
  for (const [, pol, out, v] of text.matchAll(/^ratelimitd_policy_decisions_total\{policy="([^"]*)",outcome="(allowed|denied)"\} (\d+)$/gm))
    (m[pol] ||= { allowed: 0, denied: 0 })[out] = Number(v);
  return m;
}

const profile = await mkdtemp(join(tmpdir(), 'rlt-chromium-'));
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium', headless: true, userDataDir: profile,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const problems = [];
async function open(origin, path) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    if (r.url().startsWith(origin + '/') || r.url().startsWith('data:')) r.continue();
    else { problems.push(`request to another host: ${r.url()}`); r.abort(); }
  });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()} on ${path}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error on ${path}: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  await page.goto(origin + path);
  return page;
}
const readRows = (page, sel) => page.$$eval(`${sel} tbody tr`, (rs) => rs.map((r) => [...r.cells].map((c) => c.textContent)));

try {
  const cfg = join(tmp, 'live.yaml');
  await writeFile(cfg, 'policies:\n  api: {policy: "fixed_window:5/1h"}\n  the_quota_of_the_partner_integrations_team: {policy: "gcra:100/1m"}\ndomain: rl\ndescriptors:\n  - key: category\n'
    + '    rate_limit: {unit: hour, requests_per_unit: 3}\n');
  const d = await daemon('--config', cfg);
  const origin = `http://127.0.0.1:${d.http}`;

  // 1. The page from the daemon: the playground (or, without RLT_WASM, the page saying so).
  let page = await open(origin, '/');
  if (wasm) {
    await page.waitForSelector('body[data-ready]', { timeout: 15000 });
    const rows = await page.$$eval('#table tbody tr', (rs) => rs.length);
    check(rows === 7, `the playground from ratelimitd draws its seven rows: ${rows}`);
    check(await page.$eval('#live', (e) => e.hidden), 'on / the live tab is hidden');
  } else {
    check((await page.$eval('h1', (e) => e.textContent)) === 'The playground was not built', 'without RLT_WASM: the page says the playground was not built');
  }
  await page.close();

  // 2. The files: types, ETag and 304, HEAD, 404, nothing outside the site.
  const idx = await raw(d.http, '/');
  check(idx.status === 200 && idx.headers['content-type'] === 'text/html; charset=utf-8' && /^"[0-9a-f]{16}"$/.test(idx.headers.etag)
    && idx.headers['cache-control'] === 'no-cache', `GET / : ${idx.status} ${JSON.stringify(idx.headers)}`);
  const again = await raw(d.http, '/', { headers: { 'If-None-Match': idx.headers.etag } });
  check(again.status === 304 && again.body === '', `If-None-Match with its ETag: 304 without a body (${again.status})`);
  const head = await raw(d.http, '/ui/live', { method: 'HEAD' });
  check(head.status === 200 && head.body === '' && Number(head.headers['content-length']) === Buffer.byteLength(idx.body), 'HEAD /ui/live: the page\'s headers, no body');
  if (wasm) {
    for (const [path, type] of [['/app.js', 'text/javascript; charset=utf-8'], ['/ui/live.js', 'text/javascript; charset=utf-8'],
      ['/style.css', 'text/css; charset=utf-8'], ['/ratelimit.wasm', 'application/wasm']]) {
      const r = await raw(d.http, path, { method: 'HEAD' });
      check(r.status === 200 && r.headers['content-type'] === type, `${path}: ${r.status} ${r.headers['content-type']}`);
    }
  }
  for (const path of ['/nope.js', '/../CMakeLists.txt', '/ui/../../etc/passwd', '/%2e%2e/etc/passwd', '/ui/live/x', '//etc/passwd', '/web/app.js'])
    check((await raw(d.http, path)).status === 404, `${path} is 404`);
  check((await raw(d.http, '/', { method: 'POST' })).status === 405, 'POST / is 405');
  check((await raw(d.http, '/healthz')).body === 'OK\n', '/healthz still answers');

  // 3. Traffic on RESP, HTTP and gRPC.
  for (let i = 0; i < 8; i++) redis(d.resp, 'RL.CHECK', 'user:1', 'api');
  for (let i = 0; i < 7; i++) await raw(d.http, '/v1/check?key=user:2&policy=api');
  // 10 an hour: a token comes back every 6 minutes, so a loaded machine cannot refill one
  // between these checks and the explain below (10 a minute did, after 6 s).
  for (let i = 0; i < 2; i++) await raw(d.http, '/v1/check?key=user:3&policy=gcra:10/1h');
  // Inline policies with long names (the issue's i:fixed_window:5/1m was wrapped mid-word).
  redis(d.resp, 'RL.CHECK', 'user:4', 'fixed_window:5/1m');
  redis(d.resp, 'RL.CHECK', 'user:4', 'sliding_window:5/1m,block=4s*2..20s');
  redis(d.resp, 'RL.CHECK', 'user:4', 'the_quota_of_the_partner_integrations_team');
  const g = spawnSync('/usr/bin/python3', ['-c', `import sys; sys.path.insert(0, ${JSON.stringify(join(repo, 'examples/grpc'))})
from should_rate_limit import should_rate_limit
for i in range(5): print(should_rate_limit("127.0.0.1:${d.grpc}", "rl", [[("category", "books")]]).overall_code)`], { encoding: 'utf8' });
  check(g.status === 0 && g.stdout.trim().split('\n').join(',') === '1,1,1,2,2', `gRPC: 3 OK then OVER_LIMIT: ${g.stdout} ${g.stderr}`);
  await sleep(2000); // the daemon's one-second sample takes the last of it

  if (!wasm) {
    // Without RLT_WASM the site is the page saying so: the endpoints still answer.
    const st = JSON.parse((await raw(d.http, '/v1/stats')).body);
    const want = await metrics(d.http);
    const got = Object.fromEntries(st.policies.map((p) => [decodeURIComponent(p.policy), { allowed: p.allowed_total, denied: p.denied_total }]));
    const sorted = (o) => JSON.stringify(Object.keys(o).sort().map((k) => [k, o[k]]));
    check(Object.keys(want).length >= 3 && sorted(got) === sorted(want), `/v1/stats' totals equal /metrics: ${JSON.stringify(got)} ${JSON.stringify(want)}`);
  } else {
    // 4. The live page: per-rule counts = /metrics, top offenders = /v1/top.
    page = await open(origin, '/ui/live');
    await page.waitForFunction(() => Number(document.body.dataset.live || 0) >= 1, { timeout: 10000 });
    const want = await metrics(d.http);
    const top = JSON.parse((await raw(d.http, '/v1/top')).body);
    const shown = Object.fromEntries((await readRows(page, '#live-policies')).map((r) => [r[0], { allowed: Number(r[1]), denied: Number(r[2]) }]));
    check(Object.keys(want).length >= 3, `three rules or policies with decisions in /metrics: ${JSON.stringify(want)}`);
    const sorted = (o) => JSON.stringify(Object.keys(o).sort().map((k) => [k, o[k]]));
    check(sorted(shown) === sorted(want), `the live page's per-rule counts equal /metrics: page ${JSON.stringify(shown)}, metrics ${JSON.stringify(want)}`);
    check(JSON.stringify(want['p:api']) === '{"allowed":10,"denied":5}' && JSON.stringify(want['rl.category']) === '{"allowed":3,"denied":2}',
      `api: 10 allowed, 5 denied; rl.category (gRPC): 3 and 2: ${JSON.stringify(want)}`);
    const topRows = (await readRows(page, '#live-top')).map((r) => [r[1], r[2], Number(r[3])]);
    const topWant = top.keys.map((k) => [decodeURIComponent(k.key), decodeURIComponent(k.policy), k.denied]);
    check(topWant.length >= 3 && JSON.stringify(topRows) === JSON.stringify(topWant), `the top offenders equal /v1/top: page ${JSON.stringify(topRows)}, /v1/top ${JSON.stringify(topWant)}`);
    check(await page.$eval('#live-backend', (e) => e.textContent) === 'local', 'the backend: local');
    const sp = await page.$eval('#live-policies tbody tr svg.spark', (s) => ({ max: s.querySelector('text.max')?.textContent,
      dash: getComputedStyle(s.querySelector('polyline.no')).strokeDasharray, solid: getComputedStyle(s.querySelector('polyline.ok')).strokeDasharray }));
    check(/^\d+\/s$/.test(sp.max || '') && sp.dash !== 'none' && sp.solid === 'none', `the sparkline has its scale and a dashed denied line: ${JSON.stringify(sp)}`);

    // 4b. Names: never broken mid-word (a line ends only after '/' or ',', a segment too long
    // for its cell is ellipsized with the whole name in the title), at the test's width and a
    // narrow one; each name's title says what its prefix means, and a legend says it for all.
    const names = (pg) => pg.$$eval('#live-policies tbody td:first-child code, #live-top td.policy code', (cs) => cs.map((c) => {
      const name = c.textContent, bad = [];
      let prev = null, prevTop = null, lines = 1;
      const w = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
      for (let n = w.nextNode(); n; n = w.nextNode()) {
        for (let i = 0; i < n.data.length; i++) {
          const r = document.createRange();
          r.setStart(n, i);
          r.setEnd(n, i + 1);
          const rect = r.getClientRects()[0];
          if (!rect || !rect.width) continue;
          if (prevTop !== null && rect.top > prevTop + 2) {
            lines++;
            if (!'/,'.includes(prev)) bad.push(`after '${prev}' before '${n.data[i]}'`);
          }
          prev = n.data[i];
          prevTop = rect.top;
        }
      }
      const clipped = [c, ...c.querySelectorAll('*')].some((e) => e.scrollWidth > e.clientWidth + 1);
      const segs = [...c.querySelectorAll('*')].map((e) => `${getComputedStyle(e).display} ${e.clientWidth}/${e.scrollWidth} max ${getComputedStyle(e).maxWidth}`).join('; ');
      return { name, bad, lines, clipped, title: c.title, segs };
    }));
    const LONG = 'p:the_quota_of_the_partner_integrations_team';
    const judge = (ns, width) => {
      const bad = [];
      if (!ns.some((n) => n.name === 'i:fixed_window:5/1m') || !ns.some((n) => n.name.startsWith('i:sliding_window:5/1m,')))
        bad.push(`the inline policies are listed: ${ns.map((n) => n.name)}`);
      for (const n of ns) {
        if (n.bad.length) bad.push(`${n.name} is broken mid-word: ${n.bad.join('; ')}`);
        if (n.clipped && !n.title.includes(n.name)) bad.push(`${n.name}, ellipsized, has not its whole name in the title: ${n.title}`);
      }
      const long = ns.find((n) => n.name === LONG);
      if (!(long && long.clipped && long.lines === 1 && long.title.includes(long.name)))
        bad.push(`a name of one piece too long for the column is ellipsized, whole in its title: ${JSON.stringify(long)}`);
      if (width < 1000 && !ns.some((n) => n.name !== LONG && n.lines > 1)) bad.push('a long name of pieces wraps');
      return bad;
    };
    for (const width of [1200, 560]) {
      await page.setViewport({ width, height: 900 });
      await page.waitForFunction((w) => window.innerWidth === w, { timeout: 5000 }, width);
      // Judged on a drawn table at this width: a few tries, as the page polls and redraws.
      let bad = [], ns = [];
      for (let k = 0; k < 8; k++) {
        await sleep(600);
        ns = await names(page);
        bad = judge(ns, width);
        if (!bad.length) break;
      }
      const col = await page.$eval('#live-policies', (t) => `window ${window.innerWidth} px, table ${t.getBoundingClientRect().width} px, names ${t.tBodies[0].rows[0].cells[0].getBoundingClientRect().width} px`);
      check(!bad.length, `at ${width} px the names wrap only after '/' or ',' (${col}): ${bad.join(' | ')} ${bad.length ? JSON.stringify(ns) : ''}`);
    }
    await page.setViewport({ width: 1200, height: 900 });
    const kinds = Object.fromEntries((await names(page)).map((n) => [n.name, n.title]));
    check(/inline policy/.test(kinds['i:fixed_window:5/1m'] || '') && /named policy/.test(kinds['p:api'] || '')
      && /Envoy rule/.test(kinds['rl.category'] || ''), `each name's title says what it is: ${JSON.stringify(kinds)}`);
    const legendText = await page.$eval('#live-names', (e) => (e.getBoundingClientRect().height > 0 ? e.textContent.replace(/\s+/g, ' ') : '')).catch(() => '');
    check(/i:TEXT/.test(legendText) && /inline/.test(legendText) && /p:NAME/.test(legendText) && /named/.test(legendText)
      && /Envoy rule/.test(legendText) && /r:PATH/.test(legendText), `a legend explains the names' prefixes: "${legendText}"`);
    for (const [path, want] of [['/v1/peek?=x', /a peek takes key and policy, or an envoy rule's rule, key, domain and descriptor/],
      ['/v1/stats?x=1', /GET \/v1\/stats takes no parameters/], ['/v1/rules?x=1', /GET \/v1\/rules takes no parameters/]]) {
      const r = await raw(d.http, path);
      check(r.status === 400 && want.test(JSON.parse(r.body).error) && !/cost/.test(r.body), `${path}: 400 with its own parameters: ${r.status} ${r.body}`);
    }
    const top1 = await raw(d.http, '/v1/top?n=%31');
    check(top1.status === 200 && JSON.parse(top1.body).keys.length === 1, `/v1/top?n=%31 decodes as n=1: ${top1.status} ${top1.body}`);
    const slash = await open(origin, '/ui/live/');
    await slash.waitForFunction(() => Number(document.body.dataset.live || 0) >= 1, { timeout: 10000 });
    check(await slash.$eval('#playground', (e) => e.hidden), '/ui/live/ (a trailing slash) opens the live tab');
    await slash.close();
    check(await page.$eval('#playground', (e) => e.hidden), 'on /ui/live the playground is hidden');

    // 5. Explain a key: equal to RL.PEEK around it, and nothing charged or counted.
    const peek = () => redis(d.resp, 'RL.PEEK', 'user:3', 'gcra:10/1h').map(Number);
    const before = peek();
    const m0 = await raw(d.http, '/metrics');
    await page.type('#peek-key', 'user:3');
    await page.type('#peek-policy', 'gcra:10/1h');
    await page.click('#peek-go');
    await page.waitForFunction(() => document.body.dataset.peeked === '1', { timeout: 5000 });
    const got = await page.evaluate(() => ({
      allowed: document.getElementById('peek-out').dataset.allowed === 'true',
      limit: Number(document.getElementById('peek-limit').textContent),
      remaining: Number(document.getElementById('peek-remaining').textContent),
      retry: Number(document.getElementById('peek-retry').dataset.ms),
      reset: Number(document.getElementById('peek-reset').dataset.ms),
    }));
    const m1 = await raw(d.http, '/metrics');
    const after = peek();
    const pick = (t) => t.body.split('\n').filter((l) => /^ratelimitd_(policy_)?decisions_total/.test(l)).join('\n');
    check(pick(m0) === pick(m1), 'explain-a-key counts no decision');
    check(JSON.stringify(before.slice(0, 3)) === JSON.stringify(after.slice(0, 3)), `RL.PEEK is the same before and after: ${before} / ${after}`);
    check(got.allowed === (before[0] === 1) && got.limit === before[1] && got.remaining === before[2] && got.retry === before[3]
      && got.reset <= before[4] && got.reset >= after[4], `explain-a-key equals RL.PEEK: page ${JSON.stringify(got)}, RL.PEEK ${before} then ${after}`);
    check(got.remaining === 8, `user:3 after 2 of 10: 8 remaining (${got.remaining})`);
    check(await page.$eval('#peek-timeline', (e) => !e.hasAttribute('hidden') && e.getBoundingClientRect().height > 40 && e.querySelectorAll('line').length > 2), 'the key is drawn on a timeline');
    // Its bar and lines have a legend, in the colours they are drawn in.
    const lg = await page.evaluate(() => {
      const l = document.getElementById('peek-legend');
      if (!l || l.hidden || !l.getBoundingClientRect().height) return null;
      const paint = (sel, prop) => getComputedStyle(document.querySelector(`#peek-timeline ${sel}`))[prop];
      const sw = (k) => { const s = l.querySelector(`[data-k="${k}"]`); return s ? getComputedStyle(s).color : null; };
      return { text: l.textContent.replace(/\s+/g, ' '), used: [paint('.used', 'fill'), sw('used')], free: [paint('.free', 'fill'), sw('free')],
        refill: [paint('.refill', 'stroke'), sw('refill')], wait: sw('wait') };
    });
    check(lg && /used/.test(lg.text) && /left/.test(lg.text) && /retry/.test(lg.text) && /whole again/.test(lg.text)
      && lg.used[0] === lg.used[1] && lg.free[0] === lg.free[1] && lg.refill[0] === lg.refill[1] && lg.wait,
      `explain-a-key's bar and lines have a legend in their colours: ${JSON.stringify(lg)}`);

    // 6. Explain a key under an Envoy rule (the rule's path from /v1/rules, the descriptor as
    // ShouldRateLimit got it above): equal to RL.PEEK of the store key under r:PATH, twice,
    // with nothing charged or counted (the envoy counters included).
    const rulesJson = JSON.parse((await raw(d.http, '/v1/rules')).body);
    check(JSON.stringify(rulesJson.rules.map((r) => [r.rule, r.policy, r.domain, r.descriptor, r.policy_text]))
      === JSON.stringify([['rl.category', 'r:rl.category', 'rl', [{ key: 'category', value: null }], 'fixed_window:3/1h']]),
      `/v1/rules lists the config's one rule: ${JSON.stringify(rulesJson)}`);
    const unknown = await raw(d.http, '/v1/peek?rule=rl.nope&key=a');
    check(unknown.status === 404 && /unknown rule 'rl\.nope'/.test(JSON.parse(unknown.body).error), `an unknown rule is a 404 with a JSON error: ${unknown.status} ${unknown.body}`);
    const nomatch = await raw(d.http, '/v1/peek?domain=rl&descriptor=colour%3Dred');
    check(nomatch.status === 404 && /no rule of domain 'rl' matches/.test(JSON.parse(nomatch.body).error), `a descriptor no rule matches is a 404: ${nomatch.status} ${nomatch.body}`);
    const storeKey = '2:rl|8:category=books';
    const rpeek = () => redis(d.resp, 'RL.PEEK', storeKey, 'r:rl.category').map(Number);
    const envoyHits = (t) => t.body.split('\n').filter((l) => /^ratelimitd_(envoy_[a-z_]+|policy_decisions|decisions)_total\{/.test(l)).join('\n');
    const rBefore = rpeek();
    const e0 = await raw(d.http, '/metrics');
    check(rBefore.length === 6 && rBefore[0] === 0 && rBefore[1] === 3 && rBefore[2] === 0, `RL.PEEK of the rule's key after 3 OK and 2 OVER_LIMIT: denied, 0 of 3 left (${rBefore})`);
    await page.select('#peek-rule', 'rl.category');
    check(await page.$eval('#peek-policy', (e) => e.disabled) && await page.$eval('#peek-key', (e) => e.value) === 'category=',
      'picking a rule turns the key field into its descriptor (template category=) and the policy off');
    const explainRule = async (n) => {
      await page.$eval('#peek-key', (e) => { e.value = ''; });
      await page.type('#peek-key', 'category=books');
      await page.click('#peek-go');
      await page.waitForFunction((k) => document.body.dataset.peeked === String(k), { timeout: 5000 }, n);
      return page.evaluate(() => ({
        allowed: document.getElementById('peek-out').dataset.allowed === 'true',
        limit: Number(document.getElementById('peek-limit').textContent),
        remaining: Number(document.getElementById('peek-remaining').textContent),
        retry: Number(document.getElementById('peek-retry').dataset.ms),
        reset: Number(document.getElementById('peek-reset').dataset.ms),
        resp: document.getElementById('peek-resp').textContent,
      }));
    };
    const r1 = await explainRule(2);
    const e1 = await raw(d.http, '/metrics');
    const rMid = rpeek();
    const e2 = await raw(d.http, '/metrics');
    const r2 = await explainRule(3);
    const e3 = await raw(d.http, '/metrics');
    const rAfter = rpeek();
    const same = (g, b, a) => g.allowed === (b[0] === 1) && g.limit === b[1] && g.remaining === b[2]
      && g.retry <= b[3] && g.retry >= a[3] && g.reset <= b[4] && g.reset >= a[4];
    check(same(r1, rBefore, rMid), `explain-a-key with the rule equals RL.PEEK ${storeKey} r:rl.category: page ${JSON.stringify(r1)}, RL.PEEK ${rBefore} then ${rMid}`);
    check(same(r2, rMid, rAfter), `a second explain is the same (nothing charged): page ${JSON.stringify(r2)}, RL.PEEK ${rMid} then ${rAfter}`);
    check(r1.retry > 0 && r1.resp === `RL.PEEK ${storeKey} r:rl.category`, `the rule's key is denied for a while, and the page says how RESP asks: ${JSON.stringify(r1)}`);
    check(JSON.stringify(rBefore.slice(0, 3)) === JSON.stringify(rAfter.slice(0, 3)), `RL.PEEK of the rule's key is the same before and after: ${rBefore} / ${rAfter}`);
    check(envoyHits(e0) === envoyHits(e1) && envoyHits(e2) === envoyHits(e3) && /rule="rl.category"\} 5$/m.test(envoyHits(e3)),
      `explaining a rule counts nothing (decisions, envoy hits): ${envoyHits(e0)} / ${envoyHits(e1)}`);

    // 6b. Keys of any bytes: /v1/peek writes them percent-encoded as /v1/top does (valid JSON,
    // both forms); the page shows a key named %41 as %41 and quotes a key with a space as
    // redis-cli takes it.
    const bin = await raw(d.http, '/v1/peek?key=%FF%FE&policy=gcra:1/1s');
    check(bin.status === 200 && JSON.parse(bin.body).key === '%FF%FE' && JSON.parse(bin.body).policy === 'gcra:1/1s', `/v1/peek of key 0xFF 0xFE: percent-encoded JSON: ${bin.body}`);
    const pct = await raw(d.http, '/v1/peek?key=%2541&policy=gcra:1/1s');
    check(pct.status === 200 && JSON.parse(pct.body).key === '%2541', `/v1/peek of key "%41": %2541 as /v1/top writes it: ${pct.body}`);
    const bdesc = await raw(d.http, '/v1/peek?domain=rl&descriptor=category%3D%FF%22');
    check(bdesc.status === 200 && JSON.parse(bdesc.body).key === '2:rl|8:category=%FF%22', `/v1/peek with a descriptor of raw bytes: percent-encoded JSON: ${bdesc.body}`);
    redis(d.resp, 'RL.CHECK', '%41', 'fixed_window:1/1h');
    redis(d.resp, 'RL.CHECK', '%41', 'fixed_window:1/1h');
    await page.waitForFunction(() => [...document.querySelectorAll('#live-top tbody tr')].some((r) => r.cells[1].textContent === '%41'), { timeout: 5000 })
      .then(() => check(true, ''), () => fail('the top offenders show the key named %41 as %41'));
    await page.select('#peek-rule', '');
    const respLine = async (key, n) => {
      await page.$eval('#peek-key', (e) => { e.value = ''; });
      await page.$eval('#peek-policy', (e) => { e.value = ''; });
      await page.type('#peek-key', key);
      await page.type('#peek-policy', 'gcra:10/1m');
      await page.click('#peek-go');
      await page.waitForFunction((k) => document.body.dataset.peeked === String(k), { timeout: 5000 }, n);
      return page.$eval('#peek-resp', (e) => e.textContent);
    };
    let line = await respLine('a b', 4);
    check(line === 'RL.PEEK "a b" gcra:10/1m', `a key with a space is quoted in the RESP line: ${line}`);
    line = await respLine('%41', 5);
    check(line === 'RL.PEEK %41 gcra:10/1m', `a key named %41 shows as %41: ${line}`);

    // 7. Leases: K concurrency slots held (RESP), shown by the page, /v1/stats and /metrics;
    // released, 0 again.
    const K = 3, leaseIds = [];
    for (let i = 0; i < K; i++) {
      const a = redis(d.resp, 'RL.ACQUIRE', 'job:7', 'concurrency:5/1m');
      check(a[0] === '1', `RL.ACQUIRE ${i + 1} of ${K} is allowed: ${a}`);
      leaseIds.push(a[4]);
    }
    const leasesShown = async (n) => {
      try {
        await page.waitForFunction((k) => document.getElementById('live-leases').textContent === String(k), { timeout: 5000 }, n);
      } catch { /* judged below */ }
      const st = JSON.parse((await raw(d.http, '/v1/stats')).body);
      const m = /^ratelimitd_leases\{kind="concurrency"\} (\d+)$/m.exec((await raw(d.http, '/metrics')).body);
      return { page: await page.$eval('#live-leases', (e) => e.textContent), stats: st.leases.concurrency, metrics: m && Number(m[1]), units: st.leases.redis_units };
    };
    const held = await leasesShown(K);
    check(held.page === String(K) && held.stats === K && held.metrics === K && held.units === 0, `${K} leases held: the page, /v1/stats and /metrics say so: ${JSON.stringify(held)}`);
    if (shots) {
      await page.setViewport({ width: 1200, height: 1700 });
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: join(shots, 'live.png'), fullPage: false });
    }
    for (const id of leaseIds) check(redis(d.resp, 'RL.RELEASE', 'job:7', 'concurrency:5/1m', id)[0] === '1', `RL.RELEASE ${id}`);
    const none = await leasesShown(0);
    check(none.page === '0' && none.stats === 0 && none.metrics === 0, `released: 0 leases on the page, /v1/stats and /metrics: ${JSON.stringify(none)}`);
    await page.close();
  }
  d.p.kill('SIGTERM');

  // 8. --no-ui: no page, the endpoints as before.  A password: the page behind the token.
  const off = await daemon('--no-ui');
  check((await raw(off.http, '/')).status === 404 && (await raw(off.http, '/app.js')).status === 404, '--no-ui: / is 404');
  check((await raw(off.http, '/v1/check?key=a&policy=api2:1/1s'.replace('api2:', 'fixed_window:'))).status === 200, '--no-ui: /v1/check still answers');
  off.p.kill('SIGTERM');
  const pw = await daemon('--password', 'sesame');
  check((await raw(pw.http, '/')).status === 401, 'with a password, / without the token is 401');
  check((await raw(pw.http, '/', { headers: { Authorization: 'Bearer nope' } })).status === 401, 'with a password, a wrong token is 401');
  check((await raw(pw.http, '/', { headers: { Authorization: 'Bearer sesame' } })).status === 200, 'with a password, the token opens /');
  check((await raw(pw.http, '/v1/stats')).status === 401 && (await raw(pw.http, '/v1/peek?key=a&policy=api')).status === 401, 'and /v1/stats, /v1/peek');
  const unauth = await raw(pw.http, '/ui/live');
  const challenges = String(unauth.headers['www-authenticate']); // node joins the two with ', '
  check(challenges.startsWith('Basic realm="ratelimitd", charset="UTF-8"') && challenges.includes('Bearer realm="ratelimitd"'),
    `a 401 challenges Basic (the browser prompts) and Bearer: ${JSON.stringify(challenges)}`);
  const basic = (user, pass) => ({ Authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });
  check((await raw(pw.http, '/v1/stats', { headers: basic('anyone', 'sesame') })).status === 200, 'Basic with the password (any user name) opens /v1/stats');
  check((await raw(pw.http, '/', { headers: basic('anyone', 'sesam') })).status === 401
    && (await raw(pw.http, '/', { headers: { Authorization: 'Basic !!!' } })).status === 401, 'Basic with a wrong password or bad base64 is 401');
  if (wasm) {
    // A browser sends Basic when it navigates: the page and the live tab (its fetches carry it).
    const porigin = `http://127.0.0.1:${pw.http}`;
    const bad = await browser.newPage();
    await bad.authenticate({ username: 'ops', password: 'wrong' });
    const denied = await bad.goto(porigin + '/ui/live');
    check(denied.status() === 401, `the browser with a wrong password: 401 (${denied.status()})`);
    await bad.close();
    const pg = await browser.newPage();
    await pg.authenticate({ username: 'ops', password: 'sesame' });
    pg.on('pageerror', (e) => problems.push(`page error on the password page: ${e.message}`));
    const res = await pg.goto(porigin + '/ui/live');
    check(res.status() === 200, `the browser with the password opens /ui/live (${res.status()})`);
    await pg.waitForSelector('body[data-ready]', { timeout: 15000 });
    await pg.waitForFunction(() => Number(document.body.dataset.live || 0) >= 1, { timeout: 10000 });
    check(await pg.$eval('#live-backend', (e) => e.textContent) === 'local', 'with a password the live tab polls the daemon (backend: local)');
    await pg.close();
  }
  pw.p.kill('SIGTERM');

  // 9. `ratelimit sim --serve`: the same page without a daemon; Ctrl-C stops it.
  const sv = await start(cli, ['sim', '--serve', '127.0.0.1:0']);
  const url = /http:\/\/[^ ]+\//.exec(sv.line)[0].replace(/\/$/, '');
  page = await open(url, '/');
  if (wasm) {
    await page.waitForSelector('body[data-ready]', { timeout: 15000 });
    check(await page.$$eval('#table tbody tr', (rs) => rs.length) === 7, 'sim --serve: the playground draws');
  } else {
    check((await page.$eval('h1', (e) => e.textContent)) === 'The playground was not built', 'sim --serve without RLT_WASM: the page says so');
  }
  await page.close();
  const sport = Number(/:(\d+)$/.exec(url)[1]);
  check((await raw(sport, '/../etc/passwd')).status === 404 && (await raw(sport, '/index.html', { method: 'HEAD' })).body === '', 'sim --serve: 404 outside the site, HEAD without a body');
  const code = new Promise((ok) => sv.p.on('exit', (c) => ok(c)));
  sv.p.kill('SIGINT');
  check(await code === 0, 'sim --serve: Ctrl-C stops it with status 0');
} finally {
  await browser.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await rm(profile, { recursive: true, force: true });
  await rm(tmp, { recursive: true, force: true });
}
for (const p of problems) fail(p);
if (failures) process.exit(1);
console.log('web_live: every check passed');
