// State.decideBatch (web/ratelimit.js) against State.decide one call at a time, for every
// algorithm but the concurrency limiter: plain arrays copied in, batchArrays' views written in
// place, a caller's `out`, the batch arrays grown past their first size, and the module's
// memory grown between two batches (the views made afresh). Usage: node batch.mjs RATELIMIT_JS RATELIMIT_WASM
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';

const [jsPath, wasmPath] = process.argv.slice(2);
const { Core } = await import(pathToFileURL(jsPath).href);
const core = await Core.load(readFileSync(wasmPath));

// A trace with bursts, gaps and costs 0..3, the same for every policy (splitmix-ish LCG).
function trace(n, seed) {
  const times = new BigInt64Array(n);
  const costs = new BigInt64Array(n);
  let s = BigInt(seed);
  let t = 1000000000n;
  for (let i = 0; i < n; i++) {
    s = (s * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    t += (s >> 40n) % 30000000n;
    times[i] = t;
    costs[i] = (s >> 20n) & 3n;
  }
  return { times, costs };
}

function oneByOne(policy, times, costs) {
  const st = policy.state();
  const want = [];
  let allowed = 0;
  for (let i = 0; i < times.length; i++) {
    const d = st.decide(times[i], costs[i]);
    assert.equal(d.status, 0);
    want.push(d.allowed ? 1n : 0n, d.delay);
    if (d.allowed) allowed++;
  }
  st.free();
  return { want, allowed };
}

let checked = 0;
for (const text of ['fixed_window:20/1s', 'sliding_log:20/1s', 'sliding_window:20/1s',
  'token_bucket:20/1s,burst=5', 'gcra:20/1s', 'leaky_bucket:20/1s,queue=10']) {
  const { policy } = core.parse(text);
  for (const n of [100, 3000]) { // 3000 outgrows the first batch arrays (1024)
    const { times, costs } = trace(n, n + checked);
    const { want, allowed } = oneByOne(policy, times, costs);
    assert.ok(allowed > 0 && allowed < n, `${text}: ${allowed} of ${n} allowed`);
    const same = (out, how) => {
      for (let i = 0; i < n; i++) {
        assert.equal(out[2 * i], want[2 * i], `${text} ${how} #${i}: verdict`);
        assert.equal(out[2 * i + 1], want[2 * i + 1], `${text} ${how} #${i}: delay`);
      }
    };
    // Plain arrays, copied in; out a view into the module.
    let st = policy.state();
    let r = st.decideBatch(times, costs);
    assert.equal(r.made, n);
    same(r.out, 'copied');
    st.free();
    // The trace written into the module's own arrays; the results into the caller's array.
    st = policy.state();
    const v = st.batchArrays(n);
    v.times.set(times);
    v.costs.set(costs);
    const mine = new BigInt64Array(2 * n);
    r = st.decideBatch(v.times, v.costs, mine);
    assert.equal(r.out, mine);
    same(mine, 'in place');
    st.free();
    // The module's memory grown between two batches: the arrays are viewed afresh.
    const before = core.x.memory.buffer;
    core.x.memory.grow(1);
    assert.notEqual(core.x.memory.buffer, before);
    st = policy.state();
    r = st.decideBatch(times, costs);
    same(r.out, 'after growth');
    st.free();
    checked += n;
  }
}
console.log(`web_batch: ${checked} decisions per way equal`);
