// express-rate-limit's documented example, run twice on a real express: with our rateLimit
// (only the import line changed), and with express-rate-limit's own rateLimit given our
// Store (only the store: line added).  Same limits, same headers' meaning, a 429 after them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.RLT_NODE_MODULES + '/');
const express = require('express');
const erl = require('express-rate-limit');
const ours = require(process.env.RLT_NODE_PACKAGE);

// Our fixed windows are whole windows of Unix time: a test that counts to a limit starts away
// from a window's end (never across one), waiting out the last 3 s of it.
async function awayFromWindowEnd(windowMs) {
  const left = windowMs - (Date.now() % windowMs);
  if (left < 3000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

async function serve(app, f) {
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  try {
    return await f(`http://127.0.0.1:${server.address().port}`);
  } finally {
    server.close();
  }
}

async function statuses(url, n) {
  const out = [];
  let last;
  for (let i = 0; i < n; i++) {
    last = await fetch(url);
    out.push(last.status);
    await last.text();
  }
  return { out, last };
}

test("express-rate-limit's README example with our rateLimit", async () => {
  // --- the README's code, the import line changed ---
  const { rateLimit } = ours; // was: import { rateLimit } from 'express-rate-limit'
  const limiter = rateLimit({
    windowMs: 15 * 60 * 1000, // 15 minutes
    limit: 100, // Limit each IP to 100 requests per `window` (here, per 15 minutes).
    standardHeaders: 'draft-8', // draft-6: `RateLimit-*` headers; draft-7 & draft-8: combined `RateLimit` header
    legacyHeaders: false, // Disable the `X-RateLimit-*` headers.
    ipv6Subnet: 56, // Set to 60 or 64 to be less aggressive, or 52 or 48 to be more aggressive
    // store: ... , // Redis, Memcached, etc. See below.
  });
  const app = express();
  app.use(limiter);
  // ---
  app.get('/', (req, res) => res.send(`hello ${req.rateLimit.remaining}`));
  await awayFromWindowEnd(15 * 60 * 1000);
  await serve(app, async (url) => {
    const { out, last } = await statuses(url, 102);
    assert.deepEqual(out, [...Array(100).fill(200), 429, 429]);
    assert.equal(last.headers.get('ratelimit-policy'), '"default";q=100;w=900');
    assert.match(last.headers.get('ratelimit'), /^"default";r=0;t=\d+$/);
    assert.ok(Number(last.headers.get('retry-after')) > 0);
    assert.equal(await (await fetch(url)).text(), 'Too many requests, please try again later.');
  });
});

test("express-rate-limit's own middleware with our Store", async () => {
  const app = express();
  app.use(erl.rateLimit({
    windowMs: 15 * 60 * 1000, limit: 5, standardHeaders: 'draft-8', legacyHeaders: false,
    store: new ours.RatelimitStore(), // the one line added
  }));
  app.get('/', (req, res) => res.send('ok'));
  await awayFromWindowEnd(15 * 60 * 1000);
  await serve(app, async (url) => {
    const { out, last } = await statuses(url, 7);
    assert.deepEqual(out, [200, 200, 200, 200, 200, 429, 429]);
    assert.match(last.headers.get('ratelimit'), /^"5-in-15min"; r=0; t=\d+$/);
  });
});

test('skipSuccessfulRequests gives the hit back through decrement', async () => {
  const app = express();
  app.use(erl.rateLimit({ windowMs: 60000, limit: 2, skipSuccessfulRequests: true,
    store: new ours.RatelimitStore() }));
  app.get('/ok', (req, res) => res.send('ok'));
  app.get('/fail', (req, res) => res.status(500).send('no'));
  await awayFromWindowEnd(60000);
  await serve(app, async (url) => {
    for (let i = 0; i < 5; i++) {
      const r = await fetch(url + '/ok');
      assert.equal(r.status, 200);
      await r.text();
      await new Promise((resolve) => setTimeout(resolve, 5)); // the finish event decrements
    }
    const { out } = await statuses(url + '/fail', 3);
    assert.deepEqual(out, [500, 500, 429]);
  });
});

test('handler, skip and keyGenerator are called as express-rate-limit calls them', async () => {
  const app = express();
  let handled = 0;
  app.use(ours.rateLimit({
    windowMs: 60000, limit: 1,
    keyGenerator: (req) => req.get('x-user') ?? 'anon',
    skip: (req) => req.get('x-admin') === 'yes',
    handler: (req, res, next, options) => { handled++; res.status(options.statusCode).json({ user: req.rateLimit.key }); },
  }));
  app.get('/', (req, res) => res.send('ok'));
  await awayFromWindowEnd(60000);
  await serve(app, async (url) => {
    const get = async (h) => { const r = await fetch(url, { headers: h }); return [r.status, await r.text()]; };
    assert.deepEqual(await get({ 'x-user': 'a' }), [200, 'ok']);
    assert.deepEqual(await get({ 'x-user': 'a' }), [429, '{"user":"a"}']);
    assert.deepEqual(await get({ 'x-user': 'b' }), [200, 'ok']);
    assert.deepEqual(await get({ 'x-user': 'a', 'x-admin': 'yes' }), [200, 'ok']);
    assert.equal(handled, 1);
  });
});

test('ipv6Subnet keys are the ones express-rate-limit makes', () => {
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) & 0xffff;
  for (let i = 0; i < 500; i++) {
    const words = Array.from({ length: 8 }, () => (rnd() % 4 === 0 ? 0 : rnd()).toString(16));
    const ip = words.join(':');
    for (const subnet of [32, 48, 52, 56, 60, 64]) {
      assert.equal(ours.ipKeyGenerator(ip, subnet), erl.ipKeyGenerator(ip, subnet), `${ip}/${subnet}`);
    }
  }
  assert.equal(ours.ipKeyGenerator('192.0.2.7'), erl.ipKeyGenerator('192.0.2.7'));
});

test('a store that cannot answer: 503 with Retry-After (fail closed), or through with passOnStoreError', async () => {
  const quiet = { error() {}, warn() {} };
  const down = () => new ours.DaemonStore({ port: 1, timeoutMs: 200 }); // nothing listens on port 1
  const app = express();
  app.get('/closed', ours.rateLimit({ limit: 5, store: down(), logger: quiet }), (req, res) => res.send('ok'));
  app.get('/pass', ours.rateLimit({ limit: 5, store: down(), passOnStoreError: true, logger: quiet }), (req, res) => res.send('ok'));
  app.get('/fallback', ours.rateLimit({ limit: 1, store: down(), failMode: 'fallback', logger: quiet }), (req, res) => res.send('ok'));
  await awayFromWindowEnd(60000);
  await serve(app, async (url) => {
    const closed = await fetch(url + '/closed');
    assert.equal(closed.status, 503);
    assert.equal(closed.headers.get('retry-after'), '1');
    assert.equal(closed.headers.get('ratelimit'), null, 'no quota fields when nobody is over a limit');
    assert.equal((await fetch(url + '/pass')).status, 200);
    const { out } = await statuses(url + '/fallback', 2);
    assert.deepEqual(out, [200, 429], 'the in-process fallback limits');
  });
});
