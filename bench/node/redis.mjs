// Through one redis-server: rate-limiter-flexible's RateLimiterRedis (ioredis) against our
// RedisStore (libratelimit_redis on libuv's pool), the same fixed window, random keys, the same
// number of calls in flight; interleaved rounds, medians; and each one's p50 latency one call
// at a time.  Ours twice when the server has our module loaded (MODULE=1): engine 'scripts'
// (Lua, as RLF) and engine 'module' (RL.DECIDE in C).  Each row also gives the CPU a decision
// of redis-server (INFO cpu over the round) and of the node process (process.cpuUsage, its
// threads included): on a loaded machine the steadier figure; the rates swing round to round.
// Usage: MODULE=0|1 node redis.mjs NODE_MODULES PACKAGE PORT [ROUNDS] [CALLS] [INFLIGHT]
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
const admin = new Redis({ port: Number(port) });
const ourStore = (engine) => new ours.RedisStore({ servers: `127.0.0.1:${port}`, timeoutMs: 1000, engine });
const policy = 'fixed_window:1000000000/1h';
const lim = new ours.Limiter(policy, { store: ourStore('scripts') });
const theirs = (k) => rlf.consume(k).catch((e) => { if (e instanceof Error) throw e; });
const ourCall = (l) => async (k) => { const d = await l.hitAsync(k); if (d.error) throw d.error; };
const sides = { theirs, mine: ourCall(lim) };
if (process.env.MODULE === '1') sides.module = ourCall(new ours.Limiter(policy, { store: ourStore('module') }));

async function rate(f) {
  let left = CALLS;
  const t = process.hrtime.bigint();
  await Promise.all(Array.from({ length: INFLIGHT }, async () => { while (left-- > 0) await f(key()); }));
  return CALLS / (Number(process.hrtime.bigint() - t) / 1e9);
}
const cpuOf = async () => {
  const t = await admin.info('cpu');
  return Number(t.match(/used_cpu_user:([\d.]+)/)[1]) + Number(t.match(/used_cpu_sys:([\d.]+)/)[1]);
};
async function p50(f, n = 2000) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await f(key());
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return median(lat);
}

for (const f of Object.values(sides)) await rate(f); // warm: scripts loaded, connections open
const runs = {}, cpu = {}, ncpu = {};
for (const n of Object.keys(sides)) { runs[n] = []; cpu[n] = []; ncpu[n] = []; }
for (let r = 0; r < ROUNDS; r++) {
  for (const [n, f] of Object.entries(sides)) {
    const c0 = await cpuOf(), u0 = process.cpuUsage();
    runs[n].push(await rate(f));
    const u = process.cpuUsage(u0);
    cpu[n].push(((await cpuOf()) - c0) / CALLS * 1e6);
    ncpu[n].push((u.user + u.system) / CALLS);
  }
}
const lat = {};
for (const [n, f] of Object.entries(sides)) lat[n] = await p50(f);
const m = (n) => median(runs[n]), us = (n) => `CPU a decision: redis-server ${median(cpu[n]).toFixed(1)} us, node ${median(ncpu[n]).toFixed(1)} us`;
console.log(`${ROUNDS} interleaved rounds of ${CALLS} calls, ${INFLIGHT} in flight, 100k random keys, medians:`);
console.log(`  RLF RateLimiterRedis + ioredis     ${(m('theirs') / 1000).toFixed(1)} k/s   p50 ${lat.theirs.toFixed(3)} ms (one at a time)   ${us('theirs')}`);
console.log(`  ours RedisStore.hitAsync, scripts  ${(m('mine') / 1000).toFixed(1)} k/s   p50 ${lat.mine.toFixed(3)} ms   ratio ${(m('mine') / m('theirs')).toFixed(2)}x   ${us('mine')}`);
if (sides.module) {
  console.log(`  ours RedisStore.hitAsync, module   ${(m('module') / 1000).toFixed(1)} k/s   p50 ${lat.module.toFixed(3)} ms   ratio ${(m('module') / m('theirs')).toFixed(2)}x   ${us('module')}`);
}
redis.disconnect();
admin.disconnect();
