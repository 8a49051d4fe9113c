'use strict';
// Limiter and Decision over the addon: policy notations, the output area read into plain
// objects, headers as rlt_format_headers writes them.
const native = require('./native');

const f64 = new Float64Array(native.out);
const i64 = new BigInt64Array(native.out);
const u64 = new BigUint64Array(native.out);

const HDR_RETRY_AFTER = 1, HDR_IETF = 2, HDR_LEGACY = 4, HDR_X = 8;

// Policy text from ours ("gcra:10/1s"), express-rate-limit's ({windowMs, limit}) or
// rate-limiter-flexible's ({points, duration} in seconds): a fixed window for both.
function policyText(p, arg = 'policy') {
  if (typeof p === 'string') return p;
  if (Array.isArray(p)) return p.map((x) => policyText(x, arg));
  if (p === null || typeof p !== 'object') {
    throw new TypeError(`${arg}: must be policy text, an array of them, {windowMs, limit} or {points, duration}`);
  }
  const algo = p.algorithm || 'fixed_window';
  if (p.windowMs !== undefined || p.limit !== undefined) {
    const w = p.windowMs === undefined ? 60000 : p.windowMs, n = p.limit === undefined ? 5 : p.limit;
    intArg(w, 'windowMs', 1); intArg(n, 'limit', 1);
    return `${algo}:${n}/${w}ms`;
  }
  if (p.points !== undefined || p.duration !== undefined) {
    const n = p.points === undefined ? 4 : p.points, d = p.duration === undefined ? 1 : p.duration;
    intArg(n, 'points', 1); intArg(d, 'duration', 1);
    return `${algo}:${n}/${d}s`;
  }
  throw new TypeError(`${arg}: an object needs windowMs/limit or points/duration`);
}

function intArg(v, name, lo = 0) {
  if (typeof v !== 'number') throw new TypeError(`${name}: must be a number`);
  if (!Number.isSafeInteger(v) || v < lo) throw new RangeError(`${name}: must be an integer >= ${lo}`);
  return v;
}

function nsOf(slot) {
  const d = f64[7 + slot];
  return d === d ? d : i64[10 + slot];
}

// A decision: allowed, limit, remaining, retryAfterMs, resetAfterMs, delayMs (numbers, ms),
// retryAfterNs, resetAfterNs, delayNs (BigInt, exact), lease, reservation, refused, policy.
class Decision {
  constructor(lim, withResv = false) {
    this.allowed = f64[0] === 1;
    this.limit = f64[1];
    this.remaining = f64[2];
    this.lease = f64[3] === 0 ? 0n : i64[14];
    this.refused = f64[4];
    this.policy = f64[5];
    this.error = null;
    this._ra = nsOf(0);
    this._rs = nsOf(1);
    this._dl = nsOf(2);
    this.reservation = withResv ? u64[13] : 0n;
    this._lim = lim;
  }
  // A decision from fields (a network store's answer, a fail-mode decision).
  static of(lim, f, error = null) {
    const d = Object.create(Decision.prototype);
    Object.assign(d, { allowed: f.allowed, limit: f.limit, remaining: f.remaining, lease: f.lease ?? 0n,
      refused: f.refused ?? -1, policy: f.policy ?? 0, error, _ra: f.retryAfterNs, _rs: f.resetAfterNs,
      _dl: f.delayNs ?? 0n, reservation: f.reservation ?? 0n, _lim: lim });
    return d;
  }
  get retryAfterNs() { return BigInt(this._ra); }
  get resetAfterNs() { return BigInt(this._rs); }
  get delayNs() { return BigInt(this._dl); }
  get retryAfterMs() { return Number(this._ra) / 1e6; }
  get resetAfterMs() { return Number(this._rs) / 1e6; }
  get delayMs() { return Number(this._dl) / 1e6; }
  // {'RateLimit-Policy': ..., 'RateLimit': ..., 'Retry-After' when denied}, as the daemon and
  // the Python middleware write them.
  headers(which = HDR_IETF | HDR_RETRY_AFTER) {
    const text = this._lim._n.formatHeaders(this.policy, this.allowed, this.limit,
      Math.max(0, this.remaining), this.retryAfterNs, this.resetAfterNs, which);
    const out = {};
    for (const line of text.split('\r\n')) {
      const i = line.indexOf(': ');
      if (i > 0) out[line.slice(0, i)] = line.slice(i + 2);
    }
    return out;
  }
}

class MemoryStore extends native.MemoryStore {}

// new RedisStore({servers = '127.0.0.1:6379', cluster, password, prefix, timeoutMs = 50,
// sentinels, masterName, engine}): decisions inside Redis (libratelimit_redis), each call on
// libuv's thread pool, a Promise.
class RedisStore extends native.RedisStore {
  constructor(options = {}) {
    super(options);
    this.isRemoteStore = true;
    this.kind = 'redis';
  }
}

function keyOf(k) {
  return k;
}

// Limiter(policy, {store, name}): policy text (or an array: all-or-nothing), or
// {windowMs, limit}, or {points, duration}.  The in-process store answers synchronously
// (hit, peek, ...) and as Promises (hitAsync, ...).
class Limiter {
  constructor(policy, options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('options: must be an object');
    let store = options.store;
    if (store === undefined || store === null) {
      store = new MemoryStore({ maxKeys: options.maxKeys, maxBytes: options.maxBytes });
    } else if (typeof store === 'string') {
      store = storeFromUrl(store);
    }
    this.store = store;
    const texts = policyText(policy);
    // A network store: the policies are still parsed (and the headers written) here, over a
    // private in-process store that decides nothing unless failMode is 'fallback'.
    this._n = new native.Limiter(texts, store.isRemoteStore && store.kind !== 'redis' ? new MemoryStore() : store,
      options.name);
    this.policies = this._n.policies();
    if (store.isRemoteStore) {
      const { Health } = require('./daemon');
      const mode = options.failMode ?? (options.failOpen ? 'open' : 'closed');
      if (!['closed', 'open', 'fallback'].includes(mode)) throw new RangeError("failMode: must be 'closed', 'open' or 'fallback'");
      const probe = options.fallbackProbeMs ?? 1000;
      if (!Number.isInteger(probe) || probe < 0) throw new RangeError('fallbackProbeMs: must be an integer >= 0');
      const logger = options.logger ?? console;
      if (typeof logger.error !== 'function' || typeof logger.warn !== 'function') throw new TypeError('logger: needs error() and warn()');
      this._health = new Health(mode, logger, probe, store.kind);
      // The limit a fail-mode decision reports: the policies' own, computed once here.
      this._failLimit = new Limiter(texts).peek('limit', 0n).limit;
      if (mode === 'fallback') {
        this._fallback = new Limiter(options.fallback ?? texts, { name: options.name });
      }
    }
  }
  // The outage counters of a network store: up, mode, downSince, outages, recoveries,
  // failedDecisions, fallbackDecisions.
  health() { return this._health ? this._health.snapshot() : { up: true, mode: 'in-process' }; }
  hit(key, cost = 1, nowNs) {
    if (this._health) throw new TypeError('hit: a network store answers with Promises: use hitAsync');
    if (cost === 1 && nowNs === undefined) this._n.hit(key); // the native fast path
    else this._n.hit(key, cost, nowNs);
    return new Decision(this);
  }
  // hitMany(keys, cost = 1, nowNs) -> Uint8Array of allowed flags, one batch at one instant.
  hitMany(keys, cost = 1, nowNs) { return this._n.hitMany(keys, cost, nowNs); }
  peek(key, nowNs) { this._n.peek(key, nowNs); return new Decision(this); }
  reset(key) { this._n.reset(key); }
  // multi([[key, cost] | [limiter, key, cost], ...], nowNs): all-or-nothing.
  multi(checks, nowNs) {
    if (!Array.isArray(checks)) throw new TypeError('checks: must be an array');
    const flat = checks.map((c) => {
      if (!Array.isArray(c)) throw new TypeError('checks: each check is [key, cost] or [limiter, key, cost]');
      if (c[0] instanceof Limiter) return [c[0]._n, c[1], c[2]];
      return [this._n, c[0], c[1]];
    });
    this._n.multi(flat, nowNs);
    return new Decision(this);
  }
  // acquire(key) -> a lease {release()} or throws RateLimitExceeded (concurrency policies).
  acquire(key, nowNs) {
    const d = this.hit(key, 1, nowNs);
    if (!d.allowed) throw new RateLimitExceeded(d);
    let done = false;
    return { decision: d, lease: d.lease, release: (now) => { if (done) return false; done = true; return this._n.release(key, d.lease, now); } };
  }
  release(key, lease, nowNs) { return this._n.release(key, lease, nowNs); }
  reserve(key, estimate, nowNs, timeoutNs) { this._n.reserve(key, estimate, nowNs, timeoutNs); return new Decision(this, true); }
  // settle(key, reservation, realCost, nowNs) -> the decision after it (a peek); throws a
  // RangeError for an unknown, settled or expired reservation.
  settle(key, reservation, realCost, nowNs) {
    if (!this._n.settle(key, reservation, realCost, nowNs)) {
      throw new RangeError('reservation: unknown, already settled or expired');
    }
    return new Decision(this);
  }
  hitAsync(key, cost = 1, nowNs) {
    if (!this._health) return call(() => this.hit(key, cost, nowNs));
    return call(() => this._remoteDecide(key, cost, nowNs));
  }
  peekAsync(key, nowNs) {
    if (!this._health) return call(() => this.peek(key, nowNs));
    return call(() => this._remoteDecide(key, 0, nowNs));
  }
  resetAsync(key) {
    if (!this._health) return call(() => this.reset(key));
    return call(async () => {
      const { remote, keyArg } = require('./daemon');
      keyArg(key);
      if (this.store.kind === 'redis') await remote(this, 'RL.RESET', [key]);
      else for (const p of this.policies) await remote(this, 'RL.RESET', [key, p]);
      if (this._fallback) this._fallback.reset(key);
    });
  }
  multiAsync(checks, nowNs) {
    if (!this._health) return call(() => this.multi(checks, nowNs));
    return Promise.reject(new TypeError('multiAsync: several limiters over a network store: give one limiter several policies'));
  }
  _noNow(nowNs) {
    if (nowNs !== undefined && nowNs !== null) throw new TypeError('nowNs: a ratelimitd reads its own clock');
  }
  async _remoteDecide(key, cost, nowNs) {
    const { remote, keyArg, costArg } = require('./daemon');
    this._noNow(nowNs);
    keyArg(key);
    const c = costArg(cost, 'cost');
    let op, args;
    if (this.policies.length > 1) {
      op = 'RL.MULTI';
      args = this.policies.flatMap((p) => [key, p, c]);
    } else if (cost === 0) {
      op = 'RL.PEEK'; args = [key, this.policies[0]];
    } else {
      op = this.policies[0].startsWith('concurrency') ? 'RL.ACQUIRE' : 'RL.CHECK';
      args = op === 'RL.ACQUIRE' ? [key, this.policies[0]] : [key, this.policies[0], c];
    }
    const h = this._health;
    let failure = null;
    const f = await remote(this, op, args, () => {
      failure = new Error(`${this.store.kind} store unavailable`);
      failure.code = 'EBACKEND';
      if (h.mode === 'fallback') { h.fallbackDecisions++; return null; }
      h.failedDecisions++;
      const open = h.mode === 'open';
      return { allowed: open, limit: this._failLimit, remaining: 0, retryAfterNs: open ? 0n : 1000000000n,
        resetAfterNs: 0n };
    });
    if (f === null) {
      const d = this._fallback.hit(key, Number(c));
      d.error = failure;
      d.fallback = true; // a real decision, in-process: a denial is a 429, not an outage
      return d;
    }
    return Decision.of(this, f, failure);
  }
  releaseAsync(key, lease) {
    if (!this._health) return call(() => this.release(key, lease));
    return call(() => require('./daemon').remote(this, 'RL.RELEASE', [key, this.policies[0], String(lease)]));
  }
  reserveAsync(key, estimate, nowNs, timeoutNs) {
    if (!this._health) return call(() => this.reserve(key, estimate, nowNs, timeoutNs));
    return call(async () => {
      const { remote, keyArg, costArg } = require('./daemon');
      this._noNow(nowNs); keyArg(key);
      const args = [key, this.policies[0], costArg(estimate, 'estimate')];
      if (timeoutNs !== undefined) args.push('TIMEOUT', String((BigInt(timeoutNs) + 999999n) / 1000000n));
      return Decision.of(this, await remote(this, 'RL.RESERVE', args));
    });
  }
  settleAsync(key, reservation, realCost, nowNs) {
    if (!this._health) return call(() => this.settle(key, reservation, realCost, nowNs));
    return call(async () => {
      const { remote, keyArg, costArg } = require('./daemon');
      this._noNow(nowNs); keyArg(key);
      if (typeof reservation !== 'bigint') throw new TypeError('reservation: must be a BigInt');
      try {
        return Decision.of(this, await remote(this, 'RL.SETTLE',
          [key, this.policies[0], reservation.toString(16).padStart(16, '0'), costArg(realCost, 'realCost')]));
      } catch (e) {
        if (e.code === 'ENOENT') throw new RangeError('reservation: unknown, already settled or expired');
        throw e;
      }
    });
  }
}

function call(f) {
  try { return Promise.resolve(f()); } catch (e) { return Promise.reject(e); }
}


class RateLimitExceeded extends Error {
  constructor(d) {
    super('rate limit exceeded');
    this.name = 'RateLimitExceeded';
    this.decision = d;
  }
}

function storeFromUrl(url) {
  if (typeof url !== 'string') throw new TypeError('store: must be a store or a URL string');
  let u;
  try { u = new URL(url); } catch { throw new RangeError(`store: "${url}" is not a URL`); }
  if (u.protocol === 'memory:') {
    const q = u.searchParams, o = {};
    if (q.has('maxKeys')) o.maxKeys = Number(q.get('maxKeys'));
    if (q.has('maxBytes')) o.maxBytes = Number(q.get('maxBytes'));
    const name = (u.host || u.pathname.replace(/^\/+/, '')) || undefined;
    if (name) o.name = name;
    return new MemoryStore(o);
  }
  if (u.protocol === 'ratelimitd:') {
    const { DaemonStore } = require('./daemon');
    const o = { host: u.hostname || '127.0.0.1', port: u.port ? Number(u.port) : 6380 };
    if (u.password) o.password = decodeURIComponent(u.password);
    const t = u.searchParams.get('timeout');
    if (t !== null) o.timeoutMs = /ms$/.test(t) ? Number(t.slice(0, -2)) : Math.round(Number(t.replace(/s$/, '')) * 1000);
    return new DaemonStore(o);
  }
  if (u.protocol === 'redis:' || u.protocol === 'redis+cluster:' || u.protocol === 'redis+sentinel:') {
    const o = { password: u.password ? decodeURIComponent(u.password) : undefined };
    const hosts = url.replace(/^[^/]*\/\/(?:[^@/]*@)?/, '').split(/[/?]/)[0] || '127.0.0.1:6379';
    if (u.protocol === 'redis+sentinel:') {
      o.sentinels = hosts;
      o.masterName = u.pathname.replace(/^\/+/, '');
    } else {
      o.servers = hosts;
      o.cluster = u.protocol === 'redis+cluster:';
    }
    const q = u.searchParams;
    if (q.has('prefix')) o.prefix = q.get('prefix');
    if (q.has('engine')) o.engine = q.get('engine');
    if (q.has('timeout')) { const t = q.get('timeout'); o.timeoutMs = /ms$/.test(t) ? Number(t.slice(0, -2)) : Math.round(Number(t.replace(/s$/, '')) * 1000); }
    return new RedisStore(o);
  }
  throw new RangeError(`store: "${u.protocol}" stores are not supported (memory://, redis://, redis+cluster://, redis+sentinel://, ratelimitd://)`);
}

module.exports = { Limiter, Decision, MemoryStore, RedisStore, RateLimitExceeded, storeFromUrl, policyText,
  HDR_RETRY_AFTER, HDR_IETF, HDR_LEGACY, HDR_X, keyOf };
