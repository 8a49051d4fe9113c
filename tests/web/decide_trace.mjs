// The WebAssembly half of wasm_vs_native.sh: the script decide_trace.c reads, run through
// web/ratelimit.js and ratelimit.wasm, printing the same lines.
// Usage: node decide_trace.mjs RATELIMIT_JS RATELIMIT_WASM < script
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [jsPath, wasmPath] = process.argv.slice(2);
const { Core } = await import(pathToFileURL(jsPath).href);
const core = await Core.load(readFileSync(wasmPath));
const out = [];
let st = null;
let lease = 0n;
const line = (rc, d) => `${rc} ${d.allowed ? 1 : 0} ${d.limit} ${d.remaining} ${d.retryAfter} ` +
  `${d.resetAfter} ${d.delay} ${d.lease} ${st.text()}`;
for (const l of readFileSync(0, 'utf8').split('\n')) {
  if (l.startsWith('policy ')) {
    if (st) { st.free(); st.p.free(); }
    st = null;
    lease = 0n;
    const r = core.parse(l.slice(7));
    if (r.error !== undefined) { out.push(`policy error ${r.error}`); continue; }
    out.push(`policy ok ${r.policy.text}`);
    st = r.policy.state();
  } else if (!st) {
    continue;
  } else if (l.startsWith('decide ')) {
    const [, now, cost] = l.split(' ');
    const d = st.decide(BigInt(now), BigInt(cost));
    if (d.status === 0 && d.allowed && d.lease) lease = d.lease;
    out.push(line(d.status, d));
  } else if (l.startsWith('peek ')) {
    const d = st.peek(BigInt(l.split(' ')[1]));
    out.push(line(d.status, d));
  } else if (l.startsWith('release ')) {
    out.push(`release ${st.release(BigInt(l.split(' ')[1]), lease)}`);
  }
}
process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
