#!/bin/bash
# bench/server/vs-redis.sh [RATELIMITD] [N]: ratelimitd's CL.THROTTLE against a real
# redis-server running a GCRA Lua script (the redis_rate/throttled approach, our own script),
# and against plain Redis INCR, driven by redis-benchmark (50 clients, random keys out of
# 1,000,000, unpipelined and -P 16); plus wrk against the HTTP check endpoint.  Prints one
# table.  Both servers run on this machine on ephemeral ports, no persistence.  Bounded:
# N requests per run (default 200000); the whole script takes well under 3 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../../build/release/src/server/ratelimitd}")
n=${2:-200000}
[ -x "$bin" ] || { echo "no ratelimitd at $bin (build the release preset first)" >&2; exit 2; }
for t in redis-server redis-cli redis-benchmark; do
  command -v $t >/dev/null || { echo "needs $t" >&2; exit 2; }
done
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rpid= dpid=
cleanup() {
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null || true
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  --dir "$tmp" >"$tmp/redis.log" 2>&1 & rpid=$!
(cd "$tmp" && exec "$bin" --port 0 --http-port 0 --no-snapshot >"$tmp/rl.out" 2>"$tmp/rl.err") & dpid=$!
for i in $(seq 100); do  # wait for both servers
  redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && grep -q resp "$tmp/rl.out" 2>/dev/null && break
  sleep 0.05
done
grep -q resp "$tmp/rl.out" || { echo "ratelimitd did not start: $(cat "$tmp/rl.err")" >&2; exit 1; }
dport=$(sed -E 's/.*resp [^:]+:([0-9]+).*/\1/' "$tmp/rl.out")
hport=$(sed -E 's/.*http [^:]+:([0-9]+).*/\1/' "$tmp/rl.out")

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

declare -A rps p99
run() { # name port pipeline args...
  local name=$1 port=$2 pipe=$3; shift 3
  local line
  line=$(redis-benchmark -p "$port" -c 50 -n "$n" -r 1000000 -P "$pipe" --csv "$@" 2>/dev/null | tail -1)
  # "test","rps","avg","min","p50","p95","p99","max"
  rps[$name]=$(echo "$line" | awk -F'","' '{print $2}')
  p99[$name]=$(echo "$line" | awk -F'","' '{print $7}')
}
run lua1 "$rport" 1 EVALSHA "$sha" 1 key:__rand_int__ 100 100 60 1
run lua16 "$rport" 16 EVALSHA "$sha" 1 key:__rand_int__ 100 100 60 1
run incr1 "$rport" 1 INCR key:__rand_int__
run incr16 "$rport" 16 INCR key:__rand_int__
run rl1 "$dport" 1 CL.THROTTLE key:__rand_int__ 100 100 60
run rl16 "$dport" 16 CL.THROTTLE key:__rand_int__ 100 100 60

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
printf '\n%-44s %12s %10s %12s\n' "benchmark (50 clients, 1M random keys, n=$n)" "req/s" "p99 ms" "rl ratio"
printf '%-44s %12s %10s %12s\n' "redis-server + Lua GCRA (EVALSHA), -P 1" "${rps[lua1]}" "${p99[lua1]}" "$(ratio "${rps[rl1]}" "${rps[lua1]}")"
printf '%-44s %12s %10s %12s\n' "redis-server + Lua GCRA (EVALSHA), -P 16" "${rps[lua16]}" "${p99[lua16]}" "$(ratio "${rps[rl16]}" "${rps[lua16]}")"
printf '%-44s %12s %10s %12s\n' "redis-server INCR, -P 1" "${rps[incr1]}" "${p99[incr1]}" "$(ratio "${rps[rl1]}" "${rps[incr1]}")"
printf '%-44s %12s %10s %12s\n' "redis-server INCR, -P 16" "${rps[incr16]}" "${p99[incr16]}" "$(ratio "${rps[rl16]}" "${rps[incr16]}")"
printf '%-44s %12s %10s %12s\n' "ratelimitd CL.THROTTLE, -P 1" "${rps[rl1]}" "${p99[rl1]}" "1.00x"
printf '%-44s %12s %10s %12s\n' "ratelimitd CL.THROTTLE, -P 16" "${rps[rl16]}" "${p99[rl16]}" "1.00x"

if command -v wrk >/dev/null; then
  cat >"$tmp/rand.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/check?key=k" .. math.random(1, 1000000) .. "&policy=gcra:100/1m")
end
LUA
  w=$(wrk -t2 -c50 -d5s --latency -s "$tmp/rand.lua" "http://127.0.0.1:$hport/" 2>&1)
  wr=$(echo "$w" | awk '/Requests\/sec/ {print $2}')
  wp=$(echo "$w" | awk '$1 == "99%" {print $2}')
  printf '%-44s %12s %10s %12s\n' "ratelimitd HTTP /v1/check (wrk -t2 -c50 5s)" "$wr" "$wp" "-"
fi
