#!/bin/bash
# bench/server/grpc-h2load.sh [RATELIMITD] [N]: ratelimitd's gRPC ShouldRateLimit driven by h2load
# (nghttp2-client) beside its RESP CL.THROTTLE driven by redis-benchmark, same daemon, same
# run, interleaved RUNS times (default 3); medians.
#   gRPC: 50 connections, -m 1 and -m 16 (concurrent streams per connection), N calls
#         (default 200000 for -m 1, 5x that for -m 16), a pre-encoded RateLimitRequest of one
#         descriptor whose rule is gcra 100/1m burst 101, the shape CL.THROTTLE k 100 100 60 has.
#   RESP: redis-benchmark -c 50 -r 1000000 -P 1 / -P 16 CL.THROTTLE key:__rand_int__ 100 100 60.
# h2load sends one body per process and cannot randomize it: the gRPC side runs P (default 10)
# h2load processes of 50/P connections each, process i with its own body, pre-encoded with
# descriptor values drawn at random from 1,000,000 (so P distinct keys per run, new ones each
# run; the RESP side draws a key per request).  What the gRPC figure measures is therefore the
# HTTP/2 + protobuf + envoy-matching path on a few hot keys; the store's cost of 1M random keys
# is in the RESP figure.  p99 comes from h2load's per-request log (--log-file) at -m 1; at -m 16
# the log would cost h2load a third of its rate on a 2-core machine, so the latency shown is
# h2load's mean (LOG16=1 logs and gives the p99).  Server CPU per call from /proc/PID/stat
# (user + system, all threads).  P=1: one h2load process (one key), the lightest client.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../../build/release/src/server/ratelimitd}")
n1=${2:-200000}
n16=$((n1 * 5))
runs=${RUNS:-3}
procs=${P:-10}
for t in h2load redis-benchmark python3; do
  command -v $t >/dev/null || { echo "needs $t (apt-get install nghttp2-client redis-tools python3)" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "no ratelimitd at $bin (build the release preset first)" >&2; exit 2; }
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
cat >"$tmp/rl.yaml" <<'YAML'
domain: bench
descriptors:
  - key: k
    rate_limit: {policy: "gcra:100/1m,burst=101"}
YAML
(cd "$tmp" && exec "$bin" --config rl.yaml --port 0 --http-port 0 --grpc-port 0 --no-snapshot \
   >out 2>err) &
pid=$!
for _ in $(seq 100); do grep -q grpc "$tmp/out" 2>/dev/null && break; sleep 0.05; done
resp=$(sed -E 's/.*resp [^:]+:([0-9]+).*/\1/' "$tmp/out")
grpc=$(sed -E 's/.*grpc [^:]+:([0-9]+).*/\1/' "$tmp/out")
url="http://127.0.0.1:$grpc/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# encode FILE VALUE: a gRPC-framed RateLimitRequest {domain "bench", descriptors [{entries
# [{key "k", value VALUE}]}]}, written by hand (field numbers as in src/server/grpc/proto/rls.proto).
encode() {
  python3 - "$1" "$2" <<'PY'
import sys
def ld(num, b): return bytes([num << 3 | 2, len(b)]) + b
entry = ld(1, b"k") + ld(2, sys.argv[2].encode())
msg = ld(1, b"bench") + ld(2, ld(1, entry))
open(sys.argv[1], "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
PY
}
# One real call first: the body must be answered grpc-status 0 with a status.
encode "$tmp/check.bin" 42
h2load -n 1 -c 1 -d "$tmp/check.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
  "$url" | grep -q "1 succeeded" || { echo "the check call failed" >&2; exit 1; }

# grpc_run M N: one gRPC measurement; prints "calls/s p99_ms cpu_us_per_call".
grpc_run() {
  local m=$1 n=$2 per=$(( $2 / procs )) conns=$(( 50 / procs ))
  for i in $(seq "$procs"); do encode "$tmp/b$i.bin" "v$((RANDOM * 32768 + RANDOM))"; done
  local t0 c0
  c0=$(cpu_ticks)
  t0=$(date +%s%N)
  for i in $(seq "$procs"); do
    # The per-request log costs h2load a third of its rate at -m 16: there, latency is h2load's
    # own mean (LOG16=1 logs anyway and gives the p99).
    local log=(--log-file="$tmp/log$i")
    [ "$m" -gt 1 ] && [ "${LOG16:-0}" != 1 ] && log=()
    h2load -n "$per" -c "$conns" -m "$m" -d "$tmp/b$i.bin" -H 'content-type: application/grpc' \
      -H 'te: trailers' "${log[@]}" "$url" >"$tmp/h2.$i" 2>&1 &
  done
  wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
  local t1 c1 ok
  t1=$(date +%s%N)
  c1=$(cpu_ticks)
  ok=$(cat "$tmp"/h2.* | awk '/requests:/ {s += $8} END {print s}')
  [ "$ok" -eq $((per * procs)) ] || { echo "h2load: $ok of $((per * procs)) succeeded" >&2; cat "$tmp/h2.1" >&2; exit 1; }
  local p99
  if ls "$tmp"/log* >/dev/null 2>&1; then
    p99=$(cat "$tmp"/log* | awk '{print $3}' | sort -n | awk '{v[NR]=$1} END {printf "%.3f", v[int(NR*0.99)]/1000}')
  else # "time for request:  min  max  mean  sd  +/- sd": the mean, in ms, marked
    p99=$(cat "$tmp"/h2.* | awk '/time for request:/ {v = $6; if (v ~ /us$/) x = v / 1000; else if (v ~ /ms$/) x = v + 0; else x = v * 1000; s += x; n++} END {printf "mean%.3f", s / n}')
  fi
  rm -f "$tmp"/log* "$tmp"/h2.*
  awk -v n="$ok" -v ns=$((t1 - t0)) -v t=$((c1 - c0)) -v hz="$hz" -v p="$p99" \
    'BEGIN { printf "%.0f %s %.2f\n", n / (ns / 1e9), p, t * 1e6 / hz / n }'
}
# resp_run P N: prints "req/s p99_ms cpu_us_per_req".
resp_run() {
  local c0 line
  c0=$(cpu_ticks)
  line=$(redis-benchmark -p "$resp" -c 50 -n "$2" -r 1000000 -P "$1" --csv \
    CL.THROTTLE key:__rand_int__ 100 100 60 2>/dev/null | tail -1)
  local c1
  c1=$(cpu_ticks)
  echo "$line" | awk -F'","' -v t=$((c1 - c0)) -v hz="$hz" -v n="$2" \
    '{ printf "%.0f %s %.2f\n", $2, $7, t * 1e6 / hz / n }'
}

declare -A rate p99 cpu
names=(g1 g16 r1 r16)
for r in $(seq "$runs"); do
  for c in "${names[@]}"; do
    case $c in
      g1) out=$(grpc_run 1 "$n1") ;;
      g16) out=$(grpc_run 16 "$n16") ;;
      r1) out=$(resp_run 1 "$n1") ;;
      r16) out=$(resp_run 16 "$n16") ;;
    esac
    read -r a b d <<<"$out"
    rate[$c]+="$a " p99[$c]+="$b " cpu[$c]+="$d "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sed 's/^mean//' | sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'; }
declare -A mr mp mc
for c in "${names[@]}"; do
  mr[$c]=$(echo "${rate[$c]}" | median)
  mp[$c]=$(echo "${p99[$c]}" | median)
  mc[$c]=$(echo "${cpu[$c]}" | median)
done
label() {
  case $1 in
    g1) echo "gRPC ShouldRateLimit, h2load -c 50 -m 1" ;;
    g16) echo "gRPC ShouldRateLimit, h2load -c 50 -m 16" ;;
    r1) echo "RESP CL.THROTTLE, redis-benchmark -c 50 -P 1" ;;
    r16) echo "RESP CL.THROTTLE, redis-benchmark -c 50 -P 16" ;;
  esac
}
echo
echo "$(basename "$bin") (default threads), $(nproc) CPUs, median of $runs interleaved runs; n=$n1 (-m 1/-P 1), $n16 (-m 16/-P 16)"
printf '%-48s %10s %8s %10s\n' "benchmark" "calls/s" "p99 ms" "srv us/call"
for c in "${names[@]}"; do
  lat=${mp[$c]}
  [[ ${p99[$c]} == mean* ]] && lat="${lat} (mean)"
  printf '%-48s %10.0f %8s %10s\n' "$(label "$c")" "${mr[$c]}" "$lat" "${mc[$c]}"
done
echo "runs (calls/s | p99 ms | srv us/call):"
for c in "${names[@]}"; do printf '  %-4s %s| %s| %s\n' "$c" "${rate[$c]}" "${p99[$c]}" "${cpu[$c]}"; done
half=$(awk -v g="${mr[g16]}" -v r="${mr[r16]}" 'BEGIN { printf "%.2f", g / r }')
echo "target -m 16 >= 0.5 x RESP -P 16: ${half}x ($(awk -v h="$half" 'BEGIN { print (h >= 0.5) ? "met" : "NOT met" }'))"
echo "target -m 1 p99 < 2 ms: ${mp[g1]} ms ($(awk -v p="${mp[g1]}" 'BEGIN { print (p < 2) ? "met" : "NOT met" }'))"
