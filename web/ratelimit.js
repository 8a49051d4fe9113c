// The core as WebAssembly, wrapped: load ratelimit.wasm (src/core compiled by clang-14 for
// wasm32-wasi) and hand out Policy objects that parse, decide, peek and release exactly as the
// native library does. Times and costs are BigInt nanoseconds and units, as int64 in C.

// The module never reads a file in the page (calendar zones need /usr/share/zoneinfo, which the
// browser has not; the simulator's trace is handed over in memory): every WASI call it could
// make answers "bad file descriptor", but writes. What `ratelimit sim`'s engine prints on
// stdout (1) and stderr (2) is kept, as bytes, for Core.take(fd).
const EBADF = 8;
function wasiStubs(ref) {
  const fail = () => EBADF;
  return {
    fd_close: fail, fd_fdstat_get: fail, fd_fdstat_set_flags: fail, fd_prestat_get: fail,
    fd_prestat_dir_name: fail, fd_read: fail, fd_seek: fail, path_open: fail,
    fd_write: (fd, iovs, n, written) => {
      const dv = new DataView(ref.memory.buffer);
      let total = 0;
      for (let i = 0; i < n; i++) {
        const ptr = dv.getUint32(iovs + 8 * i, true);
        const len = dv.getUint32(iovs + 8 * i + 4, true);
        if (fd === 1 || fd === 2) ref.out[fd].push(new Uint8Array(ref.memory.buffer, ptr, len).slice());
        total += len;
      }
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
    const ref = { out: { 1: [], 2: [] } };
    const { instance } = await WebAssembly.instantiate(bytes, { wasi_snapshot_preview1: wasiStubs(ref) });
    ref.memory = instance.exports.memory;
    instance.exports._initialize();
    const core = new Core(instance.exports);
    core.ref = ref;
    return core;
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

  /** What the module printed on fd 1 (stdout) or 2 (stderr) since the last take, as text. */
  take(fd) {
    const parts = this.ref.out[fd];
    this.ref.out[fd] = [];
    const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { all.set(p, at); at += p.length; }
    return this.dec.decode(all);
  }

  /** Bytes into the module's heap (rlt_wasm_alloc): their address, owned by the callee. */
  put(bytes) {
    const ptr = this.x.rlt_wasm_alloc(bytes.length || 1);
    if (!ptr) throw new Error('ratelimit.wasm: out of memory');
    new Uint8Array(this.x.memory.buffer).set(bytes, ptr);
    return ptr;
  }
}

/** The seven rows of `ratelimit sim`, in its order. */
export const SIM_ROWS = 7;

/**
 * `ratelimit sim` itself, its C engine in the module (web/wasm/sim_export.c over
 * src/cli/sim_engine.c): the same options, requests, runs, state column, table, timeline,
 * accuracy report and messages as the command, by construction. The page adds a row's own
 * policy (`--rowN TEXT`) and a clock that may stop before the last request.
 */
export class Sim {
  /**
   * Reads `args`, sim's own arguments (['--limit', '3', '--pattern', 'burst']), led by the
   * page's own row policies if any ('--row4', 'token_bucket:2/10s'); `trace` is --trace's content (a string) when given.
   * Returns { sim } or { error, status }: sim's message (its whole stderr) and exit status.
   */
  static open(core, args, trace) {
    const x = core.x;
    const nul = args.find((a) => a.includes('\0'));
    if (nul !== undefined) return { error: `ratelimit sim: '${nul.replace(/\0/g, '\\0')}': a NUL byte in an argument\n`, status: 2 };
    const bytes = core.enc.encode(args.map((a) => `${a}\0`).join(''));
    const a = core.put(bytes);
    const tb = trace === undefined ? null : core.enc.encode(trace);
    const t = tb ? core.put(tb) : 0;
    const tlen = tb ? tb.length : 0;
    core.take(1);
    core.take(2);
    const h = x.rlt_wasm_sim_open(a, bytes.length, t, tlen);
    if (!h) return { error: core.take(2), status: x.rlt_wasm_sim_status() };
    return { sim: new Sim(core, h) };
  }

  /** sim's reading of an --until value: { v } (BigInt ns) or { error } (sim's message). */
  static ticks(core, text) {
    const p = core.put(core.enc.encode(`${text}\0`));
    core.take(2);
    const v = core.x.rlt_wasm_sim_ticks(p);
    core.x.rlt_wasm_free(p);
    const error = core.take(2);
    return core.x.rlt_wasm_sim_status() ? { error } : { v };
  }

  constructor(core, h) {
    this.core = core;
    this.h = h;
    const x = core.x;
    const num = (f) => x.rlt_wasm_sim_num(h, f);
    this.total = Number(num(1));
    this.limit = num(2);
    this.window = num(3);
    this.hold = num(4);
    this.last = num(5);
    this.until = num(6) === -(1n << 63n) ? null : num(6);
    this.pattern = core.cstr(x.rlt_wasm_sim_str(h, 0));
    this.block = core.cstr(x.rlt_wasm_sim_str(h, 1)) || null;
    const r = new BigInt64Array(x.memory.buffer, x.rlt_wasm_sim_requests(h), 2 * this.total);
    /** Every request, { t, cost } (BigInt), in time order. */
    this.requests = Array.from({ length: this.total }, (_, i) => ({ t: r[2 * i], cost: r[2 * i + 1] }));
    /** Each row's policy text (its own, or the one sim runs), sim's, and whether it is its own. */
    this.policies = [];
    this.defaults = [];
    this.custom = [];
    for (let i = 0; i < SIM_ROWS; i++) {
      this.policies.push(core.cstr(x.rlt_wasm_sim_row_text(h, i, 4)));
      this.defaults.push(core.cstr(x.rlt_wasm_sim_row_text(h, i, 5)));
      this.custom.push(x.rlt_wasm_sim_row(h, i, 7) !== 0n);
    }
    this.T = null;
    this.n = 0;
    this.rows = [];
  }

  /**
   * Runs every row from fresh states over all the requests (upTo false) or those at or before
   * T (upTo true), the state column at T (BigInt ns). Returns null, or sim's message when it
   * fails (a --block no row can take, a decision's error; its exit status in `status`). Then: n (requests run), rows
   * ({ name, state, contract, error, nOk, nRej, worst, worstT0, maxDelay, held, ok, delay,
   * busy }, the last three per request run), span() and the texts.
   */
  run(T, upTo) {
    const { core, h } = this;
    const x = core.x;
    core.take(1);
    core.take(2);
    const rc = x.rlt_wasm_sim_run(h, T, upTo ? 1 : 0);
    this.T = T;
    this.status = rc;
    if (rc) { this.rows = []; return core.take(2); }
    this.n = Number(x.rlt_wasm_sim_num(h, 0));
    const n = this.n;
    const mem = x.memory.buffer;
    this.rows = [];
    for (let i = 0; i < SIM_ROWS; i++) {
      const num = (f) => x.rlt_wasm_sim_row(h, i, f);
      const text = (f) => core.cstr(x.rlt_wasm_sim_row_text(h, i, f));
      this.rows.push({ name: text(0), state: text(1), contract: text(2), error: text(3) || null,
        nOk: num(0), nRej: num(1), worst: num(2), worstT0: num(3), maxDelay: num(4), held: num(5) !== 0n,
        ok: new Uint8Array(mem, x.rlt_wasm_sim_row_array(h, i, 0), n).slice(),
        delay: new BigInt64Array(mem, x.rlt_wasm_sim_row_array(h, i, 1), n).slice(),
        busy: new BigInt64Array(mem, x.rlt_wasm_sim_row_array(h, i, 2), n).slice() });
    }
    return null;
  }

  /** The state column again at T over the same run (no request crossed by the clock). */
  states(T) {
    const { core, h } = this;
    core.x.rlt_wasm_sim_states(h, T);
    this.T = T;
    this.rows.forEach((r, i) => { r.state = core.cstr(core.x.rlt_wasm_sim_row_text(h, i, 1)); });
  }

  /** The timeline's span after a run: whole windows over every arrival, send, hold and T. */
  span() {
    const x = this.core.x;
    return { t0: x.rlt_wasm_sim_num(this.h, 7), t1: x.rlt_wasm_sim_num(this.h, 8) };
  }

  /** The table's cells as sim prints them: { head: 7 cells, rows: 7 x 7 cells }. */
  cells() {
    const { core, h } = this;
    const cell = (r, c) => core.cstr(core.x.rlt_wasm_sim_cell(h, r, c));
    const all = [];
    for (let r = 0; r <= SIM_ROWS; r++) {
      const row = [];
      for (let c = 0; c < 7; c++) row.push(cell(r, c));
      all.push(row);
    }
    return { head: all[0], rows: all.slice(1) };
  }

  /** sim's standard output for the last run: the title, table and timeline, or with
   * `accuracy` the accuracy report (undefined: as the arguments said). */
  text(accuracy) {
    const { core, h } = this;
    core.take(1);
    core.x.rlt_wasm_sim_report(h, accuracy === undefined ? -1 : accuracy ? 1 : 0);
    return core.take(1);
  }

  close() {
    this.core.x.rlt_wasm_sim_close(this.h);
    this.h = 0;
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
