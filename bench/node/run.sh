#!/bin/sh
# The Node package's benchmarks, each ours against the peer in one run (docs/performance.md):
# in-process at 1M keys against rate-limiter-flexible's RateLimiterMemory, and through one
# redis-server against RateLimiterRedis + ioredis, and an express app's added cost a request
# (autocannon) against express-rate-limit's memory store.  The peers come from npm into a temporary
# folder.  Usage: bench/node/run.sh BUILD_DIR [ROUNDS]   (a Release build: build/release)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
rounds=${2:-5}
tmp=$(mktemp -d /tmp/rlt-node-bench.XXXXXX)
rpid=
trap '[ -n "$rpid" ] && kill $rpid; rm -rf "$tmp"' EXIT INT TERM
(cd "$tmp" && timeout 240 npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" \
   rate-limiter-flexible@11 ioredis@5 express@5 express-rate-limit@8 autocannon@8 >npm.log 2>&1) || { cat "$tmp/npm.log" >&2; exit 1; }
export RLT_NODE_ADDON="$build/node/ratelimit.node"
pkg="$here/../../node/index.js"
echo "== in-process, 1M random keys"
node --expose-gc "$here/inproc.mjs" "$tmp/node_modules" "$pkg" "$rounds" 1000000
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Our module loaded when built (ratelimit_module): RLF's calls are the same EVALSHA either way.
module=$build/src/redismodule/ratelimit.so
if [ -f "$module" ]; then load="--loadmodule $module"; MODULE=1; else load=; MODULE=0; fi
export MODULE
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no $load >/dev/null &
rpid=$!
sleep 0.5
echo "== through redis-server $(redis-server --version | grep -o 'v=[0-9.]*')${load:+, our module loaded}"
node "$here/redis.mjs" "$tmp/node_modules" "$pkg" "$port" "$rounds" 20000 16
echo "== express + autocannon"
node "$here/express.mjs" "$tmp/node_modules" "$pkg" "$rounds" 5
