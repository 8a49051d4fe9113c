// The WebAssembly half of bench/web/run.sh, the same work as decide.c's through ratelimit.wasm
// in Node: for each policy of cases.txt, on one fresh state a repeat, the clock advancing by half
// a refill interval per call:
//   batch:  State.decideBatch over the trace written before the timing into the module's batch
//           arrays (State.batchArrays, the module's own), each decision's
//           verdict and delay written to the module's results array, as decide.c's batch;
//   call:   the raw export once per decision (rlt_wasm_decide, then the verdict read back, and
//           rlt_wasm_release of a lease), as decide.c's loop;
//   module: State.decide once per decision, the whole decision as an object (what the page does
//           for the concurrency limiter and for peeks), a fifth of the decisions.
// One repeat to warm up (the engine optimises the code during it), not counted, then 5; the
// median of the 5. Usage: node decide.mjs RATELIMIT_JS RATELIMIT_WASM < cases.txt
//   -> lines "POLICY BATCH_PER_SECOND CALL_PER_SECOND MODULE_PER_SECOND ALLOWED"
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const REPEATS = 5;
const [jsPath, wasmPath] = process.argv.slice(2);
const { Core } = await import(pathToFileURL(jsPath).href);
const core = await Core.load(readFileSync(wasmPath));
const x = core.x;

/** Runs one(rep) for a warm-up and REPEATS more: [median rate, the last repeat's allowed]. */
function repeat(one) {
  const rates = [];
  let allowed = 0;
  for (let rep = -1; rep < REPEATS; rep++) {
    const [rate, a] = one();
    allowed = a;
    if (rep >= 0) rates.push(rate);
  }
  rates.sort((a, b) => a - b);
  return [rates[REPEATS >> 1], allowed];
}

function batch(policy, iters) {
  const step = policy.period / policy.limit / 2n;
  const probe = policy.state();
  const { times, costs } = probe.batchArrays(iters);
  probe.free();
  let t = 1000000000n;
  for (let i = 0; i < iters; i++, t += step) {
    times[i] = t;
    costs[i] = 1n;
  }
  return repeat(() => {
    const st = policy.state();
    const t0 = process.hrtime.bigint();
    const { made, out } = st.decideBatch(times, costs);
    const rate = (iters * 1e9) / Number(process.hrtime.bigint() - t0);
    if (made !== iters) throw new Error(`${policy.text}: the batch stopped at ${made}`);
    let allowed = 0;
    for (let i = 0; i < iters; i++) if (out[2 * i] === 1n) allowed++;
    st.free();
    return [rate, allowed];
  });
}

function oneByOne(policy, iters, viaModule) {
  const step = policy.period / policy.limit / 2n;
  return repeat(() => {
    const st = policy.state();
    let t = 1000000000n;
    let allowed = 0;
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
    st.free();
    return [rate, allowed];
  });
}

for (const line of readFileSync(0, 'utf8').split('\n')) {
  const [text, n] = line.split(' ');
  if (!text) continue;
  const r = core.parse(text);
  if (r.error) throw new Error(`${text}: ${r.error}`);
  // The concurrency limiter releases each lease it is given: one call per decision only.
  const [bat, bAllowed] = r.policy.name === 'concurrency' ? [0, -1] : batch(r.policy, Number(n));
  const [raw, allowed] = oneByOne(r.policy, Number(n), false);
  const [mod] = oneByOne(r.policy, Math.ceil(Number(n) / 5), true);
  if (bAllowed >= 0 && bAllowed !== allowed) throw new Error(`${text}: batch allowed ${bAllowed}, one by one ${allowed}`);
  console.log(`${text} ${bat.toFixed(0)} ${raw.toFixed(0)} ${mod.toFixed(0)} ${allowed}`);
  r.policy.free();
}
