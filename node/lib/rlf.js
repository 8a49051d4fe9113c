'use strict';
// rate-limiter-flexible's interface over the exact core: RateLimiterRatelimit implements its
// RateLimiterCompatibleAbstract (consume, penalty, reward, get, set, block, delete) and
// answers with its RateLimiterRes; a refusal rejects with a RateLimiterRes, a store error
// with an Error, as rate-limiter-flexible does.
const { Limiter, MemoryStore } = require('./limiter');

class RateLimiterRes {
  constructor(remainingPoints = 0, msBeforeNext = 0, consumedPoints = 0, isFirstInDuration = false) {
    this.remainingPoints = remainingPoints;
    this.msBeforeNext = msBeforeNext;
    this.consumedPoints = consumedPoints;
    this.isFirstInDuration = Boolean(isFirstInDuration);
  }
  _getDecoratedProperties() {
    return { remainingPoints: this.remainingPoints, msBeforeNext: this.msBeforeNext,
      consumedPoints: this.consumedPoints, isFirstInDuration: this.isFirstInDuration };
  }
  [Symbol.for('nodejs.util.inspect.custom')]() { return this._getDecoratedProperties(); }
  toString() { return JSON.stringify(this._getDecoratedProperties()); }
  toJSON() { return this._getDecoratedProperties(); }
}

// rate-limiter-flexible's own RateLimiterRes when it is installed (so `instanceof` holds).
let Res = RateLimiterRes;
try { Res = require('rate-limiter-flexible').RateLimiterRes || Res; } catch { /* ours */ }

const ceilMs = (ns) => (ns <= 0 ? 0 : Math.ceil(Number(ns) / 1e6)); // ns: a number or a BigInt

function nonNegInt(v, name) {
  if (typeof v !== 'number') throw new TypeError(`${name}: must be a number`);
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${name}: must be an integer >= 0`);
  return v;
}

// new RateLimiterRatelimit({points = 4, duration = 1, blockDuration = 0, keyPrefix = 'rlflx',
//   policy, store}): `points` per `duration` seconds as a fixed window on the store's clock
// (or any policy text of ours with `policy`); blockDuration seconds as the core's penalty box.
class RateLimiterRatelimit {
  constructor(opts = {}) {
    if (opts === null || typeof opts !== 'object') throw new TypeError('opts: must be an object');
    this.points = nonNegInt(opts.points ?? 4, 'points');
    this.duration = nonNegInt(opts.duration ?? 1, 'duration');
    if (this.points < 1) throw new RangeError('points: must be an integer >= 1');
    this._blockDuration = nonNegInt(opts.blockDuration ?? 0, 'blockDuration');
    this._keyPrefix = opts.keyPrefix ?? 'rlflx';
    if (typeof this._keyPrefix !== 'string') throw new TypeError('keyPrefix: must be a string');
    this._execEvenly = false;
    let policy = opts.policy;
    if (policy === undefined) {
      // duration 0: never expires (rate-limiter-flexible's meaning): a century-long window.
      policy = `fixed_window:${this.points}/${this.duration > 0 ? this.duration + 's' : '36500d'}`;
      if (this._blockDuration > 0) policy += `,block=${this._blockDuration}s`;
    }
    this._lim = new Limiter(policy, { store: opts.store ?? opts.storeClient ?? new MemoryStore(),
      failMode: opts.failMode, fallback: opts.fallback, logger: opts.logger });
    this._blocked = new Map(); // key -> Date.now() ms until which block() holds it
  }
  get keyPrefix() { return this._keyPrefix; }
  get blockDuration() { return this._blockDuration; }
  set blockDuration(v) { this._blockDuration = nonNegInt(v, 'blockDuration'); }
  get execEvenly() { return this._execEvenly; }
  set execEvenly(v) { if (v) throw new RangeError('execEvenly: not supported (use a leaky_bucket policy)'); }
  getKey(key) { return this._keyPrefix ? `${this._keyPrefix}:${key}` : `${key}`; }

  _res(d, cost) {
    const used = Math.max(0, d.limit - d.remaining);
    const ms = d.allowed ? ceilMs(d._rs) : (d._ra < 0 ? -1 : ceilMs(d._ra));
    return new Res(Math.max(0, d.remaining), ms, d.allowed ? used : used + cost,
      d.allowed && cost > 0 && used === cost);
  }
  _blockedRes(key) {
    const until = this._blocked.get(key);
    if (until === undefined) return null;
    const left = until - Date.now();
    if (left > 0 || until === Infinity) {
      return new Res(0, until === Infinity ? -1 : left, this.points + 1, false);
    }
    this._blocked.delete(key);
    return null;
  }
  // consume(key, points = 1): resolves a RateLimiterRes; rejects one when refused, an Error
  // when a network store cannot answer (and failMode is 'closed').
  consume(key, points = 1) {
    let k, d;
    try {
      k = this.getKey(key);
      nonNegInt(points, 'points');
      const b = this._blocked.size ? this._blockedRes(k) : null;
      if (b) return Promise.reject(b);
      if (this._lim._health) return this._consumeAsync(k, points);
      d = this._lim.hit(k, points);
    } catch (e) {
      return Promise.reject(e);
    }
    const res = this._res(d, points);
    return d.allowed ? Promise.resolve(res) : Promise.reject(res);
  }
  async _consumeAsync(k, points) {
    const d = await this._lim.hitAsync(k, points);
    if (d.error && !d.fallback && !d.allowed) throw d.error;
    const res = this._res(d, points);
    if (!d.allowed) throw res;
    return res;
  }
  // penalty(key, points = 1): charges points even past the limit (a debt the key pays back).
  penalty(key, points = 1) {
    try {
      const k = this.getKey(key);
      nonNegInt(points, 'points');
      this._charge(k, points);
      const d = this._lim.peek(k);
      return Promise.resolve(this._res(d, 0));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  _charge(k, points) {
    const r = this._lim.reserve(k, 0);
    if (r.reservation) this._lim.settle(k, r.reservation, points);
    else if (points > 0) {
      // A key refusing even a reservation of 0 is blocked: charge what fits.
      const d = this._lim.hit(k, Math.min(points, Math.max(0, r.remaining)));
      void d;
    }
  }
  // reward(key, points = 1): gives points back (the window's count goes down, never below 0).
  reward(key, points = 1) {
    try {
      const k = this.getKey(key);
      nonNegInt(points, 'points');
      const d = this._lim.peek(k);
      const used = Math.max(0, d.limit - d.remaining);
      this._lim.reset(k);
      if (used - points > 0) this._charge(k, used - points);
      return Promise.resolve(this._res(this._lim.peek(k), 0));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  // get(key): the key's RateLimiterRes, or null when it has consumed nothing.
  get(key) {
    try {
      const k = this.getKey(key);
      const b = this._blockedRes(k);
      if (b) return Promise.resolve(b);
      const d = this._lim.peek(k);
      if (d.remaining >= d.limit && d.allowed) return Promise.resolve(null);
      return Promise.resolve(this._res(d, 0));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  // set(key, points): the key has consumed exactly `points` in its current window.
  set(key, points) {
    try {
      const k = this.getKey(key);
      nonNegInt(points, 'points');
      this._lim.reset(k);
      this._blocked.delete(k);
      if (points > 0) this._charge(k, points);
      return Promise.resolve(this._res(this._lim.peek(k), 0));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  // block(key, secDuration): refuse the key for secDuration seconds (0: for ever).
  block(key, secDuration) {
    try {
      const k = this.getKey(key);
      nonNegInt(secDuration, 'secDuration');
      this._blocked.set(k, secDuration === 0 ? Infinity : Date.now() + secDuration * 1000);
      return Promise.resolve(new Res(0, secDuration === 0 ? -1 : secDuration * 1000,
        this.points + 1));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  // delete(key): true when the key had state.
  delete(key) {
    try {
      const k = this.getKey(key);
      const d = this._lim.peek(k);
      const had = !(d.remaining >= d.limit && d.allowed) || this._blocked.delete(k);
      this._lim.reset(k);
      return Promise.resolve(had);
    } catch (e) {
      return Promise.reject(e);
    }
  }
}

// Derive from rate-limiter-flexible's RateLimiterCompatibleAbstract when it is installed, so
// `instanceof` checks of its wrappers (RateLimiterUnion, RLWrapperBlackAndWhite) pass.
try {
  const { RateLimiterCompatibleAbstract } = require('rate-limiter-flexible');
  if (RateLimiterCompatibleAbstract) {
    Object.setPrototypeOf(RateLimiterRatelimit.prototype, RateLimiterCompatibleAbstract.prototype);
  }
} catch { /* not installed: the class stands alone with the same interface */ }

module.exports = { RateLimiterRatelimit, RateLimiterRes: Res };
