#!/usr/bin/env bash
# The command-line shapes that scripts and other tools parse, checked from inside the checkout:
# `ratelimit replay`'s eight fields per line (plain decimals, no trailing zeros), a malformed
# line refused, `ratelimit bench`'s last line, and ratelimitd's flags with CL.THROTTLE's five
# integers.  Usage: shapes.sh RATELIMIT RATELIMITD
set -uo pipefail
rl=$1 d=$2
fail=0
bad() { echo "FAIL: $*"; fail=1; }
out=$(printf '0 a 1\n0.5 a 2\n1 b\n' | "$rl" replay --policy gcra:2/1s,burst=2 --unit s) || bad "replay failed"
n=0
while read -r t k c verdict rem retry reset delay extra; do
  case $t in '#'* | '') continue ;; esac
  n=$((n + 1))
  [ -z "$extra" ] && [ -n "$delay" ] || bad "replay: not 8 fields: $t $k $c $verdict $rem $retry $reset $delay $extra"
  case $verdict in allow | deny) ;; *) bad "replay: verdict '$verdict'" ;; esac
  for x in "$t" "$c" "$rem" "$retry" "$reset" "$delay"; do
    [[ $x =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || bad "replay: not a plain decimal: $x"
    [[ $x == *.*0 ]] && bad "replay: trailing zero kept: $x"
  done
done <<<"$out"
[ "$n" = 3 ] || bad "replay: $n lines for 3 requests"
printf '0 a 1\nnot-a-time a 1\n' | "$rl" replay --policy gcra:2/1s >/dev/null 2>&1 \
  && bad "replay: a malformed line accepted"
last=$("$rl" bench --policy gcra:100/1s --keys 1000 --threads 1 --seconds 1 2>/dev/null | tail -1)
[[ $last =~ ^decisions_per_sec=[0-9.]+\ ns_per_decision=[0-9.]+\ bytes_per_key=[0-9.]+$ ]] \
  || bad "bench: last line: $last"
tmp=$(mktemp -d)
"$d" --port 0 --http-port 0 --grpc-port 0 --bind 127.0.0.1 --no-snapshot >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^ratelimitd: resp [^ ]*:\([0-9]*\) http .*/\1/p' "$tmp/out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || bad "ratelimitd: no start line 'ratelimitd: resp ADDR:PORT http ...'"
r=$(redis-cli -p "$port" CL.THROTTLE shapes 5 10 60 1 | tr '\n' ' ')
[[ $r =~ ^-?[0-9]+\ -?[0-9]+\ -?[0-9]+\ -?[0-9]+\ -?[0-9]+\ $ ]] || bad "CL.THROTTLE: $r"
[ $fail = 0 ] && echo "ok   command_line_shapes_hold"
exit $fail
