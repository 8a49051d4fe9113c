// Time to the first drawn table in headless chromium: the page opened RUNS times, each in a
// fresh tab with the cache off, from the navigation's start to the app's 'table-drawn' mark
// (the wasm fetched and compiled, the seven rows simulated, the table and timeline drawn).
// Usage: node first-table.mjs NODE_MODULES SITE_DIR [RUNS]  ->  "first-table MEDIAN_MS MAX_MS"
import { createServer } from 'node:http';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, extname } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, site, runs = '15'] = process.argv.slice(2);
const { default: puppeteer } = await import(pathToFileURL(join(modules, 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js')).href);
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };
const server = createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname.replace(/^\/+/, '') || 'index.html';
  try {
    const body = await readFile(join(site, path));
    res.writeHead(200, { 'content-type': TYPES[extname(path)] || 'application/octet-stream' });
    res.end(body);
  } catch { res.writeHead(404); res.end(); }
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const profile = await mkdtemp(join(tmpdir(), 'rlt-chromium-'));
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, userDataDir: profile,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'] });
const times = [];
for (let i = 0; i < Number(runs); i++) {
  const page = await browser.newPage();
  await page.setCacheEnabled(false);
  await page.goto(`http://127.0.0.1:${server.address().port}/index.html#until=20`);
  await page.waitForSelector('body[data-ready]');
  times.push(await page.evaluate(() => performance.getEntriesByName('table-drawn')[0].startTime));
  await page.close();
}
await browser.close();
server.close();
await rm(profile, { recursive: true, force: true });
times.sort((a, b) => a - b);
console.log(`first-table ${times[times.length >> 1].toFixed(0)} ${times[times.length - 1].toFixed(0)}`);
