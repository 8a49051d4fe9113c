'use strict';
// DaemonStore: a ratelimitd over RESP (its RL.* commands, docs/server.md), on a non-blocking
// socket driven by the event loop; every call a Promise bounded by the timeout.  Every
// worker and every process pointed at one daemon shares its counters exactly.  When the
// daemon cannot answer, the limiter's failMode decides: 'closed' (deny, the default), 'open'
// (allow) or 'fallback' (an in-process store); each switch logged once and counted.
const { RespClient, RespError } = require('./resp');

const NS_PER_MS = 1000000n;

class DaemonStore {
  // new DaemonStore({host = '127.0.0.1', port = 6380, password, timeoutMs = 50})
  constructor(opts = {}) {
    if (opts === null || typeof opts !== 'object') throw new TypeError('options: must be an object');
    const { host = '127.0.0.1', port = 6380, password, timeoutMs = 50 } = opts;
    if (typeof host !== 'string') throw new TypeError('host: must be a string');
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError('port: must be an integer in 1..65535');
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new RangeError('timeoutMs: must be an integer >= 1');
    if (password !== undefined && typeof password !== 'string') throw new TypeError('password: must be a string');
    this.isRemoteStore = true;
    this.kind = 'ratelimitd';
    this.client = new RespClient({ host, port, password, timeoutMs });
  }
  close() { this.client.close(); }
}

const ms = (v) => (v < 0n ? -1n : v * NS_PER_MS);

// The fields of a decision from an RL.* array reply.
function fields(op, r) {
  if (r instanceof RespError) {
    const e = new Error(`ratelimitd: ${r.message}`);
    e.code = /unknown reservation/.test(r.message) ? 'ENOENT' : 'EBACKEND';
    throw e;
  }
  if (!Array.isArray(r) || r.length < 5) throw Object.assign(new Error('ratelimitd: unexpected reply'), { code: 'EBACKEND' });
  const n = (i) => (typeof r[i] === 'bigint' ? r[i] : 0n);
  const allowed = n(0) !== 0n;
  const f = { allowed, limit: Number(n(1)), remaining: Number(n(2)),
    retryAfterNs: allowed ? 0n : ms(n(3)), resetAfterNs: 0n, delayNs: 0n, lease: 0n,
    reservation: 0n, refused: -1, policy: 0 };
  if (op === 'RL.ACQUIRE') f.lease = n(4);
  else f.resetAfterNs = ms(n(4));
  if (op === 'RL.CHECK' || op === 'RL.MULTI') f.delayNs = ms(n(5));
  if (op === 'RL.MULTI') f.refused = allowed ? -1 : Number(n(6));
  if (op === 'RL.RESERVE' && typeof r[5] === 'string') f.reservation = BigInt('0x' + r[5]);
  return f;
}

function keyArg(key) {
  if (typeof key !== 'string' && !(key instanceof Uint8Array)) throw new TypeError('key: must be a string, a Buffer or a Uint8Array');
  const len = typeof key === 'string' ? Buffer.byteLength(key) : key.length;
  if (len === 0) throw new RangeError('key: must not be empty');
  if (len > 512) throw new RangeError('key: is over 512 bytes');
  return key;
}

function costArg(v, name) {
  if (typeof v !== 'number' && typeof v !== 'bigint') throw new TypeError(`${name}: must be an integer (a number or a BigInt)`);
  if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new RangeError(`${name}: must be an integer`);
  if (v < 0) throw new RangeError(`${name}: must be an integer in 0..9007199254740992`);
  return String(v);
}

// The outage state of one limiter: mode, counters, the probe clock.
class Health {
  constructor(mode, logger, probeMs, what) {
    this.mode = mode; this.logger = logger; this.probeMs = probeMs; this.what = what;
    this.up = true; this.downSince = null; this.outages = 0; this.recoveries = 0;
    this.failedDecisions = 0; this.fallbackDecisions = 0; this.nextProbe = 0;
  }
  // Whether this call should try the store (always while up; one per probe interval while down).
  shouldTry() {
    if (this.up) return true;
    const now = Date.now();
    if (now < this.nextProbe) return false;
    this.nextProbe = now + this.probeMs;
    return true;
  }
  lost(err) {
    this.nextProbe = Date.now() + this.probeMs;
    if (!this.up) return;
    this.up = false; this.downSince = new Date(); this.outages++;
    const how = this.mode === 'open' ? 'allowing every request (fail open)'
      : this.mode === 'fallback' ? 'deciding in-process (fallback)' : 'denying every request (fail closed)';
    this.logger.error(`libratelimit: ${this.what} store cannot answer (${err.message}): ${how}`);
  }
  back() {
    if (this.up) return;
    this.up = true; this.downSince = null; this.recoveries++;
    this.logger.warn(`libratelimit: ${this.what} store is back`);
  }
  snapshot() {
    return { up: this.up, mode: this.mode, downSince: this.downSince, outages: this.outages,
      recoveries: this.recoveries, failedDecisions: this.failedDecisions,
      fallbackDecisions: this.fallbackDecisions };
  }
}

// Runs one RL.* command for limiter `lim` (its policies' canonical texts in lim.policies).
// op: RL.CHECK, RL.PEEK, RL.MULTI, RL.RESET, RL.ACQUIRE, RL.RELEASE, RL.RESERVE, RL.SETTLE.
async function remote(lim, op, args, fallback) {
  const h = lim._health;
  if (h.shouldTry()) {
    try {
      if (lim.store.kind === 'redis') {
        const f = await redisOp(lim, op, args);
        h.back();
        return f;
      }
      const r = await lim.store.client.call([op, ...args]);
      if (op === 'RL.RESET' || op === 'RL.RELEASE') {
        if (r instanceof RespError) throw Object.assign(new Error(`ratelimitd: ${r.message}`), { code: 'EBACKEND' });
        h.back();
        return r === 1n;
      }
      const f = fields(op, r);
      h.back();
      return f;
    } catch (e) {
      if (e.code === 'ENOENT') { h.back(); throw e; }
      h.lost(e);
      if (!fallback) throw e;
    }
  } else if (!fallback) {
    throw Object.assign(new Error('ratelimitd: store down (waiting for the next probe)'), { code: 'EBACKEND' });
  }
  return fallback();
}

// One item of redisBatch's ArrayBuffer (redis.c's complete): a check's fields, exact ns kept
// as numbers where they are exact (Decision's getters make the BigInt when asked).
const BATCH_WORDS = 10;
function batchItem(f, x, w) {
  const ns = (j) => (f[w + 4 + j] === f[w + 4 + j] ? f[w + 4 + j] : x[w + 7 + j]);
  return { allowed: f[w] === 1, limit: f[w + 1], remaining: f[w + 2], status: f[w + 3],
    retryAfterNs: ns(0), resetAfterNs: ns(1), delayNs: ns(2), lease: 0n, reservation: 0n, refused: -1, policy: 0 };
}

// Checks of one limiter and cost made in one turn of the event loop go to Redis as one
// pipeline (rlt_redis_decide_batch): many calls in flight cost a round trip per batch, not
// per call, and the pool's threads are not each held by one call.
function batched(lim, key, cost) {
  if (cost !== 1) return lim._n.redisCall('check', key, cost);
  if (!lim._batch) {
    const fresh = { keys: [], waiters: [] };
    lim._batch = fresh;
    setImmediate(() => {
      const { keys, waiters } = fresh;
      if (lim._batch === fresh) lim._batch = null;
      lim._n.redisBatch(keys, 1).then((buf) => {
        const f = new Float64Array(buf), x = new BigInt64Array(buf);
        for (let i = 0, w = 0; i < waiters.length; i++, w += BATCH_WORDS) waiters[i].resolve(batchItem(f, x, w));
      },
        (e) => { for (const w of waiters) w.reject(e); });
    });
  }
  const b = lim._batch;
  return new Promise((resolve, reject) => {
    b.keys.push(key);
    b.waiters.push({ resolve, reject });
    if (b.keys.length === 4096) lim._batch = null; // full: the next call starts another
  });
}

// The same operations on a RedisStore: libratelimit_redis on libuv's thread pool.
const RLT_ENOENT = -6, RLT_EBACKEND = -12, RLT_ETIMEDOUT = -13;
async function redisOp(lim, op, args) {
  let f;
  switch (op) {
    case 'RL.CHECK': f = await batched(lim, args[0], Number(args[2])); break;
    case 'RL.MULTI': f = await lim._n.redisCall('check', args[0], Number(args[2])); break;
    case 'RL.ACQUIRE': f = await lim._n.redisCall('check', args[0], 1); break;
    case 'RL.PEEK': f = await lim._n.redisCall('check', args[0], 0); break;
    case 'RL.RESET': f = await lim._n.redisCall('reset', args[0]); break;
    case 'RL.RELEASE': f = await lim._n.redisCall('release', args[0], BigInt(args[2])); break;
    case 'RL.RESERVE': f = await lim._n.redisCall('reserve', args[0], Number(args[2]),
      args[3] === 'TIMEOUT' ? BigInt(args[4]) * NS_PER_MS : undefined); break;
    case 'RL.SETTLE': f = await lim._n.redisCall('settle', args[0], BigInt('0x' + args[2]), Number(args[3])); break;
    default: throw new RangeError(`op: ${op}`);
  }
  if (f.status === RLT_ENOENT) {
    if (op === 'RL.RELEASE') return false;
    throw Object.assign(new Error('redis: unknown reservation'), { code: 'ENOENT' });
  }
  if (f.status === RLT_EBACKEND || f.status === RLT_ETIMEDOUT) {
    throw Object.assign(new Error(`redis: ${f.status === RLT_ETIMEDOUT ? 'timed out' : 'unavailable'}`),
      { code: f.status === RLT_ETIMEDOUT ? 'ETIMEDOUT' : 'EBACKEND' });
  }
  if (f.status !== 0) throw new RangeError(`${op}: status ${f.status}`);
  if (op === 'RL.RESET') return true;
  if (op === 'RL.RELEASE') return true;
  return f;
}

module.exports = { DaemonStore, Health, remote, keyArg, costArg };
