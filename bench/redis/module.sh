#!/bin/sh
# The Redis module ratelimit.so against the Lua scripts and plain INCR, in one run on one
# private redis-server (the module loaded), every case interleaved ROUNDS times:
#   1. Redis CPU per decision: usec_per_call from INFO commandstats (reset before each case)
#      under redis-benchmark -P 16 on 1 M random keys: INCR; the module's CL.THROTTLE and
#      RL.CHECK (gcra, token_bucket, sliding_window, fixed_window, each N=100/1s); the
#      library's own scripts (EVALSHA with the arguments the library sends) for the same four.
#   2. decisions/s through libratelimit_redis pipelined (bench_module): module vs scripts.
# Usage: bench/redis/module.sh BUILD_DIR [ROUNDS] [SECONDS_PER_LIBRARY_CASE]
# Build with the release preset (cmake --preset release && cmake --build --preset release).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: module.sh BUILD_DIR [ROUNDS] [SECONDS]}" && pwd)
rounds=${2:-3}
secs=${3:-2}
so=$build/src/redismodule/ratelimit.so
[ -f "$so" ] || { echo "module.sh: $so not built" >&2; exit 1; }
RLT_REDIS_EXTRA_ARGS="--loadmodule $so" exec sh "$here/../../tests/redis/redis-servers.sh" \
    run standalone -- sh -c '
    set -eu
    build=$1 rounds=$2 secs=$3
    port=${RLT_REDIS_SERVERS#*:}
    cli() { redis-cli -p "$port" "$@"; }
    echo "redis-server $(redis-server --version | sed "s/.*v=\([^ ]*\).*/\1/"), $(nproc) cores, load $(cut -d" " -f1-3 /proc/loadavg)"
    lua=$build/src/redis/script.c
    sha_gcra=$(cli SCRIPT LOAD "$(cat "$lua.gcra.lua")")
    sha_tb=$(cli SCRIPT LOAD "$(cat "$lua.token_bucket.lua")")
    sha_sw=$(cli SCRIPT LOAD "$(cat "$lua.sliding_window.lua")")
    sha_fw=$(cli SCRIPT LOAD "$(cat "$lua.fixed_window.lua")")
    # N=100 per 1 s: scale 1, unit 10000 us, cap 100 x 10000 (gcra.lua / token_bucket.lua:
    # now charge room scale; the window scripts: now N W cost).  Key names as the library.
    K="rlt:{rb:__rand_int__}"
    bench() { # name cmdstat args...
        name=$1 stat=$2
        shift 2
        cli FLUSHALL >/dev/null # every case starts from an empty keyspace
        cli CONFIG RESETSTAT >/dev/null
        rps=$(redis-benchmark -p "$port" -c 4 -P 16 -n 400000 -r 1000000 -q "$@" |
              tr "\r" "\n" | grep -v "^$" | tail -1 | sed "s/.*: \([0-9.]*\) requests.*/\1/")
        us=$(cli INFO commandstats | tr -d "\r" |
             sed -n "s/^cmdstat_$stat:.*usec_per_call=\([0-9.]*\).*/\1/p")
        printf "%-34s usec_per_call %6s   (%s req/s)\n" "$name" "$us" "$rps"
    }
    r=1
    while [ $r -le "$rounds" ]; do
        echo "round $r"
        bench "INCR" incr INCR "rb:__rand_int__"
        bench "module CL.THROTTLE" cl.throttle CL.THROTTLE "rb:__rand_int__" 15 30 60 1
        bench "module RL.CHECK gcra" rl.check RL.CHECK "rb:__rand_int__" gcra:100/1s
        bench "scripts gcra.lua" evalsha EVALSHA "$sha_gcra" 1 "$K:5:100:1000000000:100:0:0" -1 10000 990000 1
        bench "module RL.CHECK token_bucket" rl.check RL.CHECK "rb:__rand_int__" token_bucket:100/1s
        bench "scripts token_bucket.lua" evalsha EVALSHA "$sha_tb" 1 "$K:4:100:1000000000:100:0:0" -1 10000 990000 1
        bench "module RL.CHECK sliding_window" rl.check RL.CHECK "rb:__rand_int__" sliding_window:100/1s
        bench "scripts sliding_window.lua" evalsha EVALSHA "$sha_sw" 1 "$K:3:100:1000000000:100:0:0" -1 100 1000000 1
        bench "module RL.CHECK fixed_window" rl.check RL.CHECK "rb:__rand_int__" fixed_window:100/1s
        bench "scripts fixed_window.lua" evalsha EVALSHA "$sha_fw" 1 "$K:1:100:1000000000:100:0:0" -1 100 1000000 1
        cli FLUSHALL >/dev/null
        for e in module scripts; do
            "$build/bench/redis/bench_module" "$RLT_REDIS_SERVERS" "$secs" "$e"
        done
        cli FLUSHALL >/dev/null
        r=$((r + 1))
    done
' module.sh "$build" "$rounds" "$secs"
