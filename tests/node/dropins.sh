#!/bin/sh
# The drop-ins against the real peers from npm: express, fastify, express-rate-limit,
# rate-limiter-flexible, installed into a temporary folder (as tests/web/page.sh does), then
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
   express@5 fastify@5 express-rate-limit@8 rate-limiter-flexible@11 >npm.log 2>&1) ||
  { cat "$tmp/npm.log" >&2; echo "test_node_dropins: npm install failed" >&2; exit 1; }
export RLT_NODE_PACKAGE="$1" RLT_NODE_MODULES="$tmp/node_modules" NODE_PATH="$tmp/node_modules"
node --test "$here"/dropins/*.mjs
