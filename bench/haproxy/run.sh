#!/usr/bin/env bash
# HAProxy with ratelimitd's SPOE agent against the same HAProxy with a local stick-table
# http_req_rate limit, side by side in one run (docs/performance.md, issue 40: at least 0.8x
# the requests/s; the agent's added p99 under 50 us; address keys at least 0.97x plain keys).
# One HAProxy per variant (nbthread 1) and ratelimitd (--threads 1) share CPU 1, wrk runs on
# CPU 0.  Every variant answers 200 itself (http-request return: no backend), keyed on 1M
# random keys (keys.lua) under limits no request reaches:
#   stick     stick-table http_req_rate(1s) on X-Key, deny over 10^9
#   agent     SPOE: key=X-Key, policy gcra:1000000000/1s
#   agentaddr SPOE: addr=X-Client (IPv6, each key its own /56), same policy
#   agentlong SPOE: key=X-Long, a plain key as long as agentaddr's (what the longer key costs
#             the store and the frame, apart from making it from an address)
# Throughput: wrk -c50, ROUNDS interleaved rounds of SECONDS_EACH s, medians.  Latency: wrk
# -c1 --latency (one request in flight: no queueing), p99 medians; the agent's added p99 is
# agent's minus stick's.  Less sensitive to a busy machine, for each agent variant and round:
# the daemon's CPU time per request (its threads' /proc schedstat run time over wrk's request
# count: what the daemon spends, whatever else runs), and the agent's own service time per
# NOTIFY from its /metrics histogram (ratelimitd_spop_notify_seconds: frame read to ACK queued),
# its mean (sum/count) and the bucket bound of its p99.
#   bench/haproxy/run.sh [BUILD_DIR] (default build/release; ROUNDS=5 SECONDS_EACH=5 KEYS=1000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
rounds=${ROUNDS:-5}
secs=${SECONDS_EACH:-5}
for t in haproxy wrk taskset python3; do
  command -v $t >/dev/null || { echo "bench/haproxy: needs $t (scripts/deps --bench)"; exit 1; }
done
T=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; done; sleep 0.3; rm -rf "$T"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
spop=$(free_port)
http=$(free_port)
taskset -c 1 "$build/src/server/ratelimitd" --threads 1 --no-snapshot --port -1 --http-port "$http" \
  --grpc-port -1 --spop-port "$spop" >"$T/rld.out" 2>"$T/rld.err" &
rld=$!
pids+=($rld)
for _ in $(seq 50); do grep -q spop "$T/rld.out" 2>/dev/null && break; sleep 0.1; done
head() { # NAME PORT: the global and frontend lines every variant shares
  printf 'global\n    nbthread 1\n    maxconn 2000\ndefaults\n    mode http\n    timeout connect 1s\n'
  printf '    timeout client 30s\n    timeout server 30s\nfrontend %s\n    bind 127.0.0.1:%s\n' "$1" "$2"
}
spoe() { # ARGS: the SPOE file of the agent variants
  printf '[rl]\nspoe-agent rl\n    groups check\n    option var-prefix rl\n    option set-on-error error\n'
  printf '    timeout hello 2s\n    timeout idle 30s\n    timeout processing 1s\n    use-backend rl\n'
  printf 'spoe-message check\n    args %s policy=str(gcra:1000000000/1s)\nspoe-group check\n    messages check\n' "$1"
}
declare -A port
for v in stick agent agentaddr agentlong; do
  port[$v]=$(free_port)
  {
    head $v "${port[$v]}"
    if [ $v = stick ]; then
      echo "    stick-table type string len 32 size 2m expire 10s store http_req_rate(1s)"
      echo "    http-request track-sc0 req.hdr(X-Key)"
      echo "    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 1000000000 }"
    else
      echo "    filter spoe engine rl config $T/$v.spoe"
      echo "    http-request send-spoe-group rl check"
      echo "    http-request deny deny_status 429 if { var(txn.rl.allowed) -m int 0 }"
      echo "    http-request deny deny_status 500 if !{ var(txn.rl.allowed) -m found }"
    fi
    echo "    http-request return status 200 content-type text/plain string ok"
    [ $v = stick ] || printf 'backend rl\n    mode tcp\n    server rl1 127.0.0.1:%s\n' "$spop"
  } >"$T/$v.cfg"
  [ $v = agent ] && spoe "key=req.hdr(X-Key)" >"$T/$v.spoe"
  [ $v = agentaddr ] && spoe "addr=req.hdr(X-Client)" >"$T/$v.spoe"
  [ $v = agentlong ] && spoe "key=req.hdr(X-Long)" >"$T/$v.spoe"
  taskset -c 1 haproxy -db -f "$T/$v.cfg" >"$T/$v.log" 2>&1 &
  pids+=($!)
done
sleep 1
run() { # VARIANT CONNS [--latency]: wrk's output; fails on non-2xx or socket errors
  local out
  out=$(taskset -c 0 wrk -t1 -c"$2" -d"${secs}s" ${3:-} -s bench/haproxy/keys.lua "http://127.0.0.1:${port[$1]}/")
  if echo "$out" | grep -qE "Non-2xx|Socket errors"; then echo "bench/haproxy: $1: $out" >&2; exit 1; fi
  echo "$out"
}
cpu_ns() { cat /proc/$rld/task/*/schedstat | awk '{n += $1} END {printf "%.0f", n}'; }
spop_hist() { # the histogram's cumulative bucket counts, then its sum (ns) and count
  curl -s "http://127.0.0.1:$http/metrics" | awk '/^ratelimitd_spop_notify_seconds_bucket/ {
    printf "%s ", $2} /^ratelimitd_spop_notify_seconds_sum/ {printf "%.0f ", $2 * 1e9}
    /^ratelimitd_spop_notify_seconds_count/ {print $2}'
}
rps() { # "req/s" of VARIANT; for the agents also the daemon's CPU ns per request (a file)
  local c0 c1 out
  c0=$(cpu_ns)
  out=$(run "$1" 50)
  c1=$(cpu_ns)
  local n; n=$(echo "$out" | awk '/requests in/ {print $1}')
  [ "$1" = stick ] || echo "$(( (c1 - c0) / n ))" >>"$T/$1.cpu"
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}
svc() { # after VARIANT's one-connection run: the NOTIFYs' mean service time (ns) and p99
  # bucket bound (us) between the histograms h0 and h1, into a file
  [ "$1" = stick ] && return
  echo "$h0 / $h1" | awk '{m = (NF - 1) / 2; for (i = 1; i <= m; i++) d[i] = $(m + 1 + i) - $i
      cnt = d[m]; printf "%.0f ", d[m - 1] / cnt
      for (i = 1; i < m - 2; i++) if (d[i] * 100 >= cnt * 99) {printf "%d\n", 2 ^ (i - 1); exit}
      print "inf"}' >>"$T/$1.svc"
}
lat() { # "p50 p99" in us
  h0=$(spop_hist)
  run "$1" 1 --latency >"$T/lat.out"
  h1=$(spop_hist)
  svc "$1"
  <"$T/lat.out" awk '$1 == "50%" || $1 == "99%" {v=$2; u=v; sub(/[0-9.]+/, "", u);
    sub(/[a-z]+/, "", v); printf "%s ", (u == "ms" ? v * 1000 : u == "s" ? v * 1e6 : v)}'
}
for v in stick agent agentaddr agentlong; do secs=3 rps $v >/dev/null; done # warm: states created
rm -f "$T"/*.cpu "$T"/*.svc
declare -A R L M C S P
for r in $(seq "$rounds"); do
  line="round $r:"
  for v in stick agent agentaddr agentlong; do
    a=$(rps $v); R[$v]="${R[$v]:-} $a"; line="$line $v $a req/s"
  done
  for v in stick agent agentaddr; do
    read -r m l <<<"$(lat $v)"; M[$v]="${M[$v]:-} $m"; L[$v]="${L[$v]:-} $l"
    line="$line, $v p50/p99 ${m}/${l}us"
  done
  echo "$line"
done
med() { printf '%s\n' $@ | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s=$(med ${R[stick]}); a=$(med ${R[agent]}); d=$(med ${R[agentaddr]})
ls=$(med ${L[stick]}); la=$(med ${L[agent]}); ld=$(med ${L[agentaddr]})
ms=$(med ${M[stick]}); ma=$(med ${M[agent]}); md=$(med ${M[agentaddr]})
echo "median req/s: stick-table $s, agent $a, agent with address keys $d"
echo "median p50/p99 (1 connection): stick-table ${ms}/${ls}us, agent ${ma}/${la}us, address keys ${md}/${ld}us"
for v in agent agentaddr agentlong; do
  C[$v]=$(med $(cat "$T/$v.cpu")); echo "$v: daemon CPU per request, rounds: $(tr '\n' ' ' <"$T/$v.cpu")ns"
done
for v in agent agentaddr; do
  S[$v]=$(med $(awk '{print $1}' "$T/$v.svc")); P[$v]=$(med $(awk '{print $2}' "$T/$v.svc"))
  echo "$v: NOTIFY service mean/p99-bucket at 1 connection, rounds: $(awk '{printf "%s/<=%sus ", $1, $2}' "$T/$v.svc")"
done
echo "median daemon CPU per request: agent ${C[agent]} ns, address keys ${C[agentaddr]} ns, plain keys of that length ${C[agentlong]} ns (address/plain throughput by CPU: $(awk -v a="${C[agent]}" -v d="${C[agentaddr]}" 'BEGIN {printf "%.3f", a / d}')x; address/plain of the same length: $(awk -v a="${C[agentlong]}" -v d="${C[agentaddr]}" 'BEGIN {printf "%.3f", a / d}')x)"
paste "$T/agent.cpu" "$T/agentaddr.cpu" "$T/agentlong.cpu" | awk '{printf "%.3f %.3f\n", $1 / $2, $3 / $2}' >"$T/pair"
echo "per-round paired ratios by CPU, medians: address/plain $(med $(awk '{print $1}' "$T/pair"))x, address/same-length plain $(med $(awk '{print $2}' "$T/pair"))x"
echo "median NOTIFY service time (frame read to ACK queued): agent mean ${S[agent]} ns, p99 <= ${P[agent]} us; address keys mean ${S[agentaddr]} ns, p99 <= ${P[agentaddr]} us"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v s="$s" -v a="$a" -v d="$d" -v ls="$ls" -v la="$la" -v ms="$ms" -v ma="$ma" 'BEGIN {
  printf "agent / stick-table: %.2fx (goal >= 0.8x); address keys / plain keys: %.3fx (goal >= 0.97x); agent added p50 %.0f us, p99 %.0f us (goal < 50 us)\n", a / s, d / a, ma - ms, la - ls }'
