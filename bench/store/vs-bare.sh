#!/usr/bin/env bash
# The keyed store against the bare C GCRA table, side by side in one run.
#
# Runs `ratelimit bench` (rlt_store_decide, one call at a time) and the anchor's bare table
# (../shared/anchors/gcra_bench.c: open addressing, a spinlock per shard, integer keys, no
# hashing of strings) on the same machine, interleaved ROUNDS times (store, table, store,
# table, ...) for each case, and prints every figure, the medians and the store/table ratios.
# Cases: 1M random keys on 1 and 2 threads, and 1,000 keys on 1 thread (the hot path).  The
# 2-thread scaling of each side is its 2-thread median over its 1-thread median.  With
# SIP=1, the cases sip1m and sip1k also run the bare table with one SipHash-1-3 of a 16-byte
# key added to each decision (the store's own inline SipHash, src/store/siphash.h, patched into
# a copy of the anchor so the slot address depends on it): what the store's keyed hash alone
# costs the bare table.
#
# With WIDE=1, the cases w1m1 and w1m2 also run the store against the bare table with its
# 16-byte slots padded to the store's 32 (a patched copy of the anchor, nothing else changed):
# the same table with the store's footprint per slot, 64 MiB at 1M keys where the plain one is
# 32 MiB (the store's own: ~45 MB).  On a machine whose last-level cache holds 32 MiB, the
# plain table's 1M-key figure is a cache-fit figure; this one says what is left once the
# footprint is the store's (docs/experiments/store-round4-shards.md).
#
# With LAYOUT=1, the case lay1m runs, interleaved with the store and the table at 1M keys on
# 1 thread, bench/store/layout.c (store_layout): the store's table layout (32-byte slots at 71%
# load, the AES key hash, the 16-byte key stream, a library-style call returning the whole
# decision) with nothing of the store's call on top; again at 48% load (the table's); and at
# 71% with 8 rounds of padding (~40 more instructions a call); and at 71% probing fingerprints
# first, as the store's big tables do.  Layout/table says what the
# layout costs; store/layout what the store's call does on top of it (docs/performance.md,
# round 6).
#
# PIN=1 (the default) runs the store's threads pinned as the table pins its own: thread t on
# CPU t (`ratelimit bench --pin`; the table: CPU t mod 2), so that in each case both sides run
# on the same CPUs (1 thread: CPU 0).  On this machine's VM the two vCPUs are not alike over
# time: for minutes at a time one of them runs the store's code at about half speed
# (bench_core's GCRA 11.9 against 5.6 ns) and the table's hot loop at 0.75x
# (docs/experiments/store-round7-pinning-lanes.md); a store left to the scheduler and a table pinned to CPU 0
# were often compared on different CPUs.  (The table re-pins its threads itself, so taskset
# cannot move it off CPU 0.)  PIN=0 runs the store unpinned, as rounds 1-6 did.
#
# PROBE=1 (the default) measures the CPUs' speed: the store on 1,000 keys for 0.3 s under
# `taskset -c N` (arithmetic-bound, so it shows a vCPU running at part speed).  On this VM a
# vCPU runs for seconds to minutes at about 0.6x (docs/experiments/store-round7-pinning-lanes.md and store-round8-quiet-pairs.md), and a
# case's figures then depend on which CPU state each side met.  So each pair (store, table)
# of the 1m1, 1m2 and 1k1 cases is bracketed by a probe of the CPUs it runs on (CPU 0, or 0
# and 1), before and after; a pair is quiet when every one of those probes is at least 0.85x
# the fastest probe of the run so far (at the end of the pair's case).  Each case prints all
# its pairs (a quiet one marked *) and, beside the medians of all pairs, the medians of its
# quiet pairs ("quiet: ..."), and
# the scaling line says the same of the quiet pairs.  The rule is fixed before the figures
# and the same for both sides.  The run ends with its slowest probe against its fastest.
#
# usage: bench/store/vs-bare.sh [BUILD_DIR=build/release] [ROUNDS=3] [SECONDS=3]
#   env GCRA_BENCH=path  an already built gcra_bench (default: built from $ANCHORS here)
#   env ANCHORS=dir      where gcra_bench.c lives (default: ../shared/anchors from the repo)
#   env CASES="1m1 1m2 1k1"  which cases to run
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
ROUNDS=${2:-3}
SECS=${3:-3}
CASES=${CASES:-"1m1 1m2 1k1"}
[ "${SIP:-0}" = 1 ] && CASES="$CASES sip1m sip1k"
[ "${WIDE:-0}" = 1 ] && CASES="$CASES w1m1 w1m2"
[ "${LAYOUT:-0}" = 1 ] && CASES="$CASES lay1m"
B=$BUILD/src/cli/ratelimit
[ -x "$B" ] || { echo "vs-bare: no $B (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "vs-bare: needs /usr/bin/time for the table's CPU time (apt-get install time)" >&2; exit 2; }
A=${ANCHORS:-../shared/anchors}
G=${GCRA_BENCH:-}
if [ -z "$G" ]; then
    [ -f "$A/gcra_bench.c" ] || { echo "vs-bare: no $A/gcra_bench.c (set ANCHORS or GCRA_BENCH)" >&2; exit 2; }
    G=$BUILD/gcra_bench
    gcc -O2 -pthread -o "$G" "$A/gcra_bench.c"
fi
POLICY=gcra:1000/1s,burst=1000
PINARG=
[ "${PIN:-1}" = 1 ] && PINARG=--pin
# A patched copy of the anchor: patched NAME WHAT LINE SED_EXPR... builds $BUILD/gcra_bench_NAME
# from gcra_bench.c with the sed expressions applied, after checking that LINE, which they
# rewrite, is still in it (WHAT names the patch in the error).
patched() {
    local name=$1 what=$2 line=$3 src
    shift 3
    src=$(realpath "${ANCHORS:-../shared/anchors}")/gcra_bench.c
    grep -qF "$line" "$src" || { echo "vs-bare: $src has changed; cannot $what" >&2; exit 2; }
    local args=()
    for e in "$@"; do args+=(-e "$e"); done
    sed "${args[@]}" "$src" >"$BUILD/gcra_bench_$name.c"
    gcc -O2 -pthread -Isrc -o "$BUILD/gcra_bench_$name" "$BUILD/gcra_bench_$name.c"
}
if [ "${SIP:-0}" = 1 ]; then
    GS=$BUILD/gcra_bench_siphash
    line='uint64_t id = splitmix(x % g_n) | 1, h = hash64(id);'
    patched siphash "add the SipHash" "$line" \
        "s/^#include <sys\/mman.h>/&\n#include \"store\/siphash.h\"\nstatic rlt__sipkey sip_;/" \
        "s/$line/uint64_t id = splitmix(x % g_n) | 1, kb_[2] = {id, ~id}, h = hash64(id) + (rlt__siphash(\&sip_, kb_, 16, 1, 3) == 1);/"
fi
if [ "${WIDE:-0}" = 1 ]; then
    GW=$BUILD/gcra_bench_wide
    line='typedef struct { uint64_t key; _Atomic int64_t tat; } slot_t;'
    patched wide "widen its slots" "$line" \
        "s/$line/typedef struct { uint64_t key; _Atomic int64_t tat; uint64_t pad_[2]; } slot_t;/"
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# Each run prints "wall_rate cpu_rate": decisions per second of wall-clock time (the figure
# compared), and per CPU-second the process got (what the code does on a core of its own: on
# a shared machine a descheduled thread loses wall time but no CPU time).
store_run() { # keys threads
    "$B" bench --policy "$POLICY" --keys "$1" --threads "$2" --seconds "$SECS" $PINARG |
        awk -F'[= ]' '/^cpu_decisions_per_sec=/ {c = $2} /^decisions_per_sec=/ {w = $2} END {print w, c}'
}
# The table runs 40M decisions per thread; its CPU time comes from time(1), and like the
# store's figure it is the sum over threads of each one's decisions per CPU-second (with T
# threads of equal CPU time: T x T x 40M / total CPU seconds).
table_run() { # keys threads [binary]
    local out
    out=$( { /usr/bin/time -f 'cpu %U %S' "${3:-$G}" table "$1" "$2" lock; } 2>&1)
    awk -v t="$2" '/M decisions\/s aggregate/ {for (i = 1; i <= NF; i++) if ($i == "M") w = $(i - 1) * 1e6}
                   /^cpu / {c = t * t * 40e6 / ($2 + $3)} END {printf "%.0f %.0f\n", w, c}' <<<"$out"
}

layout_run() { # load pad [mode]: decisions per second
    "$BUILD/bench/store/store_layout" 1000000 "$1" "$SECS" "$2" ${3:-} | sed -n 's/.*decisions_per_sec=//p'
}

# The speed of the first N CPUs of this process (all of them without N), a line "CPU RATE"
# each, RATE in decisions/s of the 1,000-key store; keeps the run's slowest and fastest.
probe_lo=0 probe_hi=0
cpu_probe() {
    local cpus cpu out n=0
    cpus=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status | tr ',' ' ')
    for cpu in $(for r in $cpus; do case $r in *-*) seq "${r%-*}" "${r#*-}" ;; *) echo "$r" ;; esac; done); do
        [ -n "${1:-}" ] && [ "$n" -ge "$1" ] && break
        n=$((n + 1))
        out=$(taskset -c "$cpu" "$B" bench --policy "$POLICY" --keys 1000 --seconds 0.3 | sed -n 's/^decisions_per_sec=\([0-9]*\).*/\1/p')
        echo "$cpu ${out:-0}"
    done
}
probe_keep() { # LINES: folds the probe's figures into the run's slowest and fastest
    read -r probe_lo probe_hi < <(awk -v lo="$probe_lo" -v hi="$probe_hi" \
        '{if (lo == 0 || $2 < lo) lo = $2; if ($2 > hi) hi = $2} END {print lo, hi}' <<<"$1")
}
probe() { # all CPUs: prints "cpus: 0 64.1M 1 43.9M"
    [ "${PROBE:-1}" = 1 ] || return 0
    local line
    line=$(cpu_probe)
    probe_keep "$line"
    printf 'cpus: %s\n' "$(awk '{printf "%s %.1fM ", $1, $2 / 1e6}' <<<"$line")"
}
pair_probe() { # THREADS: the slowest of the CPUs a pair runs on, now (0 when PROBE=0)
    [ "${PROBE:-1}" = 1 ] || { echo 0; return 0; }
    local line
    line=$(cpu_probe "$1")
    probe_keep "$line"
    awk 'NR == 1 || $2 < lo {lo = $2} END {print lo + 0}' <<<"$line"
}

declare -A med
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg); store: $B${PINARG:+ (pinned as the table)}; table: $G"
for c in $CASES; do
    probe
    case $c in
    1m1) keys=1000000 th=1 ;;
    1m2) keys=1000000 th=2 ;;
    1k1) keys=1000 th=1 ;;
    sip1m) keys=1000000 th=1 ;;
    sip1k) keys=1000 th=1 ;;
    w1m1) keys=1000000 th=1 ;;
    w1m2) keys=1000000 th=2 ;;
    lay1m) keys=1000000 th=1 ;;
    *) echo "vs-bare: unknown case $c" >&2; exit 2 ;;
    esac
    if [ "${c#sip}" != "$c" ]; then # the table with SipHash against the plain table
        s_all=() t_all=()
        for ((r = 1; r <= ROUNDS; r++)); do
            read -r w cpu < <(table_run $keys $th "$GS")
            s_all+=("$w")
            read -r w cpu < <(table_run $keys $th)
            t_all+=("$w")
        done
        a=$(printf '%s\n' "${s_all[@]}" | median) b=$(printf '%s\n' "${t_all[@]}" | median)
        printf '%-5s keys=%-7s table+SipHash: %s  table: %s\n' "$c" "$keys" \
            "$(printf '%s ' "${s_all[@]}" | awk '{for (i = 1; i <= NF; i++) printf "%.2fM ", $i / 1e6}')" \
            "$(printf '%s ' "${t_all[@]}" | awk '{for (i = 1; i <= NF; i++) printf "%.2fM ", $i / 1e6}')"
        awk -v c="$c" -v s="$a" -v t="$b" \
            'BEGIN {printf "%-5s median table+SipHash %.2fM/s  table %.2fM/s  ratio %.2fx\n", c, s / 1e6, t / 1e6, s / t}'
        continue
    fi
    if [ "$c" = lay1m ]; then # the store, the table and the layout alone, in turn
        [ -x "$BUILD/bench/store/store_layout" ] || { echo "vs-bare: no $BUILD/bench/store/store_layout" >&2; exit 2; }
        declare -A all=()
        for ((r = 1; r <= ROUNDS; r++)); do
            read -r w cpu < <(store_run $keys $th)
            all[store]+="$w "
            read -r w cpu < <(table_run $keys $th)
            all[table]+="$w "
            all[layout71]+="$(layout_run 0.71 0) "
            all[layout48]+="$(layout_run 0.48 0) "
            all[layout71pad8]+="$(layout_run 0.71 8) "
            all[layout71fp]+="$(layout_run 0.71 0 fp) "
        done
        for k in store table layout71 layout48 layout71pad8 layout71fp; do
            med[$c.$k]=$(tr ' ' '\n' <<<"${all[$k]}" | grep . | median)
            printf '%-5s %-12s %s median %.2fM\n' "$c" "$k" \
                "$(awk '{for (i = 1; i <= NF; i++) printf "%.2fM ", $i / 1e6}' <<<"${all[$k]}")" \
                "$(awk -v m="${med[$c.$k]}" 'BEGIN {print m / 1e6}')"
        done
        awk -v s="${med[$c.store]}" -v t="${med[$c.table]}" -v l="${med[$c.layout71]}" \
            -v h="${med[$c.layout48]}" -v p="${med[$c.layout71pad8]}" -v f="${med[$c.layout71fp]}" \
            'BEGIN {printf "lay1m layout(71%%)/table %.2fx  layout(48%%)/table %.2fx  store/layout(71%%) %.2fx  padded/layout %.2fx  fingerprints/layout %.2fx  store/table %.2fx\n",
                    l / t, h / t, s / l, p / l, f / l, s / t}'
        continue
    fi
    tb=$G
    [ "${c#w}" != "$c" ] && tb=${GW:?the w cases need WIDE=1} # the table with 32-byte slots
    s_all=() t_all=() sc_all=() tc_all=() p_all=()
    for ((r = 1; r <= ROUNDS; r++)); do
        before=$(pair_probe $th)
        read -r w cpu < <(store_run $keys $th)
        s_all+=("$w") sc_all+=("$cpu")
        read -r w cpu < <(table_run $keys $th "$tb")
        t_all+=("$w") tc_all+=("$cpu")
        after=$(pair_probe $th)
        p_all+=("$((before < after ? before : after))")
    done
    med[$c.s]=$(printf '%s\n' "${s_all[@]}" | median)
    med[$c.t]=$(printf '%s\n' "${t_all[@]}" | median)
    med[$c.sc]=$(printf '%s\n' "${sc_all[@]}" | median)
    med[$c.tc]=$(printf '%s\n' "${tc_all[@]}" | median)
    # Quiet pairs: both probes at least 0.85x the fastest probe so far.
    qs=() qt=() marks=()
    for ((r = 0; r < ROUNDS; r++)); do
        if [ "${PROBE:-1}" = 1 ] && awk -v p="${p_all[$r]}" -v hi="$probe_hi" 'BEGIN {exit !(p >= 0.85 * hi)}'; then
            qs+=("${s_all[$r]}") qt+=("${t_all[$r]}") marks+=("*")
        else
            marks+=("")
        fi
    done
    printf '%-4s keys=%-7s threads=%s store: %s  table: %s\n' "$c" "$keys" "$th" \
        "$(for ((r = 0; r < ROUNDS; r++)); do awk -v v="${s_all[$r]}" -v m="${marks[$r]}" 'BEGIN {printf "%.2fM%s ", v / 1e6, m}'; done)" \
        "$(for ((r = 0; r < ROUNDS; r++)); do awk -v v="${t_all[$r]}" -v m="${marks[$r]}" 'BEGIN {printf "%.2fM%s ", v / 1e6, m}'; done)"
    awk -v c="$c" -v s="${med[$c.s]}" -v t="${med[$c.t]}" -v sc="${med[$c.sc]}" -v tc="${med[$c.tc]}" \
        'BEGIN {printf "%-4s median store %.2fM/s  table %.2fM/s  store/table %.2fx   (per CPU-second: store %.2fM  table %.2fM  %.2fx)\n",
                c, s / 1e6, t / 1e6, s / t, sc / 1e6, tc / 1e6, sc / tc}'
    if [ "${PROBE:-1}" = 1 ]; then
        if [ ${#qs[@]} -gt 0 ]; then
            med[$c.qs]=$(printf '%s\n' "${qs[@]}" | median)
            med[$c.qt]=$(printf '%s\n' "${qt[@]}" | median)
            awk -v c="$c" -v n="${#qs[@]}" -v r="$ROUNDS" -v s="${med[$c.qs]}" -v t="${med[$c.qt]}" \
                'BEGIN {printf "%-4s quiet: %d of %d pairs, median store %.2fM/s  table %.2fM/s  store/table %.2fx\n", c, n, r, s / 1e6, t / 1e6, s / t}'
        else
            printf '%-4s quiet: 0 of %d pairs\n' "$c" "$ROUNDS"
        fi
    fi
done
if [ -n "${med[1m1.qs]:-}" ] && [ -n "${med[1m2.qs]:-}" ]; then
    awk -v s1="${med[1m1.qs]}" -v s2="${med[1m2.qs]}" -v t1="${med[1m1.qt]}" -v t2="${med[1m2.qt]}" \
        'BEGIN {printf "scaling 2/1 threads, quiet pairs: store %.2fx  table %.2fx  store/table %.2fx\n", s2 / s1, t2 / t1, (s2 / s1) / (t2 / t1)}'
fi
for p in 1m w1m; do
    [ -n "${med[${p}1.s]:-}" ] && [ -n "${med[${p}2.s]:-}" ] || continue
    what="table"
    [ "$p" = w1m ] && what="table with 32-byte slots"
    awk -v s1="${med[${p}1.s]}" -v s2="${med[${p}2.s]}" -v t1="${med[${p}1.t]}" -v t2="${med[${p}2.t]}" \
        -v c1="${med[${p}1.sc]}" -v c2="${med[${p}2.sc]}" -v d1="${med[${p}1.tc]}" -v d2="${med[${p}2.tc]}" -v w="$what" \
        'BEGIN {printf "scaling 2/1 threads against the %s: store %.2fx  table %.2fx  store/table %.2fx   (per CPU-second: store %.2fx  table %.2fx  %.2fx)\n",
                w, s2 / s1, t2 / t1, (s2 / s1) / (t2 / t1), c2 / c1, d2 / d1, (c2 / c1) / (d2 / d1)}'
done
if [ "${PROBE:-1}" = 1 ]; then
    probe
    awk -v lo="$probe_lo" -v hi="$probe_hi" 'BEGIN {r = hi > 0 ? lo / hi : 0;
        printf "cpus: slowest probe / fastest %.2fx: %s\n", r,
               r < 0.85 ? "uneven, a CPU ran at part speed during the run (figures depend on which CPU each side met)" : "even"}'
fi
