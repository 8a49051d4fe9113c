#!/usr/bin/env bash
# The nginx module against limit_req, as ../shared/anchors/README.md sets it up: ONE nginx (one
# worker pinned to CPU 1) from the anchors' nginx-limit-req.conf, plus a server limited by
# ngx_http_ratelimit_module (gcra:10000000/1s,burst=1000 on $http_x_rl_key: every request
# passes), wrk on CPU 0 with randkey.lua (1M random keys), the three locations interleaved
# ROUNDS times: limiting off, limit_req, ratelimit.  Prints each run, the medians and the
# ratios, the worker's CPU time per request (utime + stime from /proc, steadier than req/s on a
# shared machine), then the keys a 1 MiB zone of each holds (keys_held.py) and the bytes per key.
# Usage: bench/nginx/run.sh BUILD_DIR [SECONDS] [ROUNDS]     (env: ANCHORS, PORT_BASE)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [ROUNDS]}" && pwd)
secs=${2:-5}
rounds=${3:-3}
A=${ANCHORS:-$here/../../../shared/anchors}
base=${PORT_BASE:-18080}
module=$build/src/nginx/ngx_http_ratelimit_module.so
for f in "$A/nginx-limit-req.conf" "$A/randkey.lua" "$module"; do
  [ -f "$f" ] || { echo "run.sh: missing $f" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "run.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }

P=$(mktemp -d)
chmod 755 "$P"
mkdir -p "$P/logs" "$P/tmp" "$P/www"
echo ok >"$P/www/index.html"
chmod 644 "$P/www/index.html"
port() { echo $((base + $1)); }
{
  echo "load_module $module;"
  # The anchors' file, its ports moved to PORT_BASE..+3, without its closing brace ...
  sed -e "s|PREFIX|$P|g" -e "s|127\.0\.0\.1:1808\([0-9]\)|127.0.0.1:PORT\1|g" "$A/nginx-limit-req.conf" |
    sed '$d' | awk -v b="$base" '{ while (match($0, /PORT[0-9]/)) {
        $0 = substr($0, 1, RSTART - 1) (b + substr($0, RSTART + 4, 1)) substr($0, RSTART + 5) } print }'
  # ... then the module's zone and server, as the anchors' README gives them, and two 1 MiB
  # zones (one each) for counting the keys a zone holds.
  cat <<CONF
    ratelimit_zone \$http_x_rl_key zone=t:160m policy=gcra:10000000/1s,burst=1000;
    server { listen 127.0.0.1:$(port 4); location / { ratelimit zone=t; } }
    limit_req_zone \$http_x_rl_key zone=lr1m:1m rate=1r/m;
    ratelimit_zone \$http_x_rl_key zone=rl1m:1m policy=gcra:1/1h;
    server { listen 127.0.0.1:$(port 5); location / { limit_req zone=lr1m; } }
    server { listen 127.0.0.1:$(port 6); location / { ratelimit zone=rl1m; } }
}
CONF
} >"$P/nginx.conf"

nginx -p "$P/" -c nginx.conf
trap 'nginx -p "$P/" -c nginx.conf -s stop 2>/dev/null; sleep 0.5; rm -rf "$P"' EXIT
sleep 0.5
echo "nginx $(nginx -v 2>&1 | sed 's/.*\///'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), wrk -t1 -c50 -d${secs}s"

worker=$(pgrep -P "$(cat "$P/nginx.pid")" | head -1)
ticks() { awk '{ print $14 + $15 }' "/proc/$worker/stat"; }
declare -A all cpu
run() { # run NAME PORT
  local out rps t0 t1 n us
  t0=$(ticks)
  out=$(taskset -c 0 wrk -t1 -c50 -d"${secs}s" -s "$A/randkey.lua" "http://127.0.0.1:$2/index.html")
  t1=$(ticks)
  if grep -qE "Non-2xx|Socket errors" <<<"$out"; then
    echo "run.sh: $1 had errors or non-2xx responses:" >&2
    echo "$out" >&2
    exit 1
  fi
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  n=$(awk '/requests in/ { print $1 }' <<<"$out")
  us=$(awk -v d=$((t1 - t0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
  all[$1]="${all[$1]:-} $rps"
  cpu[$1]="${cpu[$1]:-} $us"
  printf "round %s  %-10s %10s req/s  %6s us worker CPU a request\n" "$r" "$1" "$rps" "$us"
}
for r in $(seq 1 "$rounds"); do
  run off "$(port 0)"
  run limit_req "$(port 3)"
  run ratelimit "$(port 4)"
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
off=$(median <<<"${all[off]}")
lr=$(median <<<"${all[limit_req]}")
rl=$(median <<<"${all[ratelimit]}")
echo "median req/s: off $off, limit_req $lr, ratelimit $rl"
coff=$(median <<<"${cpu[off]}")
clr=$(median <<<"${cpu[limit_req]}")
crl=$(median <<<"${cpu[ratelimit]}")
echo "median worker CPU us a request: off $coff, limit_req $clr, ratelimit $crl"
awk -v off="$off" -v lr="$lr" -v rl="$rl" 'BEGIN {
  printf "req/s ratios: ratelimit/limit_req %.3f, limit_req/off %.3f, ratelimit/off %.3f\n", rl / lr, lr / off, rl / off }'
awk -v off="$coff" -v lr="$clr" -v rl="$crl" 'BEGIN {
  printf "CPU a request over off: limit_req +%.2f us, ratelimit +%.2f us\n", lr - off, rl - off }'

python3 "$here/keys_held.py" "$(port 5)" "$(port 6)" 1048576
