// The Limiter's operations and its bad input: a TypeError or RangeError naming the argument,
// never a crash; multi all-or-nothing, leases, reservations, headers, policy notations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const rl = require(process.env.RLT_NODE_PACKAGE);
const { Limiter, MemoryStore } = rl;

function throwsNaming(f, type, arg) {
  assert.throws(f, (e) => e instanceof type && e.message.startsWith(arg + ':'),
    `expected a ${type.name} naming ${arg}`);
}

test('bad input is a TypeError or RangeError naming the argument', () => {
  const lim = new Limiter('gcra:10/1s');
  throwsNaming(() => lim.hit(42), TypeError, 'key');
  throwsNaming(() => lim.hit(undefined), TypeError, 'key');
  throwsNaming(() => lim.hit({}), TypeError, 'key');
  throwsNaming(() => lim.hit(''), RangeError, 'key');
  throwsNaming(() => lim.hit('k'.repeat(513)), RangeError, 'key');
  throwsNaming(() => lim.hit('é'.repeat(257)), RangeError, 'key'); // 514 bytes of UTF-8
  throwsNaming(() => lim.hit(Buffer.alloc(513)), RangeError, 'key');
  throwsNaming(() => lim.hit(new Uint16Array(2)), TypeError, 'key');
  throwsNaming(() => lim.hit('k', -1), RangeError, 'cost');
  throwsNaming(() => lim.hit('k', 1.5), RangeError, 'cost');
  throwsNaming(() => lim.hit('k', NaN), RangeError, 'cost');
  throwsNaming(() => lim.hit('k', 2 ** 60), RangeError, 'cost');
  throwsNaming(() => lim.hit('k', '1'), TypeError, 'cost');
  throwsNaming(() => lim.hit('k', 1, 'now'), TypeError, 'nowNs');
  throwsNaming(() => lim.hit('k', 1, 2n ** 64n), RangeError, 'nowNs');
  throwsNaming(() => new Limiter('gcra:10/1x'), RangeError, 'policy');
  throwsNaming(() => new Limiter('nope:1/1s'), RangeError, 'policy');
  throwsNaming(() => new Limiter(''), RangeError, 'policy');
  throwsNaming(() => new Limiter(42), TypeError, 'policy');
  throwsNaming(() => new Limiter([]), RangeError, 'policy');
  throwsNaming(() => new Limiter({ windowMs: -1, limit: 5 }), RangeError, 'windowMs');
  throwsNaming(() => new Limiter({ points: 1.5, duration: 1 }), RangeError, 'points');
  throwsNaming(() => new Limiter('gcra:1/1s', { name: 'bad name' }), RangeError, 'name');
  throwsNaming(() => new Limiter('gcra:1/1s', { store: {} }), TypeError, 'store');
  throwsNaming(() => new Limiter('gcra:1/1s', { store: 'ftp://x' }), RangeError, 'store');
  throwsNaming(() => new MemoryStore({ maxKeys: -1 }), RangeError, 'maxKeys');
  throwsNaming(() => new MemoryStore({ failClosed: 'yes' }), TypeError, 'failClosed');
  throwsNaming(() => lim.settle('k', 5, 1), TypeError, 'reservation');
  throwsNaming(() => lim.multi([[lim, 5, 1]]), TypeError, 'key');
  assert.throws(() => Object.getPrototypeOf(lim._n).hit.call({}, 'k'), TypeError); // V8's own check
  // After all that, the limiter still answers.
  assert.equal(lim.hit('k', 1, 0n).allowed, true);
});

test('the notations of express-rate-limit and rate-limiter-flexible are fixed windows', () => {
  assert.deepEqual(new Limiter({ windowMs: 60000, limit: 100 }).policies, ['fixed_window:100/1m']);
  assert.deepEqual(new Limiter({ points: 5, duration: 2 }).policies, ['fixed_window:5/2s']);
  assert.deepEqual(new Limiter('gcra:100/1m,burst=20').policies, ['gcra:100/1m,burst=20']);
});

test('a key is the same whether a string or its UTF-8 bytes', () => {
  const lim = new Limiter('fixed_window:2/1s');
  assert.equal(lim.hit('ключ', 1, 0n).remaining, 1);
  assert.equal(lim.hit(Buffer.from('ключ'), 1, 0n).remaining, 0);
  assert.equal(lim.hit(new TextEncoder().encode('ключ'), 1, 0n).allowed, false);
});

test('several policies are all-or-nothing and name the refusing one', () => {
  const lim = new Limiter(['fixed_window:2/1s', 'fixed_window:3/1m'], { name: 'api' });
  const seen = [];
  for (let i = 0; i < 5; i++) {
    const d = lim.hit('u', 1, BigInt(i) * 600_000_000n);
    seen.push([d.allowed, d.refused]);
  }
  // 0 s, 0.6 s allowed; 1.2 s (new second) allowed: the minute's 3 are spent, 1.8 s and 2.4 s
  // refused by the minute (index 1), and nothing charged to the second.
  assert.deepEqual(seen, [[true, -1], [true, -1], [true, -1], [false, 1], [false, 1]]);
  const other = new Limiter('fixed_window:1/1h', { store: lim.store });
  const d = lim.multi([['v', 1], [other, 'v', 1]], 0n);
  assert.equal(d.allowed, true);
  const e = lim.multi([['v', 1], [other, 'v', 1]], 0n);
  assert.equal(e.allowed, false);
  assert.equal(e.refused, 2); // the other limiter's one policy, after this one's two
  assert.equal(lim.peek('v', 0n).remaining, 1, 'the refused multi charged nothing');
});

test('a concurrency lease is acquired, refused when none is free, released once', () => {
  const lim = new Limiter('concurrency:1/30s');
  const a = lim.acquire('job', 0n);
  assert.equal(typeof a.lease, 'bigint');
  assert.throws(() => lim.acquire('job', 1n), (e) => e.name === 'RateLimitExceeded' && !e.decision.allowed);
  assert.equal(a.release(2n), true);
  assert.equal(a.release(2n), false);
  assert.equal(lim.acquire('job', 3n).decision.allowed, true);
  // An unreleased lease expires after its timeout.
  assert.equal(lim.hit('job', 1, 31n * 10n ** 9n).allowed, true);
});

test('reserve then settle refunds what the reservation holds and charges debt past it', () => {
  const lim = new Limiter('token_bucket:10/1s');
  const r = lim.reserve('z', 6, 0n);
  assert.equal(r.allowed, true);
  assert.equal(r.remaining, 4);
  assert.equal(lim.settle('z', r.reservation, 2, 0n).remaining, 8);
  assert.throws(() => lim.settle('z', r.reservation, 2, 0n), RangeError);
  const s = lim.reserve('z', 1, 0n);
  assert.equal(lim.settle('z', s.reservation, 20, 0n).remaining, 0);
  assert.equal(lim.hit('z', 1, 0n).allowed, false);
});

test('headers are the IETF fields as the C library writes them', () => {
  const lim = new Limiter('fixed_window:3/1m', { name: 'api' });
  assert.deepEqual(lim.hit('h', 1, 0n).headers(),
    { 'RateLimit-Policy': '"api";q=3;w=60', RateLimit: '"api";r=2;t=60' });
  lim.hit('h', 2, 0n);
  assert.deepEqual(lim.hit('h', 1, 30n * 10n ** 9n).headers(),
    { 'Retry-After': '30', 'RateLimit-Policy': '"api";q=3;w=60', RateLimit: '"api";r=0;t=30' });
});

test('waits beyond 2^53 ns stay exact as BigInt', () => {
  const lim = new Limiter('fixed_window:1/365d');
  lim.hit('y', 1, 0n);
  const d = lim.hit('y', 1, 1n);
  assert.equal(d.retryAfterNs, 365n * 86400n * 10n ** 9n - 1n);
});

test('without nowNs the store reads its clock: Unix time, windows on the wall clock', () => {
  const store = new MemoryStore();
  const now = store.nowNs();
  const wall = BigInt(Date.now()) * 1000000n;
  assert.ok(now > wall - 10n ** 9n && now < wall + 10n ** 9n, `${now} vs ${wall}`);
  const lim = new Limiter('fixed_window:1/1h', { store });
  const d = lim.hit('w');
  const end = (now / 3600000000000n + 1n) * 3600000000000n;
  assert.ok(d.resetAfterNs <= end - now && d.resetAfterNs > end - now - 10n ** 9n);
});

test('a bounded store holds at most maxKeys', () => {
  const store = new MemoryStore({ maxKeys: 1000 });
  const lim = new Limiter('gcra:10/1m', { store });
  for (let i = 0; i < 5000; i++) lim.hit('k' + i, 1, 0n);
  assert.ok(store.stats().keys <= 1000, `${store.stats().keys} keys`);
  assert.ok(store.stats().evictions >= 4000);
});

test('hitAsync resolves with the decision and rejects bad input', async () => {
  const lim = new Limiter('gcra:1/1s');
  assert.equal((await lim.hitAsync('a', 1, 0n)).allowed, true);
  assert.equal((await lim.hitAsync('a', 1, 0n)).allowed, false);
  await assert.rejects(lim.hitAsync(''), RangeError);
});

test('hitMany decides each key as hit would, in order', () => {
  const a = new Limiter('gcra:3/1s'), b = new Limiter('gcra:3/1s');
  const keys = Array.from({ length: 1000 }, (_, i) => 'k' + (i % 7));
  const flags = a.hitMany(keys, 1, 5n);
  assert.deepEqual(Array.from(flags), keys.map((k) => (b.hit(k, 1, 5n).allowed ? 1 : 0)));
  assert.equal(flags.reduce((x, y) => x + y, 0), 21);
  assert.throws(() => a._n.hitMany(['ok', 7]), (e) => e instanceof TypeError && e.message.startsWith('keys:'));
  assert.throws(() => a._n.hitMany('k'), TypeError);
});

test('any argument of any type into any method: a result or a TypeError/RangeError, never a crash', () => {
  const values = [undefined, null, true, 0, -1, 1.5, NaN, Infinity, 2 ** 63, -(2 ** 63), 0n, -1n,
    2n ** 64n, 'k', '', 'x'.repeat(600), Symbol('s'), {}, [], [[]], [['k', 1]], () => 1,
    Buffer.alloc(0), Buffer.from('k'), new Uint16Array(3), new ArrayBuffer(4), new Date(0)];
  const lim = new Limiter('token_bucket:10/1s');
  const conc = new Limiter('concurrency:2/1s');
  const methods = ['hit', 'peek', 'reset', 'multi', 'release', 'reserve', 'settle', 'hitMany', 'formatHeaders'];
  let seed = 99;
  const pick = () => values[(seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % values.length];
  let answered = 0, refused = 0;
  for (let i = 0; i < 20000; i++) {
    const target = i % 2 ? lim._n : conc._n;
    const m = methods[i % methods.length];
    const args = Array.from({ length: i % 8 }, pick);
    try {
      target[m](...args);
      answered++;
    } catch (e) {
      assert.ok(e instanceof TypeError || e instanceof RangeError, `${m}(${args.map(String)}): ${e}`);
      refused++;
    }
  }
  assert.ok(answered > 0 && refused > 0, `${answered} answered, ${refused} refused`);
  assert.equal(lim.hit('after', 1, 0n).allowed, true);
});

test('hit(key) alone (the native fast path) decides as hit(key, 1) and hit(key, 1, now)', () => {
  // Three limiters on three stores, the same random trace: one argument, an explicit cost,
  // and an explicit now (the checked paths); a window of 1000 h is not crossed in the test.
  const make = () => new Limiter('fixed_window:3/1000h', { store: new MemoryStore() });
  const [a, b, c] = [make(), make(), make()];
  let seed = 11;
  const rnd = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
  let denied = 0;
  for (let i = 0; i < 3000; i++) {
    const k = 'u' + (rnd() % 500);
    const now = c.store.nowNs();
    const da = a.hit(k), db = b.hit(k, 1), dc = c.hit(k, 1, now);
    assert.deepEqual([da.allowed, da.remaining, da.limit], [db.allowed, db.remaining, db.limit]);
    assert.deepEqual([da.allowed, da.remaining, da.limit], [dc.allowed, dc.remaining, dc.limit]);
    if (!da.allowed) denied++;
  }
  assert.ok(denied > 0, 'the trace reaches the limit');
  assert.equal(a.store.stats().keys, 500);
  // Bad input through the one-argument call still names the argument.
  throwsNaming(() => a._n.hit(7), TypeError, 'key');
  throwsNaming(() => a._n.hit(''), RangeError, 'key');
  throwsNaming(() => a._n.hit('k'.repeat(600)), RangeError, 'key');
  assert.throws(() => Object.getPrototypeOf(a._n).hit.call(new MemoryStore(), 'k'), TypeError);
});
