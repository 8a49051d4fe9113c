#!/bin/bash
# Two or more builds of `ratelimit` on one case, in rotation on CPU 0, keeping only the rounds
# that ran on a CPU at full speed:
#   bash bench/store/ab-quiet.sh ROUNDS SECONDS BIN [BIN...]
# Each round probes CPU 0 (the first BIN on 1,000 keys for 0.3 s: arithmetic-bound, so it
# shows a vCPU running at part speed), runs every BIN once (the order rotates from round to
# round, so no build always gets the warmer turn), and probes again.  A round counts when both
# probes reach THRESHOLD M decisions/s; a round that starts on a slow CPU waits 8 s and tries
# again, one that ends on one is printed as discarded.  On this machine's VM a vCPU runs for
# seconds to minutes at about 0.6x (docs/experiments/store-round7-pinning-lanes.md and store-round8-quiet-pairs.md), which moves a 1M-key
# figure by far more than the changes this script is for (round 9 measured them with it).
# Prints every round, then each BIN's median and its ratio to the first BIN's.
#   env KEYS=N            (default 1000000)
#   env POLICY=...        (default gcra:1000/1s,burst=1000, as vs-bare.sh)
#   env THRESHOLD=M       (default 58: M decisions/s the probe makes on a CPU at full speed
#                          here is 62-75, on a slow one 40-47)
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: ab-quiet.sh ROUNDS SECONDS BIN [BIN...]" >&2; exit 2; }
ROUNDS=$1 SECS=$2
shift 2
BINS=("$@")
n=${#BINS[@]}
for b in "${BINS[@]}"; do [ -x "$b" ] || { echo "ab-quiet.sh: $b is not an executable" >&2; exit 2; }; done
KEYS=${KEYS:-1000000} POLICY=${POLICY:-gcra:1000/1s,burst=1000} THR=${THRESHOLD:-58}
rate() { # binary keys seconds: M decisions/s on CPU 0, or fails with the bench's output
    local out
    if ! out=$(taskset -c 0 "$1" bench --policy "$POLICY" --keys "$2" --seconds "$3" --pin 2>&1); then
        echo "ab-quiet.sh: $1 bench --keys $2 failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk -F'[= ]' '/^decisions_per_sec=/ {printf "%.2f\n", $2 / 1e6}' <<<"$out"
}
fast() { awk -v p="$1" -v t="$THR" 'BEGIN {exit !(p >= t)}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg); keys $KEYS; rounds of ${SECS} s on CPU 0; M decisions/s"
declare -a figs
got=0 tries=0
while ((got < ROUNDS && tries < 4 * ROUNDS)); do
    tries=$((tries + 1))
    p1=$(rate "${BINS[0]}" 1000 0.3) || exit 1
    if ! fast "$p1"; then
        echo "slow CPU (probe $p1): waiting"
        sleep 8
        continue
    fi
    line=()
    for ((j = 0; j < n; j++)); do
        b=$(((j + tries) % n))
        line[b]=$(rate "${BINS[b]}" "$KEYS" "$SECS") || exit 1
    done
    p2=$(rate "${BINS[0]}" 1000 0.3) || exit 1
    if ! fast "$p2"; then
        echo "discarded: ${line[*]} (probes $p1 $p2)"
        continue
    fi
    echo "round: ${line[*]} (probes $p1 $p2)"
    for ((b = 0; b < n; b++)); do figs[b]+="${line[b]} "; done
    got=$((got + 1))
done
((got > 0)) || { echo "ab-quiet.sh: no round ran on a CPU at full speed" >&2; exit 1; }
m0=$(tr ' ' '\n' <<<"${figs[0]}" | grep . | median)
for ((b = 0; b < n; b++)); do
    m=$(tr ' ' '\n' <<<"${figs[b]}" | grep . | median)
    awk -v b="${BINS[b]}" -v m="$m" -v m0="$m0" -v g="$got" \
        'BEGIN {printf "%s: median %.2f over %d rounds, %.3fx the first\n", b, m, g, m / m0}'
done
