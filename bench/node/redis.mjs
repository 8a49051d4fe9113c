// Through one redis-server: rate-limiter-flexible's RateLimiterRedis (ioredis) against our
// RedisStore (libratelimit_redis on libuv's pool), the same fixed window, random keys, the same
// number of calls in flight; interleaved rounds, medians; and each one's p50 latency one call
// at a time.  Usage: node redis.mjs NODE_MODULES PACKAGE PORT [ROUNDS] [CALLS] [INFLIGHT]
import { createRequire } from 'node:module';

const [modules, pkg, port, roundsArg, callsArg, inflightArg] = process.argv.slice(2);
const require = createRequire(modules + '/');
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const ours = require(pkg);
const ROUNDS = Number(roundsArg || 5), CALLS = Number(callsArg || 20000), INFLIGHT = Number(inflightArg || 16);

let seed = 7;
const key = () => 'user:' + ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) % 100000);
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

const redis = new Redis({ port: Number(port), enableOfflineQueue: true });
const rlf = new RateLimiterRedis({ storeClient: redis, points: 1000000000, duration: 3600 });
const lim = new ours.Limiter('fixed_window:1000000000/1h', { store: new ours.RedisStore({ servers: `127.0.0.1:${port}`, timeoutMs: 1000 }) });
const theirs = (k) => rlf.consume(k).catch((e) => { if (e instanceof Error) throw e; });
const mine = async (k) => { const d = await lim.hitAsync(k); if (d.error) throw d.error; };

async function rate(f) {
  let left = CALLS;
  const t = process.hrtime.bigint();
  await Promise.all(Array.from({ length: INFLIGHT }, async () => { while (left-- > 0) await f(key()); }));
  return CALLS / (Number(process.hrtime.bigint() - t) / 1e9);
}
async function p50(f, n = 2000) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await f(key());
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return median(lat);
}

await rate(theirs); await rate(mine); // warm: scripts loaded, connections open
const runs = { theirs: [], mine: [] };
for (let r = 0; r < ROUNDS; r++) { runs.theirs.push(await rate(theirs)); runs.mine.push(await rate(mine)); }
const lt = await p50(theirs), lm = await p50(mine);
const mt = median(runs.theirs), mm = median(runs.mine);
console.log(`${ROUNDS} interleaved rounds of ${CALLS} calls, ${INFLIGHT} in flight, 100k random keys, medians:`);
console.log(`  RLF RateLimiterRedis + ioredis   ${(mt / 1000).toFixed(1)} k/s   p50 ${lt.toFixed(3)} ms (one at a time)`);
console.log(`  ours RedisStore.hitAsync         ${(mm / 1000).toFixed(1)} k/s   p50 ${lm.toFixed(3)} ms   ratio ${(mm / mt).toFixed(2)}x`);
redis.disconnect();
