#!/bin/sh
# The drop-ins against the real peers from npm: express, fastify, express-rate-limit,
# rate-limiter-flexible (and typescript, for node/index.d.ts), installed into a temporary folder (as tests/web/page.sh does), then
# `node --test tests/node/dropins/`.  Exit 77 (skipped, with a message) only when the npm
# registry cannot be reached.  Usage: dropins.sh PACKAGE_INDEX_JS
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null 2>&1 || { echo "test_node_dropins: npm is missing (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rlt-node.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "SKIPPED test_node_dropins: the npm registry is unreachable, the drop-ins NOT tested" >&2
  exit 77
fi
(cd "$tmp" && timeout 240 npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" \
   express@5 fastify@5 express-rate-limit@8 rate-limiter-flexible@11 typescript@5 >npm.log 2>&1) ||
  { cat "$tmp/npm.log" >&2; echo "test_node_dropins: npm install failed" >&2; exit 1; }
export RLT_NODE_PACKAGE="$1" RLT_NODE_MODULES="$tmp/node_modules" NODE_PATH="$tmp/node_modules"
# The TypeScript declarations compile against a use of every part of the API.
node "$tmp/node_modules/typescript/bin/tsc" --noEmit --strict --target es2020 --module commonjs \
  "$here/dropins/types_check.ts" ||
  { echo "test_node_dropins: node/index.d.ts does not describe the API" >&2; exit 1; }
echo "types_check.ts: compiled with tsc --strict"
node --test "$here"/dropins/*.mjs
