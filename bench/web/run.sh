#!/bin/sh
# The playground's figures (bench/web/README.md): decisions per second of the WebAssembly core
# in Node against the native core (both -O2 from the same src/core, the same loop), the page's
# weight, and the time to the first drawn table in headless chromium.
# Usage: bench/web/run.sh SITE_DIR   (the staged site, e.g. build/release/web/site)
# Set RLT_NODE_MODULES to a folder holding puppeteer-core to skip its install.
set -eu
site=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/rlt-bench-web.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cc -O2 -std=gnu11 -I"$root/include" -I"$root/src" "$root"/src/core/*.c "$root/bench/web/decide.c" -o "$tmp/decide"
# Native and wasm alternate, three rounds each, and each figure is its best round: on a shared
# machine a neighbour's burst then hurts neither side alone.
for round in 1 2 3; do
  "$tmp/decide" <"$root/bench/web/cases.txt" >>"$tmp/native.all"
  node "$root/bench/web/decide.mjs" "$root/web/ratelimit.js" "$site/ratelimit.wasm" \
    <"$root/bench/web/cases.txt" >>"$tmp/wasm.all"
done
best='{ for (i = 2; i <= NF; i++) if (!(($1, i) in m) || $i + 0 > m[$1, i] + 0) m[$1, i] = $i; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; nf = NF }
      END { for (k = 1; k <= n; k++) { printf "%s", order[k]; for (i = 2; i <= nf; i++) printf " %s", m[order[k], i]; print "" } }'
awk "$best" "$tmp/native.all" | sort >"$tmp/native"
awk "$best" "$tmp/wasm.all" | sort >"$tmp/wasm"
echo "decisions per second (best of 3 rounds of best of 3), native vs ratelimit.wasm in Node $(node --version)"
printf '%-30s %10s %10s %10s %10s %8s %8s %8s\n' policy native batch call module nat/bat nat/call nat/mod
join "$tmp/native" "$tmp/wasm" | while read -r p n_rate n_ok w_bat w_raw w_mod w_ok; do
  [ "$n_ok" = "$w_ok" ] || { echo "$p: native allowed $n_ok, wasm $w_ok" >&2; exit 1; }
  awk -v p="$p" -v n="$n_rate" -v b="$w_bat" -v r="$w_raw" -v m="$w_mod" \
    'BEGIN { q = "-"; if (b > 0) q = sprintf("%.2fx", n / b)
             printf "%-30s %10.0f %10.0f %10.0f %10.0f %8s %7.2fx %7.2fx\n", p, n, b, r, m, q, n / r, n / m }'
done
echo
echo "page weight (bytes; gzip -9 in brackets)"
total=0 gz=0
for f in "$site"/*; do
  b=$(wc -c <"$f") g=$(gzip -9c "$f" | wc -c)
  printf '  %-16s %7d (%6d)\n' "$(basename "$f")" "$b" "$g"
  total=$((total + b)) gz=$((gz + g))
done
printf '  %-16s %7d (%6d)\n' total "$total" "$gz"
echo
mods=${RLT_NODE_MODULES:-}
if [ -z "$mods" ]; then
  (cd "$tmp" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" puppeteer-core >/dev/null)
  mods=$tmp/node_modules
fi
node "$root/bench/web/first-table.mjs" "$mods" "$site" 15 |
  awk '{ printf "time to the first drawn table in headless chromium: median %s ms, slowest %s ms (15 loads, cache off)\n", $2, $3 }'
