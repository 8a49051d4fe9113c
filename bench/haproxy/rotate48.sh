#!/usr/bin/env bash
# An attacker rotating addresses inside one /48, at scale: wrk sends SECONDS (default 60) of
# requests, each from a new random address of 2001:db8:77::/48, through HAProxy and the SPOE
# agent (addr=X-Client, prefix 48, gcra:20/1d).  A request the agent did not answer is denied
# (500), so every 200 is an admission; prints the requests sent and the 200s (20 expected).
#   bench/haproxy/rotate48.sh [BUILD_DIR] (default build/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
secs=${SECONDS_EACH:-60}
T=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; done; sleep 0.3; rm -rf "$T"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
spop=$(free_port) site=$(free_port)
"$build/src/server/ratelimitd" --threads 1 --no-snapshot --port -1 --http-port -1 --grpc-port -1 \
  --spop-port "$spop" >"$T/rld.out" 2>"$T/rld.err" &
pids+=($!)
cat >"$T/h.cfg" <<CFG
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
frontend site
    bind 127.0.0.1:$site
    filter spoe engine rl config $T/rl.spoe
    http-request send-spoe-group rl check
    http-request deny deny_status 429 if { var(txn.rl.allowed) -m int 0 }
    http-request deny deny_status 500 if !{ var(txn.rl.allowed) -m found }
    http-request return status 200 content-type text/plain string ok
backend rl
    mode tcp
    server rl1 127.0.0.1:$spop
CFG
cat >"$T/rl.spoe" <<CFG
[rl]
spoe-agent rl
    groups check
    option var-prefix rl
    timeout hello 2s
    timeout idle 30s
    timeout processing 2s
    use-backend rl
spoe-message check
    args addr=req.hdr(X-Client) prefix=int(48) policy=str(gcra:20/1d)
spoe-group check
    messages check
CFG
for _ in $(seq 50); do grep -q spop "$T/rld.out" 2>/dev/null && break; sleep 0.1; done
haproxy -db -f "$T/h.cfg" >"$T/h.log" 2>&1 &
pids+=($!)
sleep 1
out=$(wrk -t1 -c20 -d"${secs}s" -s bench/haproxy/rotate48.lua "http://127.0.0.1:$site/")
total=$(echo "$out" | awk '/requests in/ {print $1}')
non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
echo "$out" | grep -E "requests in|Non-2xx|Socket errors" || true
echo "requests from distinct addresses of one /48: $total, admitted (200): $((total - ${non2xx:-0})) (the /48's limit: 20)"
