// The fastify plugin on a real fastify: every route limited, the IETF fields on each answer,
// 429 past the limit, skip and keyGenerator honoured, bad options refused at register.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.RLT_NODE_MODULES + '/');
const Fastify = require('fastify');
const ours = require(process.env.RLT_NODE_PACKAGE);

// Our fixed windows are whole windows of Unix time: a test that counts to a limit starts away
// from a window's end (never across one), waiting out the last 3 s of it.
async function awayFromWindowEnd(windowMs) {
  const left = windowMs - (Date.now() % windowMs);
  if (left < 3000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

test('the plugin limits every route and writes the IETF fields', async () => {
  const app = Fastify();
  await app.register(ours.fastifyRateLimit, { windowMs: 60000, limit: 3, name: 'api' });
  app.get('/a', async () => 'a');
  await awayFromWindowEnd(60000);
  app.register(async (child) => { child.get('/b', async () => 'b'); });
  const codes = [];
  let last;
  for (const url of ['/a', '/b', '/a', '/b', '/a']) {
    last = await app.inject({ url });
    codes.push(last.statusCode);
  }
  assert.deepEqual(codes, [200, 200, 200, 429, 429]);
  assert.equal(last.headers['ratelimit-policy'], '"api";q=3;w=60');
  assert.match(last.headers.ratelimit, /^"api";r=0;t=\d+$/);
  assert.ok(Number(last.headers['retry-after']) >= 1);
  assert.equal(last.body, 'Too many requests, please try again later.');
  await app.close();
});

test('skip and keyGenerator as in express-rate-limit', async () => {
  const app = Fastify();
  await app.register(ours.fastifyRateLimit, {
    limit: 1, keyGenerator: (req) => req.headers['x-user'], skip: (req) => req.url === '/health',
  });
  app.get('/', async () => 'ok');
  app.get('/health', async () => 'up');
  await awayFromWindowEnd(60000);
  const code = async (url, user) => (await app.inject({ url, headers: { 'x-user': user } })).statusCode;
  assert.deepEqual([await code('/', 'a'), await code('/', 'a'), await code('/', 'b'),
    await code('/health', 'a'), await code('/health', 'a')], [200, 429, 200, 200, 200]);
  await app.close();
});

test('bad options fail the register with an error naming the option', async () => {
  const app = Fastify();
  app.register(ours.fastifyRateLimit, { limit: 0 });
  await assert.rejects(app.ready(), (e) => e instanceof RangeError && e.message.startsWith('limit:'));
});
