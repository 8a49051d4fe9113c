// worker_threads sharing one in-process store (MemoryStore({name})) are exact: 8 threads
// hitting the same keys admit exactly the limit, no more, no less.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';

const pkg = process.env.RLT_NODE_PACKAGE;
const { MemoryStore } = createRequire(import.meta.url)(pkg);
// A named store lives while some thread holds it: the main thread holds each one for the
// test's length, so a worker that ends early does not free it under the others.
const held = [];
const src = `
const { parentPort, workerData } = require('node:worker_threads');
const { Limiter, MemoryStore } = require(workerData.pkg);
const lim = new Limiter(workerData.policy, { store: new MemoryStore({ name: workerData.store }) });
// A start line: every thread waits until all 8 are ready, so they contend.
const gate = new Int32Array(workerData.gate);
Atomics.add(gate, 0, 1);
while (Atomics.load(gate, 0) < 8) Atomics.wait(gate, 0, Atomics.load(gate, 0), 10);
let allowed = 0;
for (let i = 0; i < workerData.n; i++) {
  if (lim.hit('key' + (i % 4), 1, workerData.now).allowed) allowed++;
}
parentPort.postMessage(allowed);
`;

function run(store, policy, n, now) {
  held.push(new MemoryStore({ name: store }));
  const gate = new SharedArrayBuffer(4);
  return Promise.all(Array.from({ length: 8 }, () => new Promise((resolve, reject) => {
    const w = new Worker(src, { eval: true, workerData: { pkg, store, policy, n, now, gate } });
    w.on('message', resolve);
    w.on('error', reject);
  })));
}

test('8 worker threads on one named store admit exactly the limit', async () => {
  const counts = await run('workers-exact', 'fixed_window:10000/1h', 20000, 5n);
  // 4 keys x 10000 admitted of 8 x 20000 requests.
  assert.equal(counts.reduce((a, b) => a + b, 0), 40000);
});

test('stores of other names are separate', async () => {
  const a = await run('workers-a', 'gcra:100/1h', 100, 0n);
  const b = await run('workers-b', 'gcra:100/1h', 100, 0n);
  assert.equal(a.reduce((x, y) => x + y, 0), 400);
  assert.equal(b.reduce((x, y) => x + y, 0), 400);
  assert.equal(held.length, 3);
});
