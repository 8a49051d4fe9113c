// Exactness: the same random traces through the Node package and through `ratelimit replay`
// give identical lines, field by field, in integer nanoseconds (every algorithm, costs, clocks
// that step back, block=, jitter=, calendar months), and reservations settle as replay's do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Limiter, MemoryStore } = require(process.env.RLT_NODE_PACKAGE);
const cli = process.env.RLT_CLI;

const POLICIES = [
  'fixed_window:5/1s', 'sliding_log:5/1s', 'sliding_window:5/1s', 'token_bucket:5/1s,burst=8',
  'gcra:5/1s,burst=3', 'leaky_bucket:5/1s,queue=4,delay=2', 'concurrency:3/2s',
  'gcra:3/1s,block=2s*2..10s', 'sliding_window:4/1s,jitter=50%',
  'token_bucket:4/1s,jitter=100%,block=500ms', 'fixed_window:7/1mo,tz=Europe/Paris',
  'fixed_window:3/250ms',
];
const MONTH_START = 1706745600n * 10n ** 9n; // 2024-02-01 UTC: the calendar trace crosses it

// A seeded generator (mulberry32): a failure names its seed, and the seed replays it.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function trace(policy, seed, n = 400) {
  const r = rng(seed), month = policy.includes('mo');
  let t = month ? MONTH_START - 3n * 86400n * 10n ** 9n : 10n ** 9n;
  const step = month ? 86400 * 1e9 / 40 : 1e8;
  const lines = [];
  for (let i = 0; i < n; i++) {
    const d = BigInt(Math.floor(r() * step));
    t += r() > 0.1 ? d : -3n * d;
    if (t < 0n) t = 0n;
    let cost = [0, 1, 1, 1, 2, 3][Math.floor(r() * 6)];
    if (policy.startsWith('concurrency')) cost = Math.min(cost, 1);
    lines.push([t, 'abc'[Math.floor(r() * 3)], cost]);
  }
  return lines;
}

function replay(policy, lines) {
  const out = execFileSync(cli, ['replay', '--policy', policy, '--unit', 'ns'],
    { input: lines.map((l) => l.join(' ') + '\n').join('') }).toString();
  return out.trim().split('\n').map((l) => l.split(/\s+/));
}

for (const policy of POLICIES) {
  test(`hit matches ratelimit replay: ${policy}`, () => {
    for (const seed of [1, 2, 3]) {
      const lines = trace(policy, seed);
      const want = replay(policy, lines);
      assert.equal(want.length, lines.length);
      const lim = new Limiter(policy, { store: new MemoryStore() });
      lines.forEach(([t, key, cost], i) => {
        const d = lim.hit(key, cost, t);
        const got = [String(t), key, String(cost), d.allowed ? 'allow' : 'deny', String(d.remaining),
          String(d.retryAfterNs), String(d.resetAfterNs), String(d.delayNs)];
        assert.deepEqual(got, want[i], `seed ${seed}, line ${i}`);
        assert.equal(d.retryAfterMs, Number(d.retryAfterNs) / 1e6);
      });
    }
  });
}

for (const policy of ['token_bucket:100/1s', 'gcra:50/1s,burst=100', 'fixed_window:100/1s',
  'sliding_log:100/1s', 'sliding_window:100/1s']) {
  test(`reserve and settle match ratelimit replay: ${policy}`, () => {
    const r = rng(7);
    let t = 0n;
    const lines = [], open = [];
    for (let i = 0; i < 300; i++) {
      t += BigInt(Math.floor(r() * 5e7));
      if (open.length && r() < 0.4) {
        const name = open.splice(Math.floor(r() * open.length), 1)[0];
        lines.push(`${t} ${name[0]} ${Math.floor(r() * 120)} settle:${name}`);
      } else {
        const key = 'xy'[Math.floor(r() * 2)], name = key + i;
        open.push(name);
        lines.push(`${t} ${key} ${Math.floor(r() * 60)} reserve:${name}`);
      }
    }
    const out = execFileSync(cli, ['replay', '--policy', policy, '--unit', 'ns'],
      { input: lines.join('\n') + '\n' }).toString().trim().split('\n');
    assert.equal(out.length, lines.length);
    const lim = new Limiter(policy, { store: new MemoryStore() });
    const ids = new Map();
    lines.forEach((line, i) => {
      const [ts, key, cost, op] = line.split(' ');
      const [verb, name] = op.split(':');
      let d, verdict;
      if (verb === 'reserve') {
        d = lim.reserve(key, Number(cost), BigInt(ts));
        ids.set(name, d.reservation);
        verdict = d.allowed ? 'allow' : 'deny';
      } else {
        try {
          d = lim.settle(key, ids.get(name) || 1n, Number(cost), BigInt(ts));
          verdict = 'settle';
        } catch (e) {
          assert.ok(e instanceof RangeError);
          d = lim.peek(key, BigInt(ts));
          verdict = 'unknown';
        }
      }
      const got = [ts, key, cost, verdict, String(d.remaining), String(d.retryAfterNs),
        String(d.resetAfterNs), String(d.delayNs)];
      assert.deepEqual(got, out[i].split(/\s+/), line);
    });
  });
}
