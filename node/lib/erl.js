'use strict';
// express-rate-limit's Store interface over the exact core: new RatelimitStore() in
// rateLimit({store}).  A fixed window of windowMs on the store's clock counts every hit
// (express-rate-limit decides by totalHits > limit); decrement gives back a hit only when
// express-rate-limit may ask for it (skipSuccessfulRequests / skipFailedRequests), by
// charging each hit as a reservation settled at 0.
const { Limiter, MemoryStore } = require('./limiter');

const COUNT_MAX = 2 ** 31; // the window's policy limit: every hit is counted, none refused
const PENDING_KEYS = 100000; // keys remembered for decrement (the oldest dropped beyond)

class RatelimitStore {
  // new RatelimitStore({store, prefix}): store a MemoryStore or a URL (default: a new one).
  constructor(opts = {}) {
    if (opts === null || typeof opts !== 'object') throw new TypeError('opts: must be an object');
    this.prefix = opts.prefix ?? 'rl:';
    if (typeof this.prefix !== 'string') throw new TypeError('prefix: must be a string');
    this._store = opts.store ?? new MemoryStore();
    if (this._store.isRemoteStore) {
      throw new TypeError("store: RatelimitStore keeps its counts in-process (a MemoryStore); for Redis or a ratelimitd use our rateLimit({store})");
    }
    this.localKeys = true;
    this._lim = null;
    this._pending = null;
  }
  init(options) {
    const windowMs = options && options.windowMs !== undefined ? options.windowMs : 60000;
    if (!Number.isSafeInteger(windowMs) || windowMs < 1) throw new RangeError('windowMs: must be an integer >= 1');
    this.windowMs = windowMs;
    this._lim = new Limiter(`fixed_window:${COUNT_MAX}/${windowMs}ms`, { store: this._store });
    this._pending = options && (options.skipSuccessfulRequests || options.skipFailedRequests) ? new Map() : null;
  }
  _ready() { if (!this._lim) this.init({}); }
  _info(d) {
    return { totalHits: d.limit - d.remaining, resetTime: new Date(Date.now() + Math.ceil(Number(d._rs) / 1e6)) };
  }
  async get(key) {
    this._ready();
    const d = this._lim.peek(this.prefix + key);
    if (d.remaining === d.limit) return undefined;
    return this._info(d);
  }
  async increment(key) {
    this._ready();
    const k = this.prefix + key;
    if (!this._pending) return this._info(this._lim.hit(k, 1));
    const d = this._lim.reserve(k, 1, undefined, BigInt(this.windowMs) * 1000000n);
    if (d.reservation) {
      let list = this._pending.get(k);
      if (!list) {
        if (this._pending.size >= PENDING_KEYS) this._pending.delete(this._pending.keys().next().value);
        this._pending.set(k, (list = []));
      }
      list.push(d.reservation);
    }
    return this._info(d);
  }
  async decrement(key) {
    this._ready();
    const k = this.prefix + key;
    const list = this._pending && this._pending.get(k);
    if (!list || !list.length) return;
    const id = list.pop();
    if (!list.length) this._pending.delete(k);
    try { this._lim.settle(k, id, 0); } catch (e) { if (!(e instanceof RangeError)) throw e; }
  }
  async resetKey(key) {
    this._ready();
    this._lim.reset(this.prefix + key);
    if (this._pending) this._pending.delete(this.prefix + key);
  }
}

module.exports = { RatelimitStore };
