// The WebAssembly half of bench/web/run.sh: the loop of decide.c through ratelimit.wasm in
// Node, three ways: State.decideBatch (the whole trace in one call, what sim.js does; the
// trace's arrays built before the timing and copied in and out inside it), one call of the
// raw export per decision (rlt_wasm_decide, then the verdict) and web/ratelimit.js's
// State.decide (the whole decision as an object). Usage: node decide.mjs RATELIMIT_JS RATELIMIT_WASM < cases.txt
//   -> lines "POLICY BATCH_PER_SECOND RAW_PER_SECOND MODULE_PER_SECOND ALLOWED"
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [jsPath, wasmPath] = process.argv.slice(2);
const { Core } = await import(pathToFileURL(jsPath).href);
const core = await Core.load(readFileSync(wasmPath));
const x = core.x;

function batch(policy, iters) {
  const step = policy.period / policy.limit / 2n;
  let best = 0;
  let allowed = 0;
  for (let rep = 0; rep < 3; rep++) {
    const st = policy.state();
    const times = new BigInt64Array(iters);
    const costs = new BigInt64Array(iters).fill(1n);
    let t = 1000000000n;
    for (let i = 0; i < iters; i++, t += step) times[i] = t;
    const t0 = process.hrtime.bigint(); // the trace is given, as sim.js's requests are
    const { out } = st.decideBatch(times, costs);
    const rate = (iters * 1e9) / Number(process.hrtime.bigint() - t0);
    allowed = 0;
    for (let i = 0; i < iters; i++) if (out[2 * i] === 1n) allowed++;
    if (rate > best) best = rate;
    st.free();
  }
  return [best, allowed];
}

function bench(policy, iters, viaModule) {
  const step = policy.period / policy.limit / 2n;
  let best = 0;
  let allowed = 0;
  for (let rep = 0; rep < 3; rep++) {
    const st = policy.state();
    let t = 1000000000n;
    allowed = 0;
    const t0 = process.hrtime.bigint();
    if (viaModule) {
      for (let i = 0; i < iters; i++) {
        const d = st.decide(t, 1n);
        if (d.allowed) allowed++;
        if (d.lease) st.release(t, d.lease);
        t += step;
      }
    } else {
      const p = policy.ptr;
      const s = st.ptr;
      for (let i = 0; i < iters; i++) {
        x.rlt_wasm_decide(p, s, t, 1n);
        if (x.rlt_wasm_result(0)) allowed++;
        const lease = x.rlt_wasm_result(6);
        if (lease) x.rlt_wasm_release(p, s, t, lease);
        t += step;
      }
    }
    const rate = (iters * 1e9) / Number(process.hrtime.bigint() - t0);
    if (rate > best) best = rate;
    st.free();
  }
  return [best, allowed];
}

for (const line of readFileSync(0, 'utf8').split('\n')) {
  const [text, n] = line.split(' ');
  if (!text) continue;
  const r = core.parse(text);
  if (r.error) throw new Error(`${text}: ${r.error}`);
  // The concurrency limiter releases each lease it is given: one call per decision only.
  const [bat, bAllowed] = r.policy.name === 'concurrency' ? [0, -1] : batch(r.policy, Number(n));
  const [raw, allowed] = bench(r.policy, Number(n), false);
  const [mod] = bench(r.policy, Math.ceil(Number(n) / 5), true);
  if (bAllowed >= 0 && bAllowed !== allowed) throw new Error(`${text}: batch allowed ${bAllowed}, one by one ${allowed}`);
  console.log(`${text} ${bat.toFixed(0)} ${raw.toFixed(0)} ${mod.toFixed(0)} ${allowed}`);
}
