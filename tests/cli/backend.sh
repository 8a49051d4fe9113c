#!/bin/bash
# backend.sh RATELIMIT: `ratelimit sim --backend`, the issue's scenario read from its table: the
# backend's capacity halves at one instant while sheddable traffic surges 12x.  For each adaptive
# controller with the critical reserve: critical availability at least 99.9 %, goodput at least
# 90 % of the halved capacity, critical p99 at most twice its unloaded value; the static limit's
# row shown beside and failing the first bound, as an adaptive limit without the reserve does
# (so the bounds tell the setups apart).  Three seeds.  Then: the limit never above its ceiling,
# the same options print the same bytes, the SVG, and bad input refused with exit status 2.
set -u
rl=$1
export LC_ALL=C
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 ok=0
pass() { echo "ok   $*"; ok=$((ok + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# col FILE MODE N: the Nth number column of MODE's row (goodput/s=1, of C2=2, critical=3,
# default=4, sheddable=5, crit p50=6, crit p99=7, def p99=8, shed p99=9, limit=10), "%" dropped.
col() {
  awk -v m="$2" -v f="$3" 'index($0, m) == 1 && substr($0, length(m) + 1) ~ /^ +[0-9]/ { n = split(substr($0, length(m) + 1), a, " "); sub(/%$/, "", a[f]); print a[f]; exit }' "$1"
}
# ge A B: decimal A >= decimal B
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

for seed in 1 2 3; do
  out="$tmp/s$seed"
  if ! "$rl" sim --backend 100 --seed "$seed" >"$out"; then bad "exit status, seed $seed"; continue; fi
  unloaded=$(sed -n 's/.*(unloaded): p50 [0-9.]* ms, p99 \([0-9.]*\) ms$/\1/p' "$out")
  if [ -z "$unloaded" ]; then bad "no unloaded p99 printed, seed $seed"; continue; fi
  for mode in "vegas +reserve" "aimd +reserve"; do
    avail=$(col "$out" "$mode" 3) good=$(col "$out" "$mode" 2) p99=$(col "$out" "$mode" 7)
    if [ -n "$avail" ] && ge "$avail" 99.90; then pass "$mode, seed $seed: critical availability $avail % >= 99.9 %"; else bad "$mode, seed $seed: critical availability '$avail'"; fi
    if [ -n "$good" ] && ge "$good" 90; then pass "$mode, seed $seed: goodput $good % of the halved capacity >= 90 %"; else bad "$mode, seed $seed: goodput '$good'"; fi
    if [ -n "$p99" ] && ge "$(awk -v u="$unloaded" 'BEGIN { print 2 * u }')" "$p99"; then pass "$mode, seed $seed: critical p99 $p99 ms <= 2 x $unloaded ms unloaded"; else bad "$mode, seed $seed: critical p99 '$p99' against unloaded '$unloaded'"; fi
  done
  for mode in "static 100" "vegas" "aimd"; do
    avail=$(col "$out" "$mode" 3)
    if [ -n "$avail" ] && ! ge "$avail" 99.90; then pass "$mode (shown beside), seed $seed: critical availability $avail % < 99.9 %"; else bad "$mode, seed $seed: critical availability '$avail' should fall short without the reserve"; fi
  done
done

# The limit stays within floor..ceiling: a ceiling of 60, a backend of 100 that halves.
"$rl" sim --backend 100 --ceiling 60 --static 60 >"$tmp/ceil"
high=$(awk '/^limit over time/ { on = 1; next } on && /^(aimd|vegas)/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/ && $i + 0 > m) m = $i + 0 } END { print m + 0 }' "$tmp/ceil")
low=$(awk '/^limit over time/ { on = 1; next } on && /^(aimd|vegas)/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/ && (m == "" || $i + 0 < m)) m = $i + 0 } END { print m + 0 }' "$tmp/ceil")
if [ "$high" -le 60 ] && [ "$low" -ge 1 ] && [ "$high" -gt 0 ]; then pass "adaptive limits within 1..60 (seen $low..$high)"; else bad "adaptive limits seen $low..$high, outside 1..60"; fi

# Deterministic, and the seed matters.
"$rl" sim --backend 40 --seconds 4 --seed 5 >"$tmp/a"
"$rl" sim --backend 40 --seconds 4 --seed 5 >"$tmp/b"
"$rl" sim --backend 40 --seconds 4 --seed 6 >"$tmp/c"
if cmp -s "$tmp/a" "$tmp/b"; then pass "the same options print the same bytes"; else bad "two runs differ"; fi
if ! cmp -s "$tmp/a" "$tmp/c"; then pass "another seed, another run"; else bad "--seed changes nothing"; fi

# The SVG: the servers' line and one line per mode.
if "$rl" sim --backend 40 --seconds 4 --svg "$tmp/p.svg" >/dev/null && [ "$(grep -c '<polyline' "$tmp/p.svg")" = 7 ] && tail -1 "$tmp/p.svg" | grep -q '</svg>'; then pass "the SVG has the servers and six limits"; else bad "the SVG"; fi

# Bad input: a clear error (exit 2, the option named), nothing printed on stdout.
while IFS='|' read -r args want; do
  # shellcheck disable=SC2086
  "$rl" sim $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = 2 ] && grep -q -- "$want" "$tmp/err" && [ ! -s "$tmp/out" ]; then pass "refused: sim $args"; else bad "sim $args: exit $rc, stderr '$(cat "$tmp/err")'"; fi
done <<'CASES'
--backend 0|--backend
--backend x|--backend
--backend 100 --reserve 101|--reserve
--backend 100 --reserve -1|--reserve
--backend 100 --after 0|--after
--backend 100 --service -5ms|--service
--backend 100 --change-at 30|--change-at
--backend 100 --ceiling 70000|--ceiling
--backend 100 --critical 1e9|--critical
--backend 100 --class urgent|unknown option
--backend 100 --seconds 3600 --critical 10000000|arrivals
CASES
"$rl" sim --backend 100 --svg /nonexistent/dir/p.svg >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" = 1 ] && grep -q "cannot write" "$tmp/err" && [ ! -s "$tmp/out" ]; then pass "an SVG that cannot be written fails before the table"; else bad "bad --svg path: exit $rc"; fi

echo "$ok passed, $fail failed"
[ "$fail" = 0 ]
