// The RLQS quota service in sight (issue 35): real grpcio StreamRateLimitQuotas streams
// (rlqs_streams.py) report quota buckets to a live daemon and stay open, silent, so that the
// state holds still; then the Live page's "Quota buckets" table (Debian's chromium, headless,
// puppeteer-core), /v1/stats' "quotas" and /metrics' per-bucket gauges show the same numbers
// (one snapshot function renders all three), /v1/rules lists the quota bucket rules, and with
// 10,001 buckets from ten clients every output stays bounded: the top 20 by demand, the rest
// summed (and the sums add up to what the streams reported); /metrics passes promtool.
// Usage: node quotas.mjs NODE_MODULES RATELIMITD RATELIMIT_CLI REPO WASM(0|1)
import { spawn, spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, daemonBin, , repo, wasmFlag] = process.argv.slice(2);
if (wasmFlag !== '1') {
  console.error('SKIPPED web_quotas: the playground (RLT_WASM) is not built, so there is no Live page');
  process.exit(77);
}
const { default: puppeteer } = await import(pathToFileURL(join(modules, 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js')).href);

let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL ${what}`); };
const check = (cond, what) => { if (!cond) fail(what); return cond; };
const tmp = await mkdtemp(join(tmpdir(), 'rlt-quotas-'));
const children = [];

/** Starts a program and resolves with its first stdout line. */
function start(bin, args, stdin = 'ignore') {
  const p = spawn(bin, args, { stdio: [stdin, 'pipe', 'inherit'] });
  children.push(p);
  return new Promise((ok, ko) => {
    let out = '';
    p.stdout.on('data', (b) => { out += b; if (out.includes('\n')) ok({ p, line: out.split('\n')[0] }); });
    p.on('exit', (c) => ko(new Error(`${bin} exited ${c} before its first line`)));
  });
}
async function daemon(cfg) {
  const { p, line } = await start(daemonBin, ['--port', '0', '--http-port', '0', '--grpc-port', '0', '--no-snapshot', '--threads', '2', '--config', cfg]);
  const port = (name) => Number(new RegExp(`${name} [^ ]*:(\\d+)`).exec(line)[1]);
  return { p, http: port('http'), grpc: port('grpc') };
}
function raw(port, path) {
  return new Promise((ok, ko) => {
    const r = request({ host: '127.0.0.1', port, path }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    r.on('error', ko);
    r.end();
  });
}
/** Envoys that report and stay open: resolves with what they reported and a function ending them. */
async function envoys(grpc, web, api, perStream) {
  const { p, line } = await start('/usr/bin/python3', [join(repo, 'tests/web/rlqs_streams.py'), String(grpc), String(web), String(api), String(perStream)], 'pipe');
  const done = new Promise((ok) => p.on('exit', (c) => ok(c)));
  return { want: JSON.parse(line), end: async () => { p.stdin.end(); return done; } };
}

/** A bucket's numbers as /v1/stats gives them, in the page's and /metrics' order. */
const nums = (r) => [r.members, r.demand, r.assigned_tokens_per_fill, r.assigned_max_tokens, r.budget_tokens_per_fill,
  r.budget_max_tokens, r.left_tokens_per_fill, r.left_max_tokens];
/** /metrics' per-bucket gauges as {"domain|bucket": [the same eight numbers]}, and the series count. */
function fromMetrics(text) {
  const rows = {};
  let series = 0;
  const at = { members: [0], demand: [1], assigned: [2, 3], budget: [4, 5], left: [6, 7] };
  for (const [, fam, d, b, part, v] of text.matchAll(/^ratelimitd_rlqs_bucket_(members|demand|assigned|budget|left)\{domain="([^"]*)",bucket="([^"]*)"(?:,part="(tokens_per_fill|max_tokens)")?\} (-?\d+)$/gm)) {
    const k = `${d}|${b}`;
    (rows[k] ||= new Array(8).fill(null))[at[fam][part === 'max_tokens' ? 1 : 0]] = Number(v);
    series++;
  }
  return { rows, series };
}
const other = /^ratelimitd_rlqs_buckets_other (\d+)$/m;

const profile = await mkdtemp(join(tmpdir(), 'rlt-chromium-'));
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium', headless: true, userDataDir: profile,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const problems = [];
/** The Live page once it has polled after `since` polls: its quota rows as [domain|bucket, eight numbers], and the summed row. */
async function pageRows(origin) {
  const page = await browser.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  await page.goto(`${origin}/ui/live`);
  await page.waitForFunction(() => Number(document.body.dataset.live || 0) >= 1, { timeout: 20000 });
  const got = await page.$$eval('#live-quotas tbody tr', (trs) => trs.map((tr) => {
    const n = [...tr.querySelectorAll('td.n')].flatMap((c) => (c.dataset.b === undefined ? [Number(c.dataset.v)] : [Number(c.dataset.v), Number(c.dataset.b)]));
    return tr.classList.contains('other') ? { other: Number(tr.dataset.buckets), n } : { key: `${tr.cells[0].textContent}|${tr.cells[1].textContent}`, n, rule: tr.cells[2].textContent };
  }));
  await page.close();
  return got;
}

const QCFG = 'domain: q\nassignment_ttl: 3600s\nquota_buckets:\n'
  + '  - match: {name: web}\n    policy: token_bucket:200/1s,burst=40\n'
  + '  - match: {name: api, user: "*"}\n    policy: token_bucket:100/1s,burst=20\n'
  + '  - match: {name: closed}\n    blanket: deny_all\n    assignment_ttl: 10s\n';

try {
  const cfg = join(tmp, 'q.yaml');
  await writeFile(cfg, QCFG);

  // 1. /v1/rules: the quota bucket rules beside the (absent) RLS rules.
  let d = await daemon(cfg);
  const rules = JSON.parse((await raw(d.http, '/v1/rules')).body);
  const brief = rules.quota_buckets.map((r) => [r.domain, r.rule, r.match.map((m) => `${m.key}=${m.value}`).join(','), r.kind, r.policy_text, r.shadow, r.fail, r.ttl_ms]);
  check(JSON.stringify(rules.rules) === '[]' && JSON.stringify(brief) === JSON.stringify([
    ['q', 0, 'name=web', 'policy', 'token_bucket:200/1s,burst=40', false, 'default', 3600000],
    ['q', 1, 'name=api,user=*', 'policy', 'token_bucket:100/1s,burst=20', false, 'default', 3600000],
    ['q', 2, 'name=closed', 'deny_all', '', false, 'default', 10000]])
    && JSON.stringify(rules.quota_defaults) === '[{"domain":"q","kind":"allow_all","ttl_ms":3600000}]',
  `/v1/rules lists the quota buckets: ${JSON.stringify(rules)}`);

  // 2. A few buckets: three Envoys on web (demands 10, 20, 30 a second), two with five api
  // buckets each.  The page, /v1/stats and /metrics agree, bucket by bucket.
  let fleet = await envoys(d.grpc, 3, 2, 5);
  const st = JSON.parse((await raw(d.http, '/v1/stats')).body).quotas;
  const met = (await raw(d.http, '/metrics')).body;
  const shown = await pageRows(`http://127.0.0.1:${d.http}`);
  const st2 = JSON.parse((await raw(d.http, '/v1/stats')).body).quotas;
  check(JSON.stringify(st) === JSON.stringify(st2), 'the quota state holds still while the streams are silent');
  check(st.buckets === 11 && fleet.want.buckets === 11 && st.shown.length === 11 && st.other.buckets === 0,
    `11 buckets, all shown: ${st.buckets}, ${st.shown.length} shown, ${st.other.buckets} summed`);
  const web = st.shown[0];
  check(web.bucket === 'name=web' && web.members === 3 && web.demand === 60 && web.budget_tokens_per_fill === 200
    && web.budget_max_tokens === 40 && web.assigned_tokens_per_fill > 0 && web.assigned_tokens_per_fill <= 200
    && web.left_tokens_per_fill === 200 - web.assigned_tokens_per_fill && web.left_max_tokens === 40 - web.assigned_max_tokens
    && web.kind === 'policy' && web.rule === 0 && web.policy_text === 'token_bucket:200/1s,burst=40' && web.ttl_ms === 3600000,
  `web first: 3 streams, demand 10 + 20 + 30, its budget 200 (40), left = budget - assigned: ${JSON.stringify(web)}`);
  check(st.shown.reduce((a, r) => a + r.demand, 0) === fleet.want.demand, `the demands add up to the reports: ${fleet.want.demand}`);
  const m = fromMetrics(met);
  check(m.series === 8 * (11 + 1) && Number(other.exec(met)?.[1]) === 0, `/metrics: 8 series a bucket and the other: ${m.series}`);
  for (const r of st.shown) {
    const k = `${r.domain}|${r.bucket}`;
    check(JSON.stringify(m.rows[k]) === JSON.stringify(nums(r)), `/metrics for ${k}: ${JSON.stringify(m.rows[k])}, /v1/stats ${JSON.stringify(nums(r))}`);
  }
  const pageShown = shown.filter((r) => r.key);
  check(JSON.stringify(pageShown.map((r) => [r.key, r.n])) === JSON.stringify(st.shown.map((r) => [`${r.domain}|${r.bucket}`, nums(r)])),
    `the page's quota rows equal /v1/stats: page ${JSON.stringify(pageShown)}, /v1/stats ${JSON.stringify(st.shown.map(nums))}`);
  check(shown.length === 11, `no summed row when every bucket is shown: ${shown.length} rows`);
  check(pageShown[0].rule === '#0 token_bucket:200/1s,burst=40' && pageShown[1].rule === '#1 token_bucket:100/1s,burst=20',
    `the page names each bucket's rule and policy: ${pageShown[0].rule}, ${pageShown[1].rule}`);
  check(await fleet.end() === 0, 'the Envoys ended cleanly');
  // Their streams ended: the buckets keep their live assignments (departed members) for the TTL.
  const after = JSON.parse((await raw(d.http, '/v1/stats')).body).quotas.shown[0];
  check(after.members === 0 && after.departed === 3 && after.assigned_tokens_per_fill === web.assigned_tokens_per_fill,
    `the streams gone: 0 members, 3 departed whose assignments still count: ${JSON.stringify(after)}`);
  d.p.kill('SIGTERM');

  // 3. 10,001 buckets: two Envoys on web, ten others (ten clients: the per-client cap is
  // 4,096) with 1,000 api buckets each.  Every output shows the top 20 and sums the rest.
  d = await daemon(cfg);
  fleet = await envoys(d.grpc, 2, 10, 1000);
  const big = JSON.parse((await raw(d.http, '/v1/stats')).body).quotas;
  const bigMet = (await raw(d.http, '/metrics')).body;
  const bigPage = await pageRows(`http://127.0.0.1:${d.http}`);
  const sum = (f) => big.shown.reduce((a, r) => a + f(r), 0) + f(big.other);
  check(big.buckets === 10001 && fleet.want.buckets === 10001 && big.shown.length === 20 && big.other.buckets === 9981,
    `10,001 buckets: 20 shown, 9,981 summed: ${big.buckets}, ${big.shown.length}, ${big.other.buckets}`);
  check(big.shown[0].bucket === 'name=web' && big.shown[0].demand === 30 && big.shown.slice(1).every((r) => r.demand === 12),
    `the top by demand: web (30), then api buckets of demand 12: ${JSON.stringify(big.shown.map((r) => r.demand))}`);
  check(sum((r) => r.demand) === fleet.want.demand && sum((r) => r.members) === 2 + 10000,
    `shown + summed = every report: demand ${sum((r) => r.demand)} of ${fleet.want.demand}, members ${sum((r) => r.members)}`);
  check(sum((r) => r.budget_tokens_per_fill) === 200 + 10000 * 100 && sum((r) => r.left_tokens_per_fill) === sum((r) => r.budget_tokens_per_fill) - sum((r) => r.assigned_tokens_per_fill),
    `the budgets add up, and left = budget - assigned over all: ${sum((r) => r.budget_tokens_per_fill)}`);
  const bm = fromMetrics(bigMet);
  check(bm.series === 8 * 21 && Number(other.exec(bigMet)?.[1]) === 9981 && bigMet.length < 200000,
    `/metrics stays bounded: ${bm.series} per-bucket series, ${bigMet.length} bytes`);
  check(JSON.stringify(bm.rows['|other']) === JSON.stringify(nums(big.other)), `/metrics' other equals /v1/stats': ${JSON.stringify(bm.rows['|other'])} ${JSON.stringify(nums(big.other))}`);
  for (const r of big.shown) {
    const k = `${r.domain}|${r.bucket}`;
    check(JSON.stringify(bm.rows[k]) === JSON.stringify(nums(r)), `/metrics for ${k} with 10,001 buckets`);
  }
  const want = [...big.shown.map((r) => ({ key: `${r.domain}|${r.bucket}`, n: nums(r) })), { other: 9981, n: nums(big.other) }];
  check(JSON.stringify(bigPage.map(({ rule, ...r }) => r)) === JSON.stringify(want), `the page shows the same 21 rows: page ${JSON.stringify(bigPage).slice(0, 600)}, /v1/stats ${JSON.stringify(want).slice(0, 600)}`);
  const prom = spawnSync('promtool', ['check', 'metrics'], { input: bigMet, encoding: 'utf8' });
  check(prom.status === 0, `promtool passes /metrics with 10,001 buckets: ${prom.stdout} ${prom.stderr}`);
  check(await fleet.end() === 0, 'the 12 Envoys ended cleanly');
  d.p.kill('SIGTERM');
} finally {
  await browser.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await rm(profile, { recursive: true, force: true });
  await rm(tmp, { recursive: true, force: true });
}
for (const p of problems) fail(p);
if (failures) process.exit(1);
console.log('web_quotas: every check passed');
