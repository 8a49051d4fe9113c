// The core as WebAssembly, wrapped: load ratelimit.wasm (src/core compiled by clang-14 for
// wasm32-wasi) and hand out Policy objects that parse, decide, peek and release exactly as the
// native library does. Times and costs are BigInt nanoseconds and units, as int64 in C.

// The core never reads a file in the page (calendar zones need /usr/share/zoneinfo, which the
// browser has not): every WASI call it could make answers "bad file descriptor".
const EBADF = 8;
function wasiStubs(memoryRef) {
  const fail = () => EBADF;
  return {
    fd_close: fail, fd_fdstat_get: fail, fd_fdstat_set_flags: fail, fd_prestat_get: fail,
    fd_prestat_dir_name: fail, fd_read: fail, fd_seek: fail, path_open: fail,
    fd_write: (fd, iovs, n, written) => {
      // Nothing in the core prints; report the bytes as written so nothing loops.
      const dv = new DataView(memoryRef.memory.buffer);
      let total = 0;
      for (let i = 0; i < n; i++) total += dv.getUint32(iovs + 8 * i + 4, true);
      dv.setUint32(written, total, true);
      return 0;
    },
    proc_exit: (code) => { throw new Error(`ratelimit.wasm exited with ${code}`); },
  };
}

export const ALGOS = ['', 'fixed_window', 'sliding_log', 'sliding_window', 'token_bucket',
  'gcra', 'leaky_bucket', 'concurrency'];
export const [FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW, TOKEN_BUCKET, GCRA, LEAKY_BUCKET,
  CONCURRENCY] = [1, 2, 3, 4, 5, 6, 7];
export const ENOENT = -6;

const FIELDS = ['algo', 'limit', 'period', 'burst', 'queue', 'delay', 'block', 'blockFactor',
  'blockMax', 'jitter', 'months'];

/** The module: instantiate once from the bytes of ratelimit.wasm (an ArrayBuffer or a view). */
export class Core {
  static async load(bytes) {
    const ref = {};
    const { instance } = await WebAssembly.instantiate(bytes, { wasi_snapshot_preview1: wasiStubs(ref) });
    ref.memory = instance.exports.memory;
    instance.exports._initialize();
    return new Core(instance.exports);
  }

  /** Fetches the module next to this file (in the page). */
  static async fetch(url = new URL('ratelimit.wasm', import.meta.url)) {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`${url}: ${res.status}`);
    return Core.load(await res.arrayBuffer());
  }

  constructor(x) {
    this.x = x;
    this.enc = new TextEncoder();
    this.dec = new TextDecoder();
  }

  /** The last decision's seven int64 fields, a view into the module's memory. */
  last() {
    if (!this.lastView || this.lastView.buffer !== this.x.memory.buffer)
      this.lastView = new BigInt64Array(this.x.memory.buffer, this.x.rlt_wasm_last(), 7);
    return this.lastView;
  }

  cstr(ptr) {
    const b = new Uint8Array(this.x.memory.buffer);
    let e = ptr;
    while (b[e]) e++;
    return this.dec.decode(b.subarray(ptr, e));
  }

  /** Parses policy text: { policy } or { error: the parser's own message }. */
  parse(text) {
    const bytes = this.enc.encode(text);
    if (bytes.length > this.x.rlt_wasm_text_cap()) return { error: 'policy text too long' };
    new Uint8Array(this.x.memory.buffer).set(bytes, this.x.rlt_wasm_text_buf());
    const p = this.x.rlt_wasm_parse(bytes.length);
    if (!p) return { error: this.cstr(this.x.rlt_wasm_out()) };
    return { policy: new Policy(this, p) };
  }

  /**
   * The batch arrays, reused by every decideBatch of this module (JavaScript runs it on one
   * thread): times, costs and out (2 per decision) for at least `n` decisions, grown only when
   * `n` outgrows them; fresh views when the module's memory has grown since.
   */
  batch(n) {
    const x = this.x;
    let b = this.batchBufs;
    if (!b || n > b.cap) {
      const cap = Math.max(n, 1024);
      if (b) x.rlt_wasm_free(b.ptr);
      this.batchBufs = null;
      const ptr = x.rlt_wasm_alloc(32 * cap);
      if (!ptr) throw new Error('ratelimit.wasm: out of memory');
      b = this.batchBufs = { ptr, cap, times: null };
    }
    if (!b.times || b.times.buffer !== x.memory.buffer) {
      const mem = x.memory.buffer;
      b.times = new BigInt64Array(mem, b.ptr, b.cap);
      b.costs = new BigInt64Array(mem, b.ptr + 8 * b.cap, b.cap);
      b.out = new BigInt64Array(mem, b.ptr + 16 * b.cap, 2 * b.cap);
    }
    return b;
  }

  strerror(code) {
    return this.cstr(this.x.rlt_wasm_strerror(code));
  }
}

/** One parsed policy with its fields (BigInt) and its canonical text. */
export class Policy {
  constructor(core, ptr) {
    this.core = core;
    this.ptr = ptr;
    FIELDS.forEach((f, i) => { this[f] = core.x.rlt_wasm_field(ptr, i); });
    this.algo = Number(this.algo);
    this.name = ALGOS[this.algo];
    const n = core.x.rlt_wasm_format(ptr);
    this.text = n >= 0 ? core.cstr(core.x.rlt_wasm_out()) : '';
  }

  /** A fresh state (all zero) for this policy. */
  state() {
    return new State(this, this.core.x.rlt_wasm_state(this.ptr));
  }

  free() {
    this.core.x.rlt_wasm_free(this.ptr);
    this.ptr = 0;
  }
}

/** A limiter state in the module's heap; decide() charges it, peek() does not. */
export class State {
  constructor(policy, ptr) {
    if (!ptr) throw new Error('ratelimit.wasm: out of memory');
    this.p = policy;
    this.ptr = ptr;
  }

  result(rc) {
    const v = this.p.core.last();
    return { status: rc, allowed: v[0] !== 0n, limit: v[1], remaining: v[2], retryAfter: v[3],
      resetAfter: v[4], delay: v[5], lease: v[6] };
  }

  /** rlt_decide at `now` (ns) for `cost`: { status, allowed, limit, remaining, ... }. */
  decide(now, cost = 1n) {
    return this.result(this.p.core.x.rlt_wasm_decide(this.p.ptr, this.ptr, now, cost));
  }

  /** What a cost-1 request would get at `now`, without charging anything. */
  peek(now) {
    return this.result(this.p.core.x.rlt_wasm_peek(this.p.ptr, this.ptr, now));
  }

  /** rlt_release of a concurrency lease; the status (ENOENT: the lease had expired). */
  release(now, lease) {
    return this.p.core.x.rlt_wasm_release(this.p.ptr, this.ptr, now, lease);
  }

  /**
   * Views of the module's batch arrays for `n` decisions, { times, costs }: a caller that writes
   * its trace there and hands them to decideBatch saves copying it in. They stay valid until a
   * batch grows the arrays or anything grows the module's memory (a new state, a peek).
   */
  batchArrays(n) {
    const b = this.p.core.batch(n);
    return { times: b.times.subarray(0, n), costs: b.costs.subarray(0, n) };
  }

  /**
   * rlt_decide for every (times[i], costs[i]) in one call into the module (BigInt64Arrays, or
   * batchArrays' views, which are not copied): { made, out }, out[2i] the verdict (1 or 0, or the
   * negative status where it stopped) and out[2i+1] the delay; `made` decisions were made before
   * any failure. Given `out` (2n or more), the results are copied there; without it `out` is a
   * view into the module, valid until the next batch or anything that grows the module's memory.
   */
  decideBatch(times, costs, out = null) {
    const core = this.p.core;
    const n = times.length;
    const b = core.batch(n);
    if (times.buffer !== b.times.buffer || times.byteOffset !== b.times.byteOffset) b.times.set(times);
    if (costs.buffer !== b.costs.buffer || costs.byteOffset !== b.costs.byteOffset) b.costs.set(costs);
    const made = core.x.rlt_wasm_decide_batch(this.p.ptr, this.ptr, b.times.byteOffset,
      b.costs.byteOffset, n, b.out.byteOffset);
    const res = b.out.subarray(0, 2 * n);
    if (!out) return { made, out: res };
    out.set(res);
    return { made, out };
  }

  copy() {
    return new State(this.p, this.p.core.x.rlt_wasm_state_copy(this.p.ptr, this.ptr));
  }

  /** The state's bytes in hex, as the native library lays them out. */
  text() {
    const x = this.p.core.x;
    return x.rlt_wasm_state_text(this.p.ptr, this.ptr) < 0 ? '' : this.p.core.cstr(x.rlt_wasm_out());
  }

  free() {
    this.p.core.x.rlt_wasm_free(this.ptr);
    this.ptr = 0;
  }
}
