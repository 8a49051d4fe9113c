// One simulator (issue 37, item 3): the page runs `ratelimit sim`'s own C, compiled to
// WebAssembly beside the core, and web/ keeps only drawing and interaction.
//  1. No JavaScript file of web/ holds the simulator: no sim.js or simtext.js, and none of its
//     marks (the patterns' generator, the worst burst, the contracts, the state column, the
//     accuracy judge, their words).
//  2. The staged ratelimit.wasm exports the engine (rlt_wasm_sim_*), and the page's numbers are
//     its: the table the page's module (ratelimit.js's Sim) reads from it is the one it prints.
//  3. The staged site weighs under 300 KB (300 000 bytes, every file of it).
// Usage: node one_sim.mjs WEB_DIR SITE_DIR
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [webDir, site] = process.argv.slice(2);
let failed = 0;
const check = (ok, what) => { if (!ok) { failed++; console.error(`FAIL ${what}`); } return ok; };

// 1. web/ draws and interacts; the simulator is C.
for (const f of ['sim.js', 'simtext.js'])
  check(!existsSync(join(webDir, f)), `web/${f} is gone (the simulator is src/cli/sim_engine.c in the module)`);
const marks = [
  [/9E3779B97F4A7C15/i, 'the random pattern\'s splitmix64'],
  [/\b(worstSpan|worst_span)\b/, 'the worst W-tick burst'],
  [/\b(contractCheck|perAlignedWindow|bucketHeld|shaperHeld|inFlightHeld)\b/, 'the contracts'],
  [/\b(describeState|genPattern|parseTrace|parseAt|runRow|judge)\s*\(/, 'the simulator\'s steps'],
  [/per aligned window|drains 1 per|wrongly allowed|in flight \$\{|outside the simulator's range/, 'the simulator\'s words'],
  [/rlt_wasm_decide_batch|decideBatch\(/, 'a row run in JavaScript'],
];
// ratelimit.js wraps the module: its decideBatch is the core's, for the bench and the tests.
for (const f of readdirSync(webDir).filter((n) => n.endsWith('.js'))) {
  const text = readFileSync(join(webDir, f), 'utf8');
  for (const [re, what] of marks)
    if (!(f === 'ratelimit.js' && what === 'a row run in JavaScript')) check(!re.test(text), `web/${f} holds ${what} (${re})`);
}

// 2. The engine is in the module, and the page's module reads its numbers from it.
const wasm = readFileSync(join(site, 'ratelimit.wasm'));
const exported = WebAssembly.Module.exports(new WebAssembly.Module(wasm)).map((e) => e.name);
for (const name of ['rlt_wasm_sim_open', 'rlt_wasm_sim_run', 'rlt_wasm_sim_states', 'rlt_wasm_sim_cell',
  'rlt_wasm_sim_report', 'rlt_wasm_sim_close'])
  check(exported.includes(name), `ratelimit.wasm exports ${name}`);
if (exported.includes('rlt_wasm_sim_open')) {
  const { Core, Sim } = await import(pathToFileURL(join(site, 'ratelimit.js')).href);
  const core = await Core.load(wasm);
  const { sim, error } = Sim.open(core, ['--pattern', 'boundary']);
  if (check(sim, `the module opens sim's default run: ${error}`)) {
    check(sim.run(20n * 1000000000n, true) === null, 'the module runs it up to t = 20');
    const { rows } = sim.cells();
    const printed = sim.text(false).split('\n').filter((l) => /^\| (Fixed|Sliding|Token|GCRA|Leaky|Concurrency)/.test(l))
      .map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
    check(JSON.stringify(rows) === JSON.stringify(printed) && rows[0][4] === '8',
      `the cells the page draws are the table the engine prints (the fixed window's 8 at t = 20): ${JSON.stringify(rows[0])}`);
    check(sim.rows[0].worst === 8n && sim.rows[0].ok.length === sim.n, 'the rows\' records come from the run');
    sim.close();
  }
}

// 3. The page's weight.
let bytes = 0;
for (const f of readdirSync(site)) bytes += statSync(join(site, f)).size;
check(bytes < 300000, `the staged site weighs under 300 KB: ${bytes} bytes`);

if (failed) process.exit(1);
console.log(`one_sim: web/ draws, ratelimit.wasm simulates; the site weighs ${bytes} bytes`);
