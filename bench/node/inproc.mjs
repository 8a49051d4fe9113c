// In-process decisions at 1M random keys: rate-limiter-flexible's RateLimiterMemory against
// ours (Limiter.hit, synchronous, and the drop-in RateLimiterRatelimit.consume, a Promise as
// RLF's), interleaved rounds in one process, medians; bytes a key from each one's own
// accounting after the keys are in (RLF: V8 heap growth after gc; ours: the store's bytes).
// Usage: node --expose-gc inproc.mjs NODE_MODULES PACKAGE [ROUNDS] [KEYS]
import { createRequire } from 'node:module';

const [modules, pkg, roundsArg, keysArg] = process.argv.slice(2);
const require = createRequire(modules + '/');
const { RateLimiterMemory } = require('rate-limiter-flexible');
const ours = require(pkg);
const ROUNDS = Number(roundsArg || 5), KEYS = Number(keysArg || 1000000), OPS = KEYS;

let seed = 42;
const rnd = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
const keys = Array.from({ length: KEYS }, () => 'user:' + rnd().toString(36));
const order = Int32Array.from({ length: OPS }, () => rnd() % KEYS);

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const heap = () => { global.gc(); global.gc(); return process.memoryUsage().heapUsed; };

const h0 = heap();
const rlf = new RateLimiterMemory({ points: 1000000, duration: 3600 });
for (const k of keys) await rlf.consume(k).catch(() => {});
const rlfBytes = (heap() - h0) / KEYS;

const store = new ours.MemoryStore();
const lim = new ours.Limiter('fixed_window:1000000/1h', { store });
for (const k of keys) lim.hit(k);
const ourBytes = store.stats().bytes / store.stats().keys;
const drop = new ours.RateLimiterRatelimit({ points: 1000000, duration: 3600, store: new ours.MemoryStore() });
for (const k of keys) await drop.consume(k).catch(() => {});

const runs = { rlf: [], hit: [], drop: [] };
for (let r = 0; r < ROUNDS; r++) {
  let t = process.hrtime.bigint();
  for (let i = 0; i < OPS; i++) await rlf.consume(keys[order[i]]).catch(() => {});
  runs.rlf.push(OPS / (Number(process.hrtime.bigint() - t) / 1e9));
  t = process.hrtime.bigint();
  for (let i = 0; i < OPS; i++) lim.hit(keys[order[i]]);
  runs.hit.push(OPS / (Number(process.hrtime.bigint() - t) / 1e9));
  t = process.hrtime.bigint();
  for (let i = 0; i < OPS; i++) await drop.consume(keys[order[i]]).catch(() => {});
  runs.drop.push(OPS / (Number(process.hrtime.bigint() - t) / 1e9));
}
const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
console.log(`keys ${KEYS}, ${ROUNDS} interleaved rounds of ${OPS} decisions, medians:`);
console.log(`  RLF RateLimiterMemory.consume   ${(m.rlf / 1e6).toFixed(2)} M/s   ${rlfBytes.toFixed(0)} bytes/key (V8 heap)`);
console.log(`  ours Limiter.hit                ${(m.hit / 1e6).toFixed(2)} M/s   ${ourBytes.toFixed(0)} bytes/key (store)   ratio ${(m.hit / m.rlf).toFixed(1)}x`);
console.log(`  ours RateLimiterRatelimit.consume ${(m.drop / 1e6).toFixed(2)} M/s   ratio ${(m.drop / m.rlf).toFixed(1)}x`);
