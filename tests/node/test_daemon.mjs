// The network stores, each against the real server on a free port: ratelimitd (RESP on a
// non-blocking socket) and Redis (libratelimit_redis on libuv's thread pool).  Decisions exact
// across the processes of a cluster; Promises that never block the event loop; failure modes
// logged once and counted, and a server that comes back used again.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import cluster from 'node:cluster';
import net from 'node:net';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const rl = require(process.env.RLT_NODE_PACKAGE);

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
});

const KINDS = ['ratelimitd', 'redis'];
const makeStore = (kind, port, timeoutMs) => (kind === 'redis'
  ? new rl.RedisStore({ servers: `127.0.0.1:${port}`, timeoutMs })
  : new rl.DaemonStore({ port, timeoutMs }));

async function startDaemon(port, kind = 'ratelimitd') {
  const proc = kind === 'redis'
    ? spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
      '--appendonly', 'no'], { stdio: 'ignore' })
    : spawn(process.env.RLT_DAEMON, ['--port', String(port), '--http-port', '-1',
      '--grpc-port', '-1', '--no-snapshot', '--threads', '2'], { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (ok) return proc;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  proc.kill();
  throw new Error('ratelimitd did not start');
}
const stop = (proc) => new Promise((resolve) => { proc.once('exit', resolve); proc.kill(); });

const procs = [];
after(() => { for (const p of procs) p.kill(); });

// A logger that keeps what it is told.
const recorder = () => { const lines = []; return { lines, error: (m) => lines.push(['error', m]), warn: (m) => lines.push(['warn', m]) }; };

if (cluster.isPrimary) for (const kind of KINDS) {
  test(`${kind} answers as the in-process store does (fields and headers)`, async () => {
    const port = await freePort();
    procs.push(await startDaemon(port, kind));
    const store = makeStore(kind, port, 2000);
    const lim = new rl.Limiter('sliding_log:5/1h', { store, name: 'api' });
    const seen = [];
    for (let i = 0; i < 7; i++) seen.push((await lim.hitAsync('u')).allowed);
    assert.deepEqual(seen, [true, true, true, true, true, false, false]);
    // Checks made in one loop turn (Redis: one pipeline, answered in one packed buffer): each
    // its own decision, exact ns as BigInts.
    const fw = new rl.Limiter('fixed_window:3/1000h', { store });
    const ds = await Promise.all(Array.from({ length: 5 }, () => fw.hitAsync('batch')));
    assert.deepEqual(ds.map((x) => [x.allowed, x.remaining, x.limit]).sort().reverse(),
      [[true, 2, 3], [true, 1, 3], [true, 0, 3], [false, 0, 3], [false, 0, 3]]);
    for (const x of ds) {
      assert.equal(x.error, null);
      assert.equal(typeof x.resetAfterNs, 'bigint');
      assert.ok(x.resetAfterNs > 0n && x.resetAfterNs <= 3600000000000000n);
      if (!x.allowed) assert.ok(x.retryAfterNs > 0n && x.retryAfterNs <= 3600000000000000n);
    }
    const d = await lim.peekAsync('u');
    assert.equal(d.remaining, 0);
    assert.equal(d.headers()['RateLimit-Policy'], '"api";q=5;w=3600');
    await lim.resetAsync('u');
    assert.equal((await lim.peekAsync('u')).remaining, 5);
    assert.throws(() => lim.hit('u'), TypeError);
    await assert.rejects(lim.hitAsync('u', 1, 5n), (e) => e instanceof TypeError && e.message.startsWith('nowNs:'));
    await assert.rejects(lim.hitAsync(''), RangeError);
    const multi = new rl.Limiter(['fixed_window:100/1h', 'sliding_log:2/1h'], { store });
    const m = [];
    for (let i = 0; i < 3; i++) { const x = await multi.hitAsync('v'); m.push([x.allowed, x.refused]); }
    assert.deepEqual(m, [[true, -1], [true, -1], [false, 1]]);
    const conc = new rl.Limiter('concurrency:1/30s', { store });
    const a = await conc.hitAsync('job');
    assert.equal(a.allowed, true);
    assert.equal((await conc.hitAsync('job')).allowed, false);
    assert.equal(await conc.releaseAsync('job', a.lease), true);
    assert.equal(await conc.releaseAsync('job', a.lease), false);
    const tb = new rl.Limiter('token_bucket:10/1h', { store });
    const r = await tb.reserveAsync('z', 6);
    assert.equal((await tb.settleAsync('z', r.reservation, 2)).remaining, 8);
    await assert.rejects(tb.settleAsync('z', r.reservation, 2), RangeError);
    // Many calls in flight at once (one pipeline per loop turn for Redis): still exact.
    const burst = new rl.Limiter('sliding_log:100/1h', { store });
    const all = await Promise.all(Array.from({ length: 500 }, (_, i) => burst.hitAsync(i % 2 ? 'b1' : 'b2')));
    assert.equal(all.filter((x) => x.allowed).length, 200);
    assert.ok(all.every((x) => x.error === null));
    // rate-limiter-flexible's interface over it: resolves, then rejects a RateLimiterRes.
    const rlf = new rl.RateLimiterRatelimit({ points: 2, duration: 3600, policy: 'sliding_log:2/1h', store });
    const rlfSeen = [];
    for (let i = 0; i < 3; i++) {
      await rlf.consume('r').then((r) => rlfSeen.push(['ok', r.remainingPoints]),
        (r) => rlfSeen.push([r instanceof Error ? 'error' : 'rejected', r.remainingPoints]));
    }
    assert.deepEqual(rlfSeen, [['ok', 1], ['ok', 0], ['rejected', 0]]);
    if (store.close) store.close();
  });

  test(`4 cluster workers through one ${kind} admit exactly the limit`, async () => {
    const port = await freePort();
    procs.push(await startDaemon(port, kind));
    cluster.setupPrimary({ exec: new URL(import.meta.url).pathname, args: [] });
    const counts = await Promise.all(Array.from({ length: 4 }, () => new Promise((resolve, reject) => {
      const w = cluster.fork({ RLT_TEST_PORT: String(port), RLT_TEST_KIND: kind });
      w.on('message', resolve);
      w.on('error', reject);
    })));
    assert.equal(counts.reduce((a, b) => a + b, 0), 300);
  });

  test(`${kind}: the event loop runs while a call waits, and the timeout ends it`, async () => {
    // A server that accepts and never answers.
    const held = [];
    const silent = net.createServer((sock) => held.push(sock)).listen(0, '127.0.0.1');
    await new Promise((resolve) => silent.once('listening', resolve));
    const lim = new rl.Limiter('gcra:10/1s', { store: makeStore(kind, silent.address().port, 300),
      logger: recorder() });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const d = await lim.hitAsync('k');
    clearInterval(timer);
    silent.close();
    for (const sock of held) sock.destroy();
    assert.ok(ticks >= 2, `the loop ran ${ticks} times while waiting`);
    assert.equal(d.allowed, false);
    assert.equal(d.error.code, 'EBACKEND');
    // rate-limiter-flexible's interface rejects with an Error when the store cannot answer.
    const rlf = new rl.RateLimiterRatelimit({ points: 2, duration: 1, store: lim.store, logger: recorder() });
    await assert.rejects(rlf.consume('k'), (e) => e instanceof Error && e.code === 'EBACKEND');
  });

  test(`${kind}: fail closed, open and fallback: each logged once, counted, and the server used again when back`, async () => {
    const port = await freePort();
    let daemon = await startDaemon(port, kind);
    const logs = { closed: recorder(), open: recorder(), fallback: recorder() };
    const lims = Object.fromEntries(Object.keys(logs).map((mode) => [mode, new rl.Limiter('sliding_log:3/1h', {
      store: makeStore(kind, port, 500), failMode: mode, fallbackProbeMs: 0, logger: logs[mode] })]));
    for (const [mode, lim] of Object.entries(lims)) assert.equal((await lim.hitAsync(mode)).allowed, true);
    await stop(daemon);
    const got = {};
    for (const [mode, lim] of Object.entries(lims)) {
      got[mode] = [];
      for (let i = 0; i < 5; i++) { const d = await lim.hitAsync(mode); got[mode].push(d.allowed); assert.ok(d.error); }
    }
    assert.deepEqual(got.closed, [false, false, false, false, false]);
    assert.deepEqual(got.open, [true, true, true, true, true]);
    assert.deepEqual(got.fallback, [true, true, true, false, false]); // a fresh in-process store
    for (const mode of Object.keys(logs)) {
      assert.equal(logs[mode].lines.length, 1, `${mode}: ${JSON.stringify(logs[mode].lines)}`);
      assert.match(logs[mode].lines[0][1], new RegExp(`${kind} store cannot answer`));
      const h = lims[mode].health();
      assert.equal(h.up, false);
      assert.equal(h.outages, 1);
      assert.equal(mode === 'fallback' ? h.fallbackDecisions : h.failedDecisions, 5);
    }
    daemon = await startDaemon(port, kind);
    procs.push(daemon);
    for (const [mode, lim] of Object.entries(lims)) {
      // Redis's client waits out its circuit breaker (100 ms, doubling) before a trial call.
      let d;
      for (let i = 0; i < 200; i++) {
        d = await lim.hitAsync(mode);
        if (!d.error) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(d.error, null, mode);
      assert.equal(d.remaining, 2, `${mode}: the restarted daemon decides (a fresh key)`);
      assert.equal(lim.health().recoveries, 1);
      assert.equal(logs[mode].lines.at(-1)[0], 'warn');
    }
  });
} else {
  // A cluster worker: 200 hits on one key through the daemon, the count of allowed back.
  const store = makeStore(process.env.RLT_TEST_KIND, Number(process.env.RLT_TEST_PORT), 5000);
  const lim = new rl.Limiter('sliding_log:300/1h', { store });
  let allowed = 0;
  for (let i = 0; i < 200; i++) if ((await lim.hitAsync('shared')).allowed) allowed++;
  process.send(allowed);
  if (store.close) store.close();
  process.disconnect();
}
