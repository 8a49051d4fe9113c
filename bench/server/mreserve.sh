#!/bin/bash
# bench/server/mreserve.sh [BUILD] [ROUNDS] [N]: a 3-limit reservation and its settle
# (RL.MRESERVE / RL.MSETTLE) against a single RL.RESERVE / RL.SETTLE in one release daemon
# (--threads 1, a free port, no snapshot, the limits' policy named in its config), one pipelined connection, interleaved rounds,
# medians and ratios (bench_mreserve).  REDIS=HOST:PORT in the environment: the daemon in Redis
# mode on that Redis (the reservations kept there, lua/budget.lua).  Build first: cmake --preset release && cmake --build
# --preset release -j2.
set -euo pipefail
build=$(realpath "${1:-build/release}")
rounds=${2:-7} n=${3:-20000}
bin=$build/src/server/ratelimitd bench=$build/bench/server/bench_mreserve
[ -x "$bin" ] && [ -x "$bench" ] || { echo "build the release preset first ($bin, $bench)" >&2; exit 2; }
tmp=$(mktemp -d)
printf 'policies:\n  tokens: fixed_window:1000000000000/1000d\n' >"$tmp/ratelimitd.yaml"
[ -z "${REDIS:-}" ] || printf 'redis:\n  address: "%s"\n  timeout: 2s\n' "$REDIS" >>"$tmp/ratelimitd.yaml"
"$bin" --config "$tmp/ratelimitd.yaml" --port 0 --http-port -1 --grpc-port -1 --threads 1 \
  --no-snapshot >"$tmp/out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
  port=$(sed -n 's/.*resp [^ ]*:\([0-9]*\).*/\1/p' "$tmp/out")
  [ -n "$port" ] && break
  sleep 0.05
done
echo "$(date -u +%F) load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bench" "$port" "$rounds" "$n" 32
