#!/bin/sh
# The playground's figures (bench/web/README.md): decisions per second of the WebAssembly core
# in Node against the native core (both -O2 from the same src/core, the same loops), the page's
# weight, and the time to the first drawn table in headless chromium.
# Usage: bench/web/run.sh SITE_DIR   (the staged site, e.g. build/release/web/site)
# Set RLT_NODE_MODULES to a folder holding puppeteer-core to skip its install.
set -eu
site=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/rlt-bench-web.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cc -O2 -std=gnu11 -I"$root/include" -I"$root/src" "$root"/src/core/*.c "$root/web/wasm/export.c" \
  "$root/bench/web/decide.c" -o "$tmp/decide"
# Native and wasm alternate for five rounds and each figure is its median round (each round the
# median of 5 repeats after a warm-up): on a shared machine a neighbour's burst then moves
# neither side alone.
for round in 1 2 3 4 5; do
  "$tmp/decide" <"$root/bench/web/cases.txt" >>"$tmp/native.all"
  node "$root/bench/web/decide.mjs" "$root/web/ratelimit.js" "$site/ratelimit.wasm" \
    <"$root/bench/web/cases.txt" >>"$tmp/wasm.all"
done
median='{ if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; c[$1]++; for (i = 2; i <= NF; i++) v[$1, i, c[$1]] = $i; nf = NF }
        END { for (k = 1; k <= n; k++) { p = order[k]; printf "%s", p
                for (i = 2; i <= nf; i++) { m = c[p]
                  for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
                    if (v[p, i, b] + 0 < v[p, i, a] + 0) { x = v[p, i, a]; v[p, i, a] = v[p, i, b]; v[p, i, b] = x }
                  printf " %s", v[p, i, int((m + 1) / 2)] }
                print "" } }'
awk "$median" "$tmp/native.all" | sort >"$tmp/native"
awk "$median" "$tmp/wasm.all" | sort >"$tmp/wasm"
echo "decisions per second (median of 5 alternated rounds, each the median of 5 repeats after a warm-up),"
echo "native (cc -O2) vs ratelimit.wasm in Node $(node --version); batch: the trace's arrays in, a verdict and a delay out"
printf '%-30s %10s %10s %10s %10s %10s %8s %8s %8s\n' policy nat-batch nat-loop batch call module \
  bat/bat loop/call loop/mod
join "$tmp/native" "$tmp/wasm" | while read -r p nb nl n_ok w_bat w_raw w_mod w_ok; do
  [ "$n_ok" = "$w_ok" ] || { echo "$p: native allowed $n_ok, wasm $w_ok" >&2; exit 1; }
  awk -v p="$p" -v nb="$nb" -v nl="$nl" -v b="$w_bat" -v r="$w_raw" -v m="$w_mod" \
    'BEGIN { q = "-"; if (b > 0) q = sprintf("%.2fx", nb / b)
             printf "%-30s %10.0f %10.0f %10.0f %10.0f %10.0f %8s %8.2fx %7.2fx\n", p, nb, nl, b, r, m, q, nl / r, nl / m }'
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
