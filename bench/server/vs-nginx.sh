#!/usr/bin/env bash
# ratelimitd's HTTP /v1/check against nginx limit_req, side by side in one run (issue: HTTP at
# least 1.0x limit_req).  nginx: one worker pinned to CPU 1, limit_req keyed on X-RL-Key over
# 1M random keys, serving a 3-byte file (../shared/anchors/nginx-limit-req.conf, port 18083);
# ratelimitd: --threads 1 pinned to CPU 1, /v1/check?key=k<n> with the same 1M keys (its
# default policy gcra:1000/1s, every request passes).  wrk on CPU 0, 50 connections,
# interleaved ROUNDS times; prints each run, the medians and the ratio.
#   bench/server/vs-nginx.sh [BUILD_DIR] (default build/release; ROUNDS=3 SECONDS_EACH=5)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
A=../shared/anchors
rounds=${ROUNDS:-3}
secs=${SECONDS_EACH:-5}
for t in nginx wrk taskset; do
  command -v $t >/dev/null || { echo "vs-nginx: needs $t (apt-get install nginx wrk util-linux)"; exit 1; }
done
P=$(mktemp -d); chmod 755 "$P"
mkdir -p "$P/logs" "$P/tmp" "$P/www"; echo ok > "$P/www/index.html"
sed "s|PREFIX|$P|g" $A/nginx-limit-req.conf > "$P/nginx.conf"
nginx -p "$P/" -c nginx.conf
port=18190
taskset -c 1 "$build/src/server/ratelimitd" --threads 1 --no-snapshot --port -1 --grpc-port -1 \
  --http-port $port >"$P/rld.out" 2>"$P/rld.err" &
rld=$!
trap 'kill $rld 2>/dev/null; nginx -p "$P/" -c nginx.conf -s stop 2>/dev/null; sleep 0.3; rm -rf "$P"' EXIT
for _ in $(seq 50); do grep -q "http" "$P/rld.out" 2>/dev/null && break; sleep 0.1; done
rps() { # URL [query]: requests/s of one wrk run; fails on non-2xx or socket errors
  local out
  out=$(taskset -c 0 wrk -t1 -c50 -d"${secs}s" -s $A/randkey.lua "$1" ${2:+-- $2})
  if echo "$out" | grep -qE "Non-2xx|Socket errors"; then echo "vs-nginx: errors: $out" >&2; exit 1; fi
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}
# Warm both (the first passes over the 1M keys create most of the states: 10 s each).
secs=10 rps "http://127.0.0.1:$port/" query >/dev/null
secs=10 rps http://127.0.0.1:18083/index.html >/dev/null
ours=() peer=()
for r in $(seq "$rounds"); do
  a=$(rps "http://127.0.0.1:$port/" query); ours+=("$a")
  b=$(rps http://127.0.0.1:18083/index.html); peer+=("$b")
  echo "round $r: ratelimitd /v1/check $a req/s, nginx limit_req $b req/s"
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mo=$(med "${ours[@]}"); mp=$(med "${peer[@]}")
echo "median: ratelimitd $mo req/s, nginx limit_req $mp req/s, ratio $(awk -v a="$mo" -v b="$mp" 'BEGIN {printf "%.2f", a/b}')x"
