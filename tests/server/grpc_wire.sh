#!/bin/sh
# Wire compatibility with Envoy's own rls.proto and rlqs.proto: installs npm @grpc/grpc-js,
# @grpc/proto-loader and @grpc/grpc-js-xds (which ships the upstream envoy-api protos) into a temporary folder,
# starts ratelimitd on ephemeral ports and runs grpc_wire.js and rlqs_wire.js against it.
# Usage: grpc_wire.sh PATH_TO_RATELIMITD.  Exit 77 (skipped, with a message) only when the npm
# registry cannot be reached; a missing node or npm is a failure naming it.
set -eu
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "grpc_wire: node is missing (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "grpc_wire: npm is missing (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rlt-wire.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
if ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "SKIPPED grpc_wire: the npm registry is unreachable, wire compatibility with Envoy's rls.proto NOT tested" >&2
  exit 77
fi
(cd "$tmp" && timeout 240 npm install --no-audit --no-fund --loglevel=error \
   @grpc/grpc-js @grpc/proto-loader @grpc/grpc-js-xds >npm.log 2>&1) ||
  { cat "$tmp/npm.log" >&2; echo "grpc_wire: npm install failed" >&2; exit 1; }
cat >"$tmp/rl.yaml" <<'YAML'
domain: wire
descriptors:
  - key: k
    rate_limit: {name: wire_rule, unit: minute, requests_per_unit: 3}
quota_buckets:
  - match: {name: web}
    policy: token_bucket:100/1s,burst=20
  - match: {name: blocked}
    blanket: deny_all
YAML
"$bin" --config "$tmp/rl.yaml" --port 0 --http-port 0 --grpc-port 0 --no-snapshot \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
i=0
while ! grep -q "grpc " "$tmp/out" 2>/dev/null; do
  i=$((i + 1))
  [ $i -gt 200 ] && { cat "$tmp/err" >&2; echo "grpc_wire: the daemon did not start" >&2; exit 1; }
  sleep 0.05
done
port=$(sed -n 's/.* grpc [^ ]*:\([0-9]*\).*/\1/p' "$tmp/out")
node "$here/grpc_wire.js" "$tmp/node_modules" "$port"
node "$here/rlqs_wire.js" "$tmp/node_modules" "$port"
