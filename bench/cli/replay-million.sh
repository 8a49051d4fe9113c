#!/bin/bash
# replay-million.sh [RATELIMIT] [LINES]: generates a LINES-line trace (default 1,000,000; 10,000
# keys, one request every 0.001 s, costs 1-3) and times `ratelimit replay` over it for a few
# policies, per-line output and --summary.  Needs a Release build for meaningful figures:
#   cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release && cmake --build build/release -j2
#   bash bench/cli/replay-million.sh build/release/src/cli/ratelimit
set -eu
rl=${1:-build/release/src/cli/ratelimit}
lines=${2:-1000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Deterministic trace: TIME (s, ms steps) KEY COST.
awk -v n="$lines" 'BEGIN { x = 1; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648;
  printf "%d.%03d k%d %d\n", i / 1000, i % 1000, int(x / 65536) % 10000, 1 + int(x / 65536) % 3 } }' >"$tmp/trace"
echo "trace: $lines lines, $(wc -c <"$tmp/trace") bytes"
for args in "--policy gcra:100/1s" "--policy sliding_log:100/1m" "--policy leaky_bucket:10/1s,queue=20" \
            "--policy token_bucket:100/1s --summary"; do
  # shellcheck disable=SC2086
  start=$(date +%s%N)
  "$rl" replay $args <"$tmp/trace" >"$tmp/out"
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  echo "replay $args: ${ms} ms ($(( lines * 1000 / (ms > 0 ? ms : 1) )) lines/s), $(wc -l <"$tmp/out") output lines"
done
