'use strict';
// Loads the addon ratelimit.node: $RLT_NODE_ADDON, else the package's own build (npm run
// build: build/ratelimit.node), else the repository's CMake builds (release, then dev).
const path = require('node:path');
const fs = require('node:fs');

function load() {
  const here = path.join(__dirname, '..');
  const candidates = [
    process.env.RLT_NODE_ADDON,
    path.join(here, 'build', 'ratelimit.node'),
    path.join(here, '..', 'build', 'release', 'node', 'ratelimit.node'),
    path.join(here, '..', 'build', 'dev', 'node', 'ratelimit.node'),
  ].filter(Boolean);
  for (const p of candidates) if (fs.existsSync(p)) return require(p);
  throw new Error('ratelimit: the addon ratelimit.node is not built (run `npm run build` in ' +
                  here + ', or set RLT_NODE_ADDON); looked in ' + candidates.join(', '));
}

const native = load();
module.exports = native;
