#!/bin/bash
# bench/server/vs-redis.sh [RATELIMITD] [N1] [N16]: ratelimitd's CL.THROTTLE against a real
# redis-server running a GCRA Lua script (the redis_rate/throttled approach, our own script)
# and against plain Redis INCR, all driven by redis-benchmark (50 clients, random keys out of
# 1,000,000), unpipelined (N1 requests, default 200000) and with -P 16 (N16, default 1000000).
# ratelimitd runs twice: with --threads 1 (like single-threaded Redis, leaving the other core
# to redis-benchmark) and with its default (one worker per core).  Every configuration runs
# RUNS times (default 3), interleaved round-robin so that a burst of load from elsewhere on a
# shared machine hits all of them alike; the table shows the median req/s and the median p99,
# with ratios to Redis+Lua GCRA and to Redis INCR at the same pipeline depth.  Then one wrk run
# against the HTTP check endpoint.  Takes about 1.5-2.5 minutes on 2 cores.
#
# Environment: RUNS=3; BASE=/path/to/another/ratelimitd adds that binary (--threads 1) to the
# same interleaved rounds, for a before/after comparison that shares the machine's noise;
# PIN=1 pins each server to the last CPU and redis-benchmark to the first
# (taskset; --threads 1 daemon and Redis alike; the default-threads daemon stays unpinned).
# Off by default: on a machine shared with other work, a pinned process cannot move away from
# a busy core, and that hurt both sides in our measurements (docs/performance.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../../build/release/src/server/ratelimitd}")
n1=${2:-200000}
n16=${3:-1000000}
runs=${RUNS:-3}
pin=${PIN:-0}
base=${BASE:+$(realpath "$BASE")}
[ -x "$bin" ] || { echo "no ratelimitd at $bin (build the release preset first)" >&2; exit 2; }
for t in redis-server redis-cli redis-benchmark python3; do
  command -v $t >/dev/null || { echo "needs $t" >&2; exit 2; }
done
ncpu=$(nproc)
srv_pin=() cli_pin=()
if [ "$pin" = 1 ]; then
  command -v taskset >/dev/null || { echo "PIN=1 needs taskset" >&2; exit 2; }
  srv_pin=(taskset -c $((ncpu - 1))) cli_pin=(taskset -c 0)
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

rport=$(free_port)
"${srv_pin[@]}" redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
pids+=($!)
pid_redis=$!
# start_daemon NAME ARGS...: starts ratelimitd in its own dir; sets port_NAME and http_NAME.
start_daemon() {
  local name=$1; shift
  mkdir -p "$tmp/$name"
  # (an older binary, BASE, may predate gRPC: only a daemon that knows --grpc-port gets it)
  local grpc=() a
  for a in "$@"; do
    case "$a" in */ratelimitd) "$a" --help 2>/dev/null | grep -q -- --grpc-port && grpc=(--grpc-port 0) ;; esac
  done
  (cd "$tmp/$name" && exec "$@" --port 0 --http-port 0 "${grpc[@]}" --no-snapshot >out 2>err) &
  pids+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 100); do grep -q resp "$tmp/$name/out" 2>/dev/null && break; sleep 0.05; done
  grep -q resp "$tmp/$name/out" || { echo "ratelimitd did not start: $(cat "$tmp/$name/err")" >&2; exit 1; }
  eval "port_$name=$(sed -E 's/.*resp [^:]+:([0-9]+).*/\1/' "$tmp/$name/out")"
  eval "http_$name=$(sed -E 's/.*http [^:]+:([0-9]+).*/\1/' "$tmp/$name/out")"
}
start_daemon t1 "${srv_pin[@]}" "$bin" --threads 1
start_daemon tn "$bin"
[ -n "$base" ] && start_daemon base "${srv_pin[@]}" "$base" --threads 1
for _ in $(seq 100); do redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && break; sleep 0.05; done

# GCRA in Lua, CL.THROTTLE-shaped: KEYS[1]; ARGV max_burst count period quantity.
# Reply {limited, limit, remaining, retry_after_s, reset_after_s}, TAT kept in ms.
read -r -d '' lua <<'LUA' || true
local burst = tonumber(ARGV[1]) + 1
local interval = tonumber(ARGV[3]) * 1000 / tonumber(ARGV[2])
local qty = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + qty * interval
local allow_at = new_tat - burst * interval
if now < allow_at then
  return {1, burst, math.floor((burst * interval - (tat - now)) / interval), math.ceil((allow_at - now) / 1000), math.ceil((tat - now) / 1000)}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(new_tat - now))
return {0, burst, math.floor((burst * interval - (new_tat - now)) / interval), -1, math.ceil((new_tat - now) / 1000)}
LUA
sha=$(redis-cli -p "$rport" SCRIPT LOAD "$lua")

# Configurations: name, port, pipeline depth, command.
names=(lua1 lua16 incr1 incr16 t1_1 t1_16 tn_1 tn_16)
declare -A port pipe cmd label spid
conf() { local k=$1; port[$k]=$2; pipe[$k]=$3; label[$k]=$4; shift 4; cmd[$k]="$*"; }
conf lua1 "$rport" 1 "Redis + Lua GCRA (EVALSHA), -P 1" EVALSHA "$sha" 1 key:__rand_int__ 100 100 60 1
conf lua16 "$rport" 16 "Redis + Lua GCRA (EVALSHA), -P 16" EVALSHA "$sha" 1 key:__rand_int__ 100 100 60 1
conf incr1 "$rport" 1 "Redis INCR, -P 1" INCR key:__rand_int__
conf incr16 "$rport" 16 "Redis INCR, -P 16" INCR key:__rand_int__
tn_threads=$ncpu
conf t1_1 "$port_t1" 1 "ratelimitd --threads 1, CL.THROTTLE, -P 1" CL.THROTTLE key:__rand_int__ 100 100 60
conf t1_16 "$port_t1" 16 "ratelimitd --threads 1, CL.THROTTLE, -P 16" CL.THROTTLE key:__rand_int__ 100 100 60
conf tn_1 "$port_tn" 1 "ratelimitd default ($tn_threads thr), CL.THROTTLE, -P 1" CL.THROTTLE key:__rand_int__ 100 100 60
conf tn_16 "$port_tn" 16 "ratelimitd default ($tn_threads thr), CL.THROTTLE, -P 16" CL.THROTTLE key:__rand_int__ 100 100 60
if [ -n "$base" ]; then
  names+=(base_1 base_16)
  conf base_1 "$port_base" 1 "BASE --threads 1, CL.THROTTLE, -P 1" CL.THROTTLE key:__rand_int__ 100 100 60
  conf base_16 "$port_base" 16 "BASE --threads 1, CL.THROTTLE, -P 16" CL.THROTTLE key:__rand_int__ 100 100 60
fi

for c in lua1 lua16 incr1 incr16; do spid[$c]=$pid_redis; done
for c in t1_1 t1_16; do spid[$c]=$pid_t1; done
for c in tn_1 tn_16; do spid[$c]=$pid_tn; done
[ -n "$base" ] && for c in base_1 base_16; do spid[$c]=$pid_base; done
# CPU time (user + system, all threads, in clock ticks) a server has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

declare -A rps p99 cpu
for r in $(seq "$runs"); do
  for c in "${names[@]}"; do
    n=$n1; [ "${pipe[$c]}" = 16 ] && n=$n16
    t0=$(cpu_ticks "${spid[$c]}")
    # shellcheck disable=SC2086  # cmd[] holds the words of the command
    line=$("${cli_pin[@]}" redis-benchmark -p "${port[$c]}" -c 50 -n "$n" -r 1000000 \
      -P "${pipe[$c]}" --csv ${cmd[$c]} 2>/dev/null | tail -1)
    # "test","rps","avg","min","p50","p95","p99","max"
    rps[$c]+="$(echo "$line" | awk -F'","' '{print $2}') "
    p99[$c]+="$(echo "$line" | awk -F'","' '{print $7}') "
    # the server's CPU per request, in microseconds
    cpu[$c]+="$(awk -v t="$(($(cpu_ticks "${spid[$c]}") - t0))" -v hz="$hz" -v n="$n" \
      'BEGIN { printf "%.2f", t * 1e6 / hz / n }') "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'; }
declare -A mr mp mc
for c in "${names[@]}"; do
  mr[$c]=$(echo "${rps[$c]}" | median)
  mp[$c]=$(echo "${p99[$c]}" | median)
  mc[$c]=$(echo "${cpu[$c]}" | median)
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

echo
echo "$(redis-server --version | awk '{print $1, $2, $3}') vs $(basename "$bin"); $ncpu CPUs; median of $runs interleaved runs;"
echo "redis-benchmark -c 50 -r 1000000, n=$n1 (-P 1) / $n16 (-P 16); pinning: $([ "$pin" = 1 ] && echo "servers on CPU $((ncpu - 1)), client on CPU 0" || echo off)"
printf '\n%-50s %9s %7s %10s %7s %8s %10s\n' "benchmark" "req/s" "p99 ms" "/ Lua GCRA" "/ INCR" \
  "srv us/r" "CPU / Lua"
for c in "${names[@]}"; do
  d=${pipe[$c]}
  if [[ $c == lua* || $c == incr* ]]; then
    printf '%-50s %9.0f %7s %10s %7s %8s %10s\n' "${label[$c]}" "${mr[$c]}" "${mp[$c]}" "" "" \
      "${mc[$c]}" ""
  else
    printf '%-50s %9.0f %7s %10s %7s %8s %10s\n' "${label[$c]}" "${mr[$c]}" "${mp[$c]}" \
      "$(ratio "${mr[$c]}" "${mr[lua$d]}")" "$(ratio "${mr[$c]}" "${mr[incr$d]}")" "${mc[$c]}" \
      "$(ratio "${mc[lua$d]}" "${mc[$c]}")"
  fi
done
echo "(srv us/r: the server process's CPU time, user + system, all threads, per request;"
echo " CPU / Lua: how many times less server CPU a decision takes than Redis+Lua's.)"
if [ -n "$base" ]; then
  echo "BASE = $base"
  for d in 1 16; do
    echo "  -P $d: $(basename "$bin") --threads 1 / BASE: req/s $(ratio "${mr[t1_$d]}" "${mr[base_$d]}"), server CPU per request $(ratio "${mc[t1_$d]}" "${mc[base_$d]}")"
  done
fi
echo
echo "runs (req/s | srv us/r):"
for c in "${names[@]}"; do printf '  %-6s %s| %s\n' "$c" "${rps[$c]}" "${cpu[$c]}"; done

# Issue 5's targets, for both daemon configurations.
echo
for t in t1 tn; do
  x=$(awk -v a="${mr[${t}_16]}" -v b="${mr[lua16]}" 'BEGIN { printf "%.1f", a / b }')
  m1=$(awk -v a="${mr[${t}_16]}" -v b="${mr[lua16]}" 'BEGIN { print (a >= 10 * b) ? "met" : "NOT met" }')
  m2=$(awk -v a="${mr[${t}_1]}" -v b="${mr[incr1]}" -v pa="${mp[${t}_1]}" -v pb="${mp[incr1]}" \
    'BEGIN { print (a >= b && pa <= pb) ? "met" : "NOT met" }')
  echo "${label[${t}_16]%%,*}: -P 16 = ${x}x Lua GCRA (target 10x: $m1); -P 1 vs INCR: $(ratio "${mr[${t}_1]}" "${mr[incr1]}"), p99 ${mp[${t}_1]} vs ${mp[incr1]} ms (target >= and p99 <=: $m2)"
done

if command -v wrk >/dev/null; then
  cat >"$tmp/rand.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/check?key=k" .. math.random(1, 1000000) .. "&policy=gcra:100/1m")
end
LUA
  w=$(wrk -t2 -c50 -d5s --latency -s "$tmp/rand.lua" "http://127.0.0.1:$http_tn/" 2>&1)
  wr=$(echo "$w" | awk '/Requests\/sec/ {print $2}')
  wp=$(echo "$w" | awk '$1 == "99%" {print $2}')
  echo
  echo "ratelimitd default threads, HTTP /v1/check (wrk -t2 -c50 -d5s, one run): $wr req/s, p99 $wp"
fi
