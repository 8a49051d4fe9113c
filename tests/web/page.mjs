// The playground in a real browser (Debian's chromium, headless, driven by puppeteer-core):
// served by a tiny static server of this test's own, it must load with no console error and no
// request to any other host; its table must equal `ratelimit sim`'s for the same input (the
// default pattern and others, set through the URL and through the controls, a pasted trace
// among them); clicking the traffic row, the keyboard and "Fire now" add requests where
// expected; a bad policy shows the parser's message; the URL fragment round-trips; a worst
// burst above L is red with "within its contract" as a note; no label of the timeline is
// clipped at its edges; the first table is drawn within 500 ms (the fastest of 5 loads).
// Usage: node page.mjs NODE_MODULES SITE_DIR RATELIMIT_CLI [SCREENSHOT_DIR]
import { createServer } from 'node:http';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, extname, normalize } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, site, cli, shots] = process.argv.slice(2);
const { default: puppeteer } = await import(pathToFileURL(join(modules, 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js')).href);

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };
const served = [];
const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^\/+/, '') || 'index.html';
  served.push(path);
  try {
    const body = await readFile(join(site, path));
    res.writeHead(200, { 'content-type': TYPES[extname(path)] || 'application/octet-stream' });
    res.end(body);
  } catch {
    res.writeHead(404);
    res.end();
  }
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;
const profile = await mkdtemp(join(tmpdir(), 'rlt-chromium-'));
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium', headless: true, userDataDir: profile,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});

let failures = 0;
const fail = (what) => { failures++; console.error(`FAIL ${what}`); };
const check = (cond, what) => { if (!cond) fail(what); return cond; };
const problems = [];

async function open(hash = '', { reducedMotion = false } = {}) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  if (reducedMotion) await page.emulateMediaFeatures([{ name: 'prefers-reduced-motion', value: 'reduce' }]);
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    if (r.url().startsWith(origin + '/') || r.url().startsWith('data:')) r.continue();
    else { problems.push(`request to another host: ${r.url()}`); r.abort(); }
  });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  await page.goto(`${origin}/index.html${hash}`);
  await page.waitForSelector('body[data-ready]', { timeout: 10000 });
  return page;
}

/** The table as the page shows it: header cells, and per row [name, state, ok, rejected, worst, delay]. */
const readTable = (page) => page.$eval('#table', (t) => ({
  head: [...t.tHead.rows[0].cells].map((c) => c.textContent),
  rows: [...t.tBodies[0].rows].map((r) => [...r.cells].map((c) => (c.querySelector('.n') || c).textContent)),
}));

/** `ratelimit sim ARGS`'s table: header cells and rows, first six columns. */
function cliTable(args, input) {
  const r = spawnSync(cli, ['sim', ...args], { encoding: 'utf8', input });
  if (r.status !== 0) throw new Error(`ratelimit sim ${args.join(' ')}: ${r.stderr}`);
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('| '));
  const cells = lines.map((l) => l.split(' | ').map((c) => c.replace(/^\|? +| +\|?$/g, '').trim()).slice(0, 6));
  return { head: cells[0], rows: cells.slice(1) };
}

function sameTable(page, cliT, what) {
  const ok = JSON.stringify(page.head) === JSON.stringify(cliT.head) && JSON.stringify(page.rows) === JSON.stringify(cliT.rows);
  if (!check(ok, `${what}: the page's table differs from ratelimit sim's`)) {
    console.error('page:', JSON.stringify(page, null, 1));
    console.error('cli: ', JSON.stringify(cliT, null, 1));
  }
}

const TRACE = '0 a\n0.5 b 2\n1 a 3\n1 c 0\n2.25 a\n9.999 b 1\n10 a 4\n10.001 a\n30 z 1\n';
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

try {
  // 1. The default page: sim's header cells and names, the state at t = 0, nothing else asked for.
  let page = await open();
  let t = await readTable(page);
  check(JSON.stringify(t.head) === JSON.stringify(['algorithm', 'state at t = 0', 'ok', 'rejected', 'worst 10-tick burst', 'max delay']),
    `default header cells: ${JSON.stringify(t.head)}`);
  check(t.rows.map((r) => r[0]).join('|') === 'Fixed window|Sliding log|Sliding counter|Token bucket|GCRA|Leaky bucket|Concurrency',
    'the rows are sim\'s seven algorithms by its names');
  check(t.rows[0][1] === 'window [0, 10): count 0/4' && t.rows[3][1] === 'tokens 4.00 / 4, +0.40 per tick' &&
    t.rows[5][1] === 'queue 0/4, drains 1 per 2.5 ticks', `the states at t = 0 read as sim's: ${t.rows.map((r) => r[1])}`);
  await page.close();

  // 1b. The seed's lesson: at t = 20 the fixed window has accepted all eight in a 10-tick span,
  // and a worst burst above L is red (the number and its cell), whether or not the algorithm's
  // contract allows it; "within its contract" is a secondary note where it does (the fixed
  // window's contract is per aligned window). A burst at or under L is not red. On the
  // timeline the worst span above L is a red band as well.
  page = await open('#until=20');
  const bursts = await page.$$eval('#table tbody tr', (rs) => rs.map((r) => {
    const td = r.cells[4], n = td.querySelector('.n'), note = td.querySelector('.note');
    const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).map(Number);
    return { name: r.cells[0].textContent, worst: Number(n.textContent), color: rgb(getComputedStyle(n).color),
      bg: rgb(getComputedStyle(td).backgroundColor), note: note ? note.textContent : '',
      noteSmaller: note ? parseFloat(getComputedStyle(note).fontSize) < parseFloat(getComputedStyle(n).fontSize) : false };
  }));
  // Red: the text clearly red, or a red background behind it (amber, #fff1d6, is not).
  const reddish = ([r, g, b, a = 1]) => a > 0 && r > 120 && r - g > 35 && Math.abs(g - b) < 20;
  const red = (c) => reddish(c.color) || reddish(c.bg);
  const fw = bursts[0];
  check(fw.name === 'Fixed window' && fw.worst === 8 && red(fw), `the fixed window's 8 in 10 ticks is red: ${JSON.stringify(fw)}`);
  check(/within its contract/.test(fw.note) && /per aligned window/.test(fw.note) && fw.noteSmaller,
    `the fixed window's 8 has "within its contract" (per aligned window) as a smaller note: ${JSON.stringify(fw)}`);
  for (const b of bursts) {
    if (b.worst > 4) check(red(b) && /within its contract/.test(b.note), `${b.name}: ${b.worst} > L = 4 is red, within its contract: ${JSON.stringify(b)}`);
    else check(!red(b) && b.note === '', `${b.name}: ${b.worst} ≤ L = 4 is neither red nor noted: ${JSON.stringify(b)}`);
  }
  const band = await page.$eval('#timeline g.row .band', (r) => (getComputedStyle(r).fill.match(/\d+/g) || []).map(Number));
  check(reddish(band), `the fixed window's worst span on the timeline is a red band: rgb(${band})`);
  const legend = await page.$eval('#timeline-h + .legend', (p) => p.textContent);
  check(/above L/.test(legend) && !/as the algorithm allows/.test(legend), `the timeline's legend says the band is a burst above L: ${legend}`);
  await page.close();

  // 1c. The clock's label and the axis's labels are never clipped: at either end of the
  // timeline (the default picture spans 0 .. 30: the clock stepped to t = 30 is its right
  // edge), with long numbers, on spans of other widths.
  const clipped = (pg) => pg.$eval('#timeline', (svg) => {
    const box = svg.getBoundingClientRect();
    return [...svg.querySelectorAll('text.clocklabel, text.axis')].map((t) => {
      const b = t.getBoundingClientRect();
      return { text: t.textContent, left: b.left - box.left, right: box.right - b.right, width: b.width };
    }).filter((t) => t.left < -0.5 || t.right < -0.5 || t.width === 0);
  });
  for (const [hash, steps] of [['#until=20', 10], ['#until=20', -20], ['#until=30', 0], ['#until=1000000', 0],
    ['#pattern=burst&limit=5&window=12&until=40', 0], ['#at=0.5,99999.5&until=99999.9', 0]]) {
    page = await open(hash);
    for (let i = 0; i < Math.abs(steps); i++) await page.click(steps > 0 ? '#step' : '#back');
    const out = await clipped(page);
    const label = await page.$eval('#timeline text.clocklabel', (t) => t.textContent).catch(() => null);
    const clockText = await page.$eval('#clock', (e) => e.textContent);
    check(out.length === 0 && label === clockText, `${hash}${steps ? ` and ${steps} steps` : ''}: every label inside the timeline, the clock's "${label}" (${clockText}): ${JSON.stringify(out)}`);
    await page.close();
  }

  // 2. The page's numbers are the CLI's: through the URL ...
  const viaUrl = [
    ['#until=13', ['--until', '13']],
    ['#until=20', ['--until', '20']],
    ['#pattern=burst&limit=5&window=12&until=40', ['--pattern', 'burst', '--limit', '5', '--window', '12', '--until', '40']],
    ['#pattern=random&seed=7&rate=0.9&duration=60&limit=3&window=7.5&until=60',
      ['--pattern', 'random', '--seed', '7', '--rate', '0.9', '--duration', '60', '--limit', '3', '--window', '7.5', '--until', '60']],
    ['#pattern=steady&rate=2&duration=15&hold=20&block=4s*2..20s&until=30',
      ['--pattern', 'steady', '--rate', '2', '--duration', '15', '--hold', '20', '--block', '4s*2..20s', '--until', '30']],
    ['#at=1,2,9.5,9.6,10,10.2,19.9,20&limit=2&window=5&until=25', ['--at', '1,2,9.5,9.6,10,10.2,19.9,20', '--limit', '2', '--window', '5', '--until', '25']],
    [`#trace=${encodeURIComponent(TRACE)}&until=31`, ['--trace', '-', '--until', '31'], TRACE],
  ];
  for (const [hash, args, input] of viaUrl) {
    page = await open(hash);
    sameTable(await readTable(page), cliTable(args, input), hash);
    await page.close();
  }

  // ... and through the controls: L, W, the pattern and a pasted trace typed into the page.
  page = await open();
  const set = async (sel, value) => {
    await page.$eval(sel, (e, v) => { e.value = v; e.dispatchEvent(new Event('change', { bubbles: true })); }, value);
  };
  await set('#pattern', 'trace');
  await set('#trace', TRACE);
  await set('#limit', '3');
  await set('#window', '7.5');
  await page.click('#reset');
  for (let i = 0; i < 32; i++) await page.click('#step');
  sameTable(await readTable(page), cliTable(['--trace', '-', '--limit', '3', '--window', '7.5', '--until', '32'], TRACE), 'pasted trace, L 3, W 7.5, via the controls');
  // The fragment holds it all, with sim's names; opened afresh it draws the same table.
  const hash = await page.evaluate(() => location.hash);
  check(/limit=3/.test(hash) && /window=7.5/.test(hash) && /trace=/.test(hash) && /until=32/.test(hash), `the fragment says it all: ${hash}`);
  const before = await readTable(page);
  await set('#row4', 'token_bucket:3/7500ms,burst=6');
  const custom = await readTable(page);
  const hash2 = await page.evaluate(() => location.hash);
  check(/row4=token_bucket:3\/7500ms,burst=6/.test(hash2), `a row's policy in the fragment: ${hash2}`);
  check(JSON.stringify(custom.rows[3]) !== JSON.stringify(before.rows[3]), 'a row\'s own policy changes its row');
  await page.close();
  page = await open(hash2);
  check(JSON.stringify(await readTable(page)) === JSON.stringify(custom), 'the fragment round-trips: the same table');
  check(await page.$eval('#limit', (e) => e.value) === '3' && await page.$eval('#row4', (e) => e.value) === 'token_bucket:3/7500ms,burst=6',
    'the fragment round-trips: the same inputs');
  check(await page.evaluate(() => location.hash) === hash2, 'the fragment is stable when read back');
  await page.close();

  // 3. Clicking the traffic row adds a request at that tick (boundary: 6..13, span 0..30).
  page = await open('#until=20');
  const box = await page.$eval('#timeline .traffic .hit', (r) => { const b = r.getBoundingClientRect(); return { x: b.x, y: b.y, w: b.width, h: b.height }; });
  await page.mouse.click(box.x + (15 / 30) * box.w, box.y + box.h / 2);
  let h = await page.evaluate(() => decodeURIComponent(location.hash));
  check(h.includes('at=6,7,8,9,10,11,12,13,15') && h.includes('until=20'), `a click at t = 15 adds a request there: ${h}`);
  sameTable(await readTable(page), cliTable(['--at', '6,7,8,9,10,11,12,13,15', '--until', '20']), 'after the click');
  // The keyboard does the same: focus the row, move the cursor, Enter.
  await page.$eval('#timeline .traffic', (g) => g.focus());
  for (let i = 0; i < 25; i++) await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Enter');
  h = await page.evaluate(() => decodeURIComponent(location.hash));
  check(h.includes('at=6,7,8,9,10,11,12,13,15,22.5'), `arrows and Enter add a request at the cursor: ${h}`);
  await page.close();

  // 4. "Fire now" adds a request at the running clock's time.
  page = await open('#pattern=steady');
  await page.click('#play');
  await sleep(700);
  const clock = async () => Number((await page.$eval('#clock', (e) => e.textContent)).replace('t = ', ''));
  const t0 = await clock();
  await page.click('#fire');
  const t1 = await clock();
  await page.click('#play'); // pause
  h = await page.evaluate(() => decodeURIComponent(location.hash));
  const at = (/at=([^&]*)/.exec(h) || [, ''])[1].split(',').map(Number);
  const added = at.filter((x) => !(Number.isInteger(x) && x % 2 === 0 && x <= 28)); // steady's own: 0, 2, .. 28
  check(t1 > 0 && at.length === 16 && added.length === 1 && added[0] >= t0 && added[0] <= t1, `Fire now while running adds one request between t = ${t0} and ${t1}: at=${at}`);
  await page.close();

  // 5. A bad policy shows the parser's own message, the CLI's.
  page = await open();
  await page.$eval('#row1', (e) => { e.value = 'fixed_window:4/10x'; e.dispatchEvent(new Event('change', { bubbles: true })); });
  const msg = await page.$eval('#row1-error', (e) => e.textContent);
  const cliMsg = spawnSync(cli, ['replay', '--policy', 'fixed_window:4/10x'], { encoding: 'utf8', input: '' }).stderr;
  check(msg.length > 10 && cliMsg.includes(msg), `the parser's message inline: page "${msg}", CLI "${cliMsg.trim()}"`);
  check(await page.$eval('#row1', (e) => e.getAttribute('aria-invalid')) === 'true', 'the bad policy is marked invalid');
  check((await readTable(page)).rows[0][1] === msg, 'the row says the error too');
  await page.close();

  // 5b. Each line of "When to reach for it" is a preset: it sets the fragment and draws its rows.
  page = await open();
  const presets = await page.$$eval('[data-preset]', (bs) => bs.map((b) => b.dataset.preset));
  check(presets.length === 6, `six presets: ${presets.length}`);
  for (let i = 0; i < presets.length; i++) {
    await page.click(`.presets tbody tr:nth-child(${i + 1}) button`);
    await page.waitForFunction((h) => location.hash === h, { timeout: 5000 }, presets[i]);
    await sleep(50);
    const pt = await readTable(page);
    check(pt.rows.length === 7 && pt.rows.every((r) => r.length === 6), `preset ${presets[i]} draws seven rows without an error`);
    if (i === 0) sameTable(pt, cliTable(['--pattern', 'boundary', '--until', '20']), `preset ${presets[i]}`);
    check(/row\d=/.test(presets[i]), `preset ${presets[i]} sets the rows its line recommends`);
    check(new Set(pt.rows.map((r) => r[0])).size === 7, `preset ${presets[i]}: seven distinct row names: ${pt.rows.map((r) => r[0])}`);
    if (i === 4) check(pt.rows[3][0] === 'Token bucket 2/10s' && pt.rows[4][0] === 'Token bucket 8/10s', `the tiers are told apart: ${pt.rows[3][0]}, ${pt.rows[4][0]}`);
  }
  await page.close();

  // 5c. A link with a malformed %-escape: the page still draws, the error says which part.
  for (const hash of ['#limit=%', '#at=1,2%', '#trace=%ZZ']) {
    page = await open(hash);
    const err = await page.$eval('#error', (e) => e.textContent);
    const rows = (await readTable(page)).rows;
    check(err.includes(`'${hash.slice(1)}'`) && err.includes('malformed') && rows.length === 7 && rows.every((r) => r.length === 6),
      `${hash}: the page draws and says the escape is malformed: "${err}"`);
    await page.close();
  }

  // 5d. Links over many windows draw within seconds (they took 16.5 s and 8.7 s when the axis
  // and sim's ruler turned once per window), with sim's table.
  for (const [hash, args] of [['#limit=3&window=0.001&until=200', ['--limit', '3', '--window', '0.001', '--until', '200']],
    ['#until=1000000', ['--until', '1000000']]]) {
    const t0 = Date.now();
    page = await open(hash);
    const took = Date.now() - t0;
    check(took < 8000, `${hash} draws in ${took} ms (< 8 s)`);
    const lines = await page.$$eval('#timeline line.boundary', (ls) => ls.length);
    check(lines > 0 && lines <= 101, `${hash}: at most 101 window boundaries drawn: ${lines}`);
    sameTable(await readTable(page), cliTable(args), hash);
    await page.close();
  }

  // 5e. Where the page and sim part: until not a number or before the picture (sim's message,
  // the page drawn at the start), a bad --block said once (sim's message), a row whose own
  // block= meets --block says the parser's "given twice", too many requests says why.
  const errorOf = (p) => p.$eval('#error', (e) => e.textContent);
  const rowsOf = async (p) => (await readTable(p)).rows;
  page = await open('#until=abc');
  let err = await errorOf(page);
  check(err === "ratelimit sim: --until 'abc': not a decimal number" && (await rowsOf(page)).length === 7
    && spawnSync(cli, ['sim', '--until', 'abc'], { encoding: 'utf8' }).stderr.includes(err.replace('ratelimit sim: ', '')), `#until=abc: sim's message, the page drawn: "${err}"`);
  await page.close();
  page = await open('#until=-5');
  err = await errorOf(page);
  check(/--until '-5': before the picture's first window \(t = 0\).*before the last request, t = 13\)/.test(err) && (await rowsOf(page)).length === 7
    && (await clock()) === 0, `#until=-5: refused, the clock at the start: "${err}"`);
  await page.close();
  page = await open('#block=xyz');
  const body = await page.evaluate(() => document.body.innerText);
  const blockMsg = spawnSync(cli, ['sim', '--block', 'xyz'], { encoding: 'utf8' }).stderr.replace(/^ratelimit sim: | \(see.*\n$/g, '');
  check(body.split("--block 'xyz'").length === 2 && (await errorOf(page)) === `ratelimit sim: ${blockMsg}`, `#block=xyz: sim's message once (${blockMsg}): ${body.split("--block 'xyz'").length - 1} times`);
  await page.close();
  page = await open('#block=4s&row1=fixed_window:4/10s,block=2s');
  const inline = await page.$eval('#row1-error', (e) => e.textContent);
  const cell = (await rowsOf(page))[0][1];
  check(/twice/.test(inline) && cell === inline && !(await rowsOf(page))[1][1].includes('twice'), `a row's own block= with --block: the cell says the inline "${inline}": "${cell}"`);
  await page.close();
  page = await open('#pattern=steady&rate=1000&duration=1000&until=1000');
  err = await errorOf(page);
  check(/more than 200000 requests; lower --rate or --duration \(the page draws every request.*ratelimit sim takes up to 5000000\)/.test(err), `too many requests for the page says why: "${err}"`);
  await page.close();

  // 6. Reduced motion: the clock moves whole ticks, never gliding between them.
  page = await open('#pattern=steady', { reducedMotion: true });
  await page.$eval('#speed', (e) => { e.value = '10'; e.dispatchEvent(new Event('change')); });
  await page.click('#play');
  const seen = new Set();
  for (let i = 0; i < 12; i++) { seen.add(await clock()); await sleep(60); }
  check([...seen].every(Number.isInteger) && seen.size > 1, `with reduced motion the clock steps by whole ticks: ${[...seen]}`);
  await page.close();

  // 6b. The first table within 500 ms (issue 37): the fastest of 5 loads of #until=20, each a
  // fresh tab with the cache off, from the navigation's start to the app's 'table-drawn' mark
  // (the module fetched and compiled, sim's engine run, the table and timeline drawn), as
  // bench/web/first-table.mjs measures it. The fastest, not the median: other work on the
  // machine only slows a load (at load 19 on two cores the median was 532 ms, the fastest 418),
  // and a page that got slower is slower every time. The median is bench/web's figure.
  const firsts = [];
  for (let i = 0; i < 5; i++) {
    page = await browser.newPage();
    await page.setCacheEnabled(false);
    await page.goto(`${origin}/index.html#until=20`);
    await page.waitForSelector('body[data-ready]', { timeout: 10000 });
    firsts.push(await page.evaluate(() => performance.getEntriesByName('table-drawn')[0].startTime));
    await page.close();
  }
  firsts.sort((a, b) => a - b);
  check(firsts[0] < 500, `the first table is drawn within 500 ms: fastest ${firsts[0].toFixed(0)} ms of ${firsts.map((x) => x.toFixed(0))}`);

  // 7. The pictures for docs/img: the default pattern at t = 20.
  if (shots) {
    page = await open('#until=20');
    await page.setViewport({ width: 1200, height: 1240 });
    await page.screenshot({ path: join(shots, 'playground.png'), fullPage: false });
    await page.close();
  }
  check(served.includes('ratelimit.wasm') && served.includes('app.js'), 'the page was served by this test\'s server');
} finally {
  await browser.close();
  server.close();
  await rm(profile, { recursive: true, force: true });
}
for (const p of problems) fail(p);
if (failures) process.exit(1);
console.log('web_page: every check passed');
