#!/bin/bash
# Two builds of `ratelimit` alternated on the same cases, for a change's before and after:
#   bash bench/store/ab.sh BEFORE AFTER [ROUNDS] [SECONDS]
# BEFORE and AFTER are `ratelimit` binaries (copy build/release/src/cli/ratelimit aside before
# the change).  Each round runs every case with both, BEFORE first in odd rounds and AFTER
# first in even ones (so neither always gets the warmer or the quieter turn); the script
# prints each case's figures in round order, the medians and AFTER/BEFORE.  On a shared
# machine, compare the pairs as well as the medians: a change ahead in every pair is ahead.
#   env CASES="KEYS:THREADS ..."  (default "1000:1 1000000:1 1000000:2")
#   env POLICY=...                (default gcra:1000/1s,burst=1000, as vs-bare.sh)
#   env PIN=0|1                   (default 1: `bench --pin`, both builds' thread t on CPU t, so
#                                  a pair never compares two CPUs; see vs-bare.sh)
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: ab.sh BEFORE AFTER [ROUNDS] [SECONDS]" >&2; exit 2; }
A=$1 B=$2 ROUNDS=${3:-5} SECS=${4:-2}
for x in "$A" "$B"; do [ -x "$x" ] || { echo "ab.sh: $x is not an executable" >&2; exit 2; }; done
POLICY=${POLICY:-gcra:1000/1s,burst=1000}
CASES=${CASES:-1000:1 1000000:1 1000000:2}
PINARG=
[ "${PIN:-1}" = 1 ] && PINARG=--pin
run() { # binary keys threads: prints M decisions/s, or fails with the bench's output
    local out
    if ! out=$("$1" bench --policy "$POLICY" --keys "$2" --threads "$3" --seconds "$SECS" $PINARG 2>&1); then
        echo "ab.sh: $1 bench --keys $2 --threads $3 failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk -F'[= ]' '/^decisions_per_sec=/ {printf "%.2f\n", $2 / 1e6}' <<<"$out"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of ${SECS} s; M decisions/s"
declare -A fig
for ((r = 1; r <= ROUNDS; r++)); do
    for c in $CASES; do
        k=${c%:*} t=${c#*:}
        if ((r % 2)); then
            a=$(run "$A" "$k" "$t") || exit 1
            b=$(run "$B" "$k" "$t") || exit 1
        else
            b=$(run "$B" "$k" "$t") || exit 1
            a=$(run "$A" "$k" "$t") || exit 1
        fi
        fig[$c.a]+="$a " fig[$c.b]+="$b "
    done
done
for c in $CASES; do
    ma=$(tr ' ' '\n' <<<"${fig[$c.a]}" | grep . | median)
    mb=$(tr ' ' '\n' <<<"${fig[$c.b]}" | grep . | median)
    printf '%-14s before: %s median %s   after: %s median %s   after/before %s\n' "keys:threads=$c" \
        "${fig[$c.a]}" "$ma" "${fig[$c.b]}" "$mb" "$(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b / a}')"
done
