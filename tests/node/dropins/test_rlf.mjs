// rate-limiter-flexible's documented examples, run with its RateLimiterMemory and with our
// RateLimiterRatelimit (only the constructor line changed): the same resolutions and
// rejections, RateLimiterRes fields of the same meaning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.RLT_NODE_MODULES + '/');
const rlf = require('rate-limiter-flexible');
const ours = require(process.env.RLT_NODE_PACKAGE);

// Our windows are aligned on the store's clock (whole seconds of Unix time), RLF's start at a
// key's first consume: start each comparison just after a second begins, so neither window
// ends during it.
async function atSecondStart() {
  const ms = Date.now() % 1000;
  if (ms > 50) await new Promise((resolve) => setTimeout(resolve, 1005 - ms));
}

// The same for windows of a minute: away from a window's last 3 s.
async function awayFromWindowEnd(windowMs) {
  const left = windowMs - (Date.now() % windowMs);
  if (left < 3000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

// The README's "Basic example" (express-free): consume 2 points per call, 6 per second;
// returns what the example's two callbacks saw.
async function readmeExample(makeLimiter) {
  const opts = {
    points: 6, // 6 points
    duration: 1, // Per second
  };
  const rateLimiter = makeLimiter(opts);
  const seen = [];
  for (let i = 0; i < 4; i++) {
    await rateLimiter.consume('127.0.0.1', 2) // consume 2 points
      .then((rateLimiterRes) => {
        // 2 points consumed
        seen.push(['ok', rateLimiterRes.remainingPoints, rateLimiterRes.consumedPoints,
          rateLimiterRes.isFirstInDuration, rateLimiterRes.msBeforeNext > 0 && rateLimiterRes.msBeforeNext <= 1000]);
      })
      .catch((rejRes) => {
        if (rejRes instanceof Error) {
          seen.push(['error', rejRes.message]);
        } else {
          // Not enough points to consume
          const secs = Math.round(rejRes.msBeforeNext / 1000) || 1;
          seen.push(['rejected', rejRes.remainingPoints, secs, rejRes instanceof rlf.RateLimiterRes]);
        }
      });
  }
  return seen;
}

test("the README's basic example: RateLimiterMemory and ours see the same", async () => {
  await atSecondStart();
  const theirs = await readmeExample((opts) => new rlf.RateLimiterMemory(opts));
  await atSecondStart();
  const mine = await readmeExample((opts) => new ours.RateLimiterRatelimit(opts));
  assert.deepEqual(mine, theirs);
  assert.deepEqual(theirs.map((s) => s[0]), ['ok', 'ok', 'ok', 'rejected']);
});

test('get, delete, block and penalty answer as RateLimiterMemory does', async () => {
  const run = async (lim) => {
    const out = [];
    out.push(await lim.get('u'));
    await lim.consume('u', 3);
    const g = await lim.get('u');
    out.push([g.consumedPoints, g.remainingPoints]);
    out.push(await lim.delete('u'));
    out.push(await lim.get('u'));
    await lim.block('v', 10);
    out.push(await lim.consume('v').then(() => 'ok', (r) => [r.remainingPoints, r.msBeforeNext > 9000]));
    await lim.penalty('w', 10);
    out.push(await lim.consume('w').then(() => 'ok', (r) => r.remainingPoints));
    return out;
  };
  await awayFromWindowEnd(60000);
  const theirs = await run(new rlf.RateLimiterMemory({ points: 5, duration: 60 }));
  const mine = await run(new ours.RateLimiterRatelimit({ points: 5, duration: 60 }));
  assert.deepEqual(mine, theirs);
});

test("RateLimiterUnion takes ours as one of its limiters (RateLimiterCompatibleAbstract)", async () => {
  const a = new ours.RateLimiterRatelimit({ keyPrefix: 'a', points: 2, duration: 60 });
  const b = new rlf.RateLimiterMemory({ keyPrefix: 'b', points: 3, duration: 60 });
  assert.ok(a instanceof rlf.RateLimiterCompatibleAbstract);
  const union = new rlf.RateLimiterUnion(a, b);
  await awayFromWindowEnd(60000);
  await union.consume('k');
  await union.consume('k');
  await assert.rejects(union.consume('k'), (rej) => rej.a instanceof rlf.RateLimiterRes && rej.a.remainingPoints === 0);
});

test('bad input rejects with a TypeError or RangeError naming it', async () => {
  const lim = new ours.RateLimiterRatelimit({ points: 2, duration: 1 });
  await assert.rejects(lim.consume('k', -1), (e) => e instanceof RangeError && e.message.startsWith('points:'));
  await assert.rejects(lim.consume('x'.repeat(600)), (e) => e instanceof RangeError && e.message.startsWith('key:'));
  assert.throws(() => new ours.RateLimiterRatelimit({ points: 'many' }), TypeError);
});
