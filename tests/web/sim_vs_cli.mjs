// The page's simulator is `ratelimit sim`: for each case below, the CLI's whole standard
// output (title, table with every state, count, burst, delay and contract, timeline; or the
// --accuracy report) and what web/ratelimit.js's Sim prints from sim's own C engine in
// ratelimit.wasm for the same arguments must be equal byte for byte; for a bad input, the
// messages (the whole stderr) and the exit statuses must be equal too.  By construction now (one
// engine, src/cli/sim_engine.c, built twice), this guards the build and the wrapper.
// Usage: node sim_vs_cli.mjs RATELIMIT_CLI WEB_DIR RATELIMIT_WASM SOURCE_DIR
import { readFileSync, writeFileSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [cli, webDir, wasmPath, srcDir] = process.argv.slice(2);
const { Core, Sim } = await import(pathToFileURL(join(webDir, 'ratelimit.js')).href);
const core = await Core.load(readFileSync(wasmPath));
const tmp = mkdtempSync(join(tmpdir(), 'rlt-web-'));

const trace = join(tmp, 'costs.trace');
writeFileSync(trace, '# a trace with costs and keys\n0 a\n0.5 b 2\n1 a 3\n1 c 0\n2.25 a\n\n9.999 b 1\n10 a 4\n10.001 a\n30 z 1\n');
const cases = [
  [],
  ['--pattern', 'steady'],
  ['--pattern', 'burst'],
  ['--pattern', 'random'],
  ['--pattern', 'random', '--seed', '7', '--rate', '0.9', '--duration', '60'],
  ['--pattern', 'burst', '--limit', '5', '--window', '12', '--until', '40'],
  ['--limit', '3', '--window', '7.5'],
  ['--limit', '1', '--window', '1'],
  ['--limit', '10', '--window', '60', '--pattern', 'random', '--rate', '0.4', '--seed', '3'],
  ['--at', '1,2,9.5,9.6,10,10.2,19.9,20', '--limit', '2', '--window', '5'],
  ['--at', '1,1,1,1,1,1', '--hold', '0.5'],
  ['--at', '3,1,2,1'],
  ['--pattern', 'steady', '--rate', '2', '--duration', '15', '--hold', '20'],
  ['--pattern', 'boundary', '--block', '4s'],
  ['--pattern', 'random', '--block', '4s*2..20s', '--seed', '11'],
  ['--trace', trace],
  ['--trace', trace, '--limit', '5', '--window', '10', '--width', '90'],
  ['--pattern', 'boundary', '--width', '10', '--until', '1000'],
  ['--at', '-5,-2.5,0,0.000000001'],
  // many windows per column
  ['--limit', '3', '--window', '0.001', '--until', '200'],
  ['--until', '1000000'],
  ['--window', '0.000001', '--until', '1', '--width', '13'],
  ['--window', '0.3', '--until', '50', '--width', '7'],
  ['--window', '0.7', '--at', '-3,2.2', '--until', '41', '--width', '23'],
  ['--pattern', 'random', '--rate', '0.45', '--seed', '2024', '--duration', '2000', '--accuracy'],
  ['--pattern', 'burst', '--accuracy'],
  ['--trace', join(srcDir, 'examples', 'api.trace')],
  // errors: the page says what the CLI says
  ['--limit', '0'],
  ['--window', 'ten'],
  ['--pattern', 'wavy'],
  ['--at', '1,x'],
  ['--at', '5,6', '--until', '2'],
  ['--block', 'soon'],
  ['--block', 'xyz'],
  ['--until', 'abc'],
  ['--until', '-5'],
  ['--at', '1', '--pattern', 'burst'],
];

/** The page's run of `args`: { out } (its stdout) or { error, status } (its stderr). */
function page(args) {
  const i = args.indexOf('--trace');
  const o = Sim.open(core, args, i >= 0 ? readFileSync(args[i + 1], 'utf8') : undefined);
  if (o.error !== undefined) return o;
  const s = o.sim;
  const error = s.run(s.until ?? s.last, false);
  const out = error === null ? s.text() : undefined;
  const status = s.status;
  s.close();
  return error === null ? { out } : { error, status };
}

let failed = 0;
let compared = 0;
for (const args of cases) {
  let exists = true;
  for (let i = 0; i < args.length; i++) if (args[i] === '--trace') exists = spawnSync('test', ['-r', args[i + 1]]).status === 0;
  if (!exists) continue; // an example trace this checkout lacks
  const c = spawnSync(cli, ['sim', ...args], { encoding: 'utf8' });
  const p = page(args);
  const what = `sim ${args.join(' ')}`;
  if (c.status === 0) {
    if (p.out !== c.stdout) {
      failed++;
      console.error(`${what}: the page differs from the CLI\n--- CLI\n${c.stdout}--- page\n${p.out ?? p.error}`);
    }
  } else if (p.out !== undefined || p.error !== c.stderr || p.status !== c.status) {
    failed++;
    console.error(`${what}: the CLI failed (${c.status}: ${c.stderr.trim()}) but the page says (${p.status}) ${p.error ?? 'nothing'}`);
  }
  compared++;
}
rmSync(tmp, { recursive: true });
if (failed) process.exit(1);
console.log(`sim_vs_cli: ${compared} cases equal`);
