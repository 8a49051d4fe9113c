// An express app with one limited route under autocannon: the added cost a request of our
// rateLimit middleware against express-rate-limit's memory store, over the same app without a
// limiter, interleaved rounds, medians.  The app runs in a child process (one core), autocannon
// in this one.  Usage: node express.mjs NODE_MODULES PACKAGE [ROUNDS] [SECONDS]
import { createRequire } from 'node:module';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const [modules, pkg, roundsArg, secondsArg, variant] = process.argv.slice(2);
const require = createRequire(modules + '/');

if (variant) {
  // The app: one route, behind nothing, express-rate-limit, or ours; a limit never reached.
  const express = require('express');
  const app = express();
  const opts = { windowMs: 3600000, limit: 1e9, standardHeaders: 'draft-8', legacyHeaders: false,
    keyGenerator: (req) => req.get('x-user') ?? 'anon' };
  if (variant === 'erl') app.use(require('express-rate-limit').rateLimit(opts));
  if (variant === 'ours') app.use(require(pkg).rateLimit(opts));
  app.get('/', (req, res) => res.send('ok'));
  const server = app.listen(0, '127.0.0.1', () => process.send(server.address().port));
} else {
  const autocannon = require('autocannon');
  const ROUNDS = Number(roundsArg || 3), SECONDS = Number(secondsArg || 5);
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const rps = { none: [], erl: [], ours: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const v of Object.keys(rps)) {
      const child = fork(fileURLToPath(import.meta.url), [modules, pkg, '0', '0', v]);
      const port = await new Promise((resolve) => child.once('message', resolve));
      let n = 0;
      const res = await autocannon({ url: `http://127.0.0.1:${port}/`, connections: 32, duration: SECONDS,
        setupClient: (c) => c.setHeaders({ 'x-user': 'u' + (n++ % 10000) }) });
      rps[v].push(res.requests.average);
      child.kill();
    }
  }
  const m = Object.fromEntries(Object.entries(rps).map(([k, v]) => [k, median(v)]));
  const added = (v) => 1e6 / m[v] - 1e6 / m.none; // µs a request over no limiter
  console.log(`express, autocannon -c 32, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians:`);
  console.log(`  no limiter            ${m.none.toFixed(0)} req/s`);
  console.log(`  express-rate-limit    ${m.erl.toFixed(0)} req/s   +${added('erl').toFixed(2)} µs a request`);
  console.log(`  ours (rateLimit)      ${m.ours.toFixed(0)} req/s   +${added('ours').toFixed(2)} µs a request   ratio of added costs ${(added('ours') / added('erl')).toFixed(2)}`);
}
