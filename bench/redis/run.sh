#!/bin/sh
# Runs the Redis benchmark against a private redis-server: bench_redis (the library: GCRA sync
# and pipelined, every algorithm pipelined, the lease mode), then redis-benchmark calling a
# hand-written Lua GCRA the same two ways, each line with the server's usec_per_call of the
# script (INFO commandstats, reset before each case).
# Usage: bench/redis/run.sh BUILD_DIR [SECONDS_PER_CASE]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
secs=${2:-2}
exec sh "$here/../../tests/redis/redis-servers.sh" run standalone -- sh -c '
    set -eu
    port=${RLT_REDIS_SERVERS#*:}
    echo "redis-server $(redis-server --version | sed "s/.*v=\([^ ]*\).*/\1/"), $(nproc) cores, load $(cut -d" " -f1-3 /proc/loadavg)"
    "$0/bench/redis/bench_redis" "$RLT_REDIS_SERVERS" "$1"
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$2/gcra.lua")")
    n=$(awk "BEGIN{print int($1 * 20000)}")
    for P in 1 64; do
        redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
        printf "redis-benchmark hand-written GCRA, 1 connection, pipeline %-3s " "$P"
        redis-benchmark -p "$port" -c 1 -P "$P" -n $((n * P / (P > 1 ? 8 : 1))) -q -r 1024 \
            EVALSHA "$sha" 1 "rb:__rand_int__" 1 1000000 | tr "\r" "\n" | grep -v "^$" |
            tail -1 | sed "s/.*: //" | tr -d "\n"
        redis-cli -p "$port" INFO commandstats | tr -d "\r" |
            sed -n "s/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/  server \1 us\/call/p"
    done
' "$build" "$secs" "$here"
