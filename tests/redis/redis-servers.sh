#!/bin/sh
# Starts and stops private redis-server processes for the Redis tests, on loopback ephemeral
# ports, each in its own temporary directory, with no persistence.
#
#   redis-servers.sh run standalone|cluster|cluster6|sentinel -- CMD [ARGS...]
#       starts one server (or a 3-node cluster; cluster6: 3 masters s0-s2 with one replica
#       each, s3-s5, cluster-node-timeout 1000 ms, cluster-require-full-coverage no;
#       sentinel: master s0, its replica s1 and three sentinels s2-s4 watching it as
#       "mymaster", down-after 1000 ms, failover-timeout 3000 ms, exported as
#       RLT_REDIS_SENTINELS), exports RLT_REDIS_BASE (the temp dir),
#       RLT_REDIS_SERVERS ("127.0.0.1:PORT[,...]") and RLT_REDIS_SH (this script), runs CMD,
#       and always stops every server it started (trap on exit, also on failure or signal).
#       Server i lives in $RLT_REDIS_BASE/sI with files `port`, `pid` and `args`.
#       $RLT_REDIS_EXTRA_ARGS (if set) is added to every server's arguments (e.g. --loadmodule).
#   redis-servers.sh start DIR [PORT [EXTRA REDIS ARGS...]]   start one server in DIR
#   redis-servers.sh restart DIR                              start it again, same port and args
#   redis-servers.sh stop DIR                                 stop it (SIGCONT, TERM, then KILL)
#
# Fails loudly (exit 1) when redis-server or redis-cli is missing: the tests never skip.
set -eu

die() { echo "redis-servers.sh: $*" >&2; exit 1; }

need_tools() {
    command -v redis-server >/dev/null 2>&1 ||
        die "redis-server is not installed (apt-get install redis-server): the Redis tests need it"
    command -v redis-cli >/dev/null 2>&1 ||
        die "redis-cli is not installed (apt-get install redis-tools): the Redis tests need it"
}

alive() { [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

# answers_as_ours DIR PORT: 0 when the server answering on PORT is the one whose pid is in
# DIR/pid.  A PONG alone is not enough: when the port is already another test's server (or
# sentinel), that one answers while ours is still failing to bind, and a test would run on
# a stranger's server (a replica or a sentinel refuses every write: the test fails at once).
answers_as_ours() {
    [ -f "$1/pid" ] || return 1
    got=$(redis-cli -h 127.0.0.1 -p "$2" info server 2>/dev/null | tr -d '\r' |
        sed -n 's/^process_id://p')
    [ "$got" = "$(cat "$1/pid")" ]
}

# bind_failed DIR: 0 when the server's log says it could not listen (the port was taken).
bind_failed() { grep -qs 'Could not create server TCP listening socket' "$1/log"; }

# came_up DIR PORT: waits (5 s at most) for the server just started in DIR to answer on PORT as
# itself, and records the port; 1 as soon as it cannot (the port was taken, or it died).
came_up() {
    i=0
    while [ $i -lt 100 ]; do
        if answers_as_ours "$1" "$2"; then
            echo "$2" >"$1/port"
            return 0
        fi
        bind_failed "$1" && return 1
        [ -f "$1/pid" ] && ! alive "$1" && return 1
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# reserve_port PORT DIR: 0 when PORT is now DIR's for as long as DIR exists.  A server stopped
# by a test keeps its port reserved, so that no other test's server starts on it before it is
# restarted there; a reservation whose DIR is gone (its run ended) is taken over.
reserve_port() {
    rp_dir="${TMPDIR:-/tmp}/rlt-redis-ports"
    mkdir -p "$rp_dir" "$2"
    set -- "$1" "$(cd "$2" && pwd)"
    if mkdir "$rp_dir/$1" 2>/dev/null; then
        echo "$2" >"$rp_dir/$1/owner"
        return 0
    fi
    rp_owner=$(cat "$rp_dir/$1/owner" 2>/dev/null || true)
    [ "$rp_owner" = "$2" ] && return 0
    if [ -n "$rp_owner" ] && [ ! -d "$rp_owner" ]; then
        echo "$2" >"$rp_dir/$1/owner"
        return 0
    fi
    return 1
}

# start DIR PORT ARGS...: one attempt; 0 when the server answers as itself.
start_on() {
    dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    rm -f "$dir/pid" "$dir/log" # a failed try's: neither may speak for this one
    printf '%s\n' "$*" >"$dir/args"
    # shellcheck disable=SC2086
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no \
        --daemonize yes --pidfile "$dir/pid" --logfile "$dir/log" $* >/dev/null 2>&1 || return 1
    came_up "$dir" "$port"
}

cmd_start() {
    need_tools
    dir=$1
    port=${2:-0}
    [ $# -ge 2 ] && shift 2 || shift $#
    if [ "$port" != 0 ]; then
        start_on "$dir" "$port" "$@" || die "cannot start redis-server on port $port (see $dir/log)"
        return
    fi
    tries=0
    while [ $tries -lt 20 ]; do
        # A port below Linux's ephemeral range (32768-60999), so that no client connection
        # can be holding it as its local port when the server is restarted on it later; a
        # collision with another test's server just means another try.
        port=$(( ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000) + 20000 ))
        tries=$((tries + 1))
        reserve_port "$port" "$dir" || continue
        tries=$((tries - 1))
        rm -f "$dir/pid"
        start_on "$dir" "$port" "$@" && return 0
        tries=$((tries + 1))
    done
    die "cannot start redis-server (see $dir/log)"
}

# start_sentinel DIR MASTER_PORT: a sentinel on a free port watching 127.0.0.1:MASTER_PORT.
start_sentinel() {
    dir=$1 mport=$2
    mkdir -p "$dir"
    tries=0
    while [ $tries -lt 20 ]; do
        port=$(( ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000) + 20000 ))
        tries=$((tries + 1))
        reserve_port "$port" "$dir" || continue
        tries=$((tries - 1))
        rm -f "$dir/pid" "$dir/log"
        printf '%s\n' "port $port" "bind 127.0.0.1" "dir $dir" \
            "sentinel monitor mymaster 127.0.0.1 $mport 2" \
            "sentinel down-after-milliseconds mymaster 1000" \
            "sentinel failover-timeout mymaster 3000" \
            "sentinel parallel-syncs mymaster 1" >"$dir/sentinel.conf"
        echo "sentinel" >"$dir/args"
        if redis-server "$dir/sentinel.conf" --sentinel --daemonize yes --pidfile "$dir/pid" \
            --logfile "$dir/log" >/dev/null 2>&1; then
            came_up "$dir" "$port" && return 0
            cmd_stop "$dir"
        fi
        tries=$((tries + 1))
    done
    die "cannot start redis-server --sentinel (see $dir/log)"
}

# cluster6_settled: until every node of a cluster6 says cluster_state:ok and every replica
# (s3-s5) is in sync with its master, so that a test can kill one.
cluster6_settled() {
    for k in 0 1 2 3 4 5; do
        wait_for "$(cat "$base/s$k/port")" cluster_state ok cluster info
    done
    for k in 3 4 5; do
        wait_for "$(cat "$base/s$k/port")" master_link_status up info replication
    done
}

# wait_for PORT FIELD VALUE COMMAND...: until `redis-cli -p PORT COMMAND` prints FIELD:VALUE
# (INFO style) or FIELD then VALUE on consecutive lines (SENTINEL MASTER style), 20 s at most.
wait_for() {
    port=$1 field=$2 value=$3
    shift 3
    n=0
    until redis-cli -p "$port" "$@" 2>/dev/null | tr -d '\r' |
        awk -v f="$field" -v v="$value" '$0 == f ":" v { ok = 1 } prev == f && $0 == v { ok = 1 }
                                         { prev = $0 } END { exit !ok }'; do
        n=$((n + 1))
        [ $n -lt 400 ] || die "timed out waiting for $field=$value on port $port ($*)"
        sleep 0.05
    done
}

cmd_stop() {
    dir=$1
    alive "$dir" || return 0
    pid=$(cat "$dir/pid")
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
}

cmd_restart() {
    dir=$1
    cmd_stop "$dir"
    # The old socket may take a moment to go: a few tries on the same port.
    tries=0
    while [ $tries -lt 20 ]; do
        rm -f "$dir/pid" # the dead server's: start_on would take it for the new one's
        # shellcheck disable=SC2046
        start_on "$dir" "$(cat "$dir/port")" $(cat "$dir/args") && return 0
        sleep 0.1
        tries=$((tries + 1))
    done
    die "cannot restart redis-server on port $(cat "$dir/port") (see $dir/log)"
}

cmd_run() {
    need_tools
    kind=$1
    shift
    [ "${1:-}" = "--" ] && shift
    base=$(mktemp -d "${TMPDIR:-/tmp}/rlt-redis.XXXXXX")
    cleanup() {
        # No persistence: nothing to lose, so no graceful shutdown (a master with replicas
        # waits for them for seconds on SIGTERM).
        for s in "$base"/s*; do
            if [ -d "$s" ] && alive "$s"; then kill -KILL "$(cat "$s/pid")" 2>/dev/null || true; fi
        done
        n=0 # gone before their directories are removed
        for s in "$base"/s*; do
            while [ -d "$s" ] && alive "$s" && [ $n -lt 100 ]; do sleep 0.02; n=$((n + 1)); done
        done
        rm -rf "$base" || true
    }
    trap cleanup EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    case $kind in
    standalone)
        # shellcheck disable=SC2086
        cmd_start "$base/s0" 0 ${RLT_REDIS_EXTRA_ARGS:-}
        servers="127.0.0.1:$(cat "$base/s0/port")"
        ;;
    cluster)
        servers=""
        for k in 0 1 2; do # (functions clobber i: POSIX sh has no locals)
            # shellcheck disable=SC2086
            cmd_start "$base/s$k" 0 --cluster-enabled yes --cluster-config-file nodes.conf \
                --cluster-node-timeout 2000 ${RLT_REDIS_EXTRA_ARGS:-}
            servers="$servers${servers:+,}127.0.0.1:$(cat "$base/s$k/port")"
        done
        # shellcheck disable=SC2046
        redis-cli --cluster create $(echo "$servers" | tr ',' ' ') --cluster-replicas 0 \
            --cluster-yes >"$base/create.log" 2>&1 || { cat "$base/create.log" >&2; die "cluster create failed"; }
        for k in 0 1 2; do
            n=0
            until redis-cli -p "$(cat "$base/s$k/port")" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; do
                n=$((n + 1))
                [ $n -lt 200 ] || die "cluster did not become ready"
                sleep 0.05
            done
        done
        ;;
    cluster6)
        servers=""
        for k in 0 1 2 3 4 5; do
            # shellcheck disable=SC2086
            cmd_start "$base/s$k" 0 --cluster-enabled yes --cluster-config-file nodes.conf \
                --cluster-node-timeout 1000 --cluster-require-full-coverage no --repl-diskless-sync-delay 0 \
                ${RLT_REDIS_EXTRA_ARGS:-}
            servers="$servers${servers:+,}127.0.0.1:$(cat "$base/s$k/port")"
        done
        # shellcheck disable=SC2046
        redis-cli --cluster create $(echo "$servers" | tr ',' ' ') --cluster-replicas 1 \
            --cluster-yes >"$base/create.log" 2>&1 || { cat "$base/create.log" >&2; die "cluster create failed"; }
        cluster6_settled
        # The tests kill s0-s2 as masters.  On a loaded machine a master can miss the 1 s node
        # timeout while the cluster forms, and its replica takes its slots over: give them back
        # (a manual failover, run on the node that should be master), and wait again.
        moved=""
        for k in 0 1 2; do
            p=$(cat "$base/s$k/port")
            if ! redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r' | grep -qx 'role:master'; then
                redis-cli -p "$p" cluster failover >/dev/null 2>&1 || die "s$k is not a master and CLUSTER FAILOVER failed"
                wait_for "$p" role master info replication
                moved=1
            fi
        done
        [ -z "$moved" ] || cluster6_settled
        servers=$(echo "$servers" | cut -d, -f1-3) # the masters are the seeds
        ;;
    sentinel)
        # shellcheck disable=SC2086
        cmd_start "$base/s0" 0 --repl-diskless-sync-delay 0 ${RLT_REDIS_EXTRA_ARGS:-}
        mport=$(cat "$base/s0/port")
        # shellcheck disable=SC2086
        cmd_start "$base/s1" 0 --replicaof 127.0.0.1 "$mport" --repl-diskless-sync-delay 0 \
            ${RLT_REDIS_EXTRA_ARGS:-}
        wait_for "$(cat "$base/s1/port")" master_link_status up info replication
        sentinels=""
        for k in 2 3 4; do
            start_sentinel "$base/s$k" "$mport"
            sentinels="$sentinels${sentinels:+,}127.0.0.1:$(cat "$base/s$k/port")"
        done
        # Every sentinel knows the other two and the replica: a failover can be agreed on.
        for k in 2 3 4; do
            wait_for "$(cat "$base/s$k/port")" num-other-sentinels 2 sentinel master mymaster
            wait_for "$(cat "$base/s$k/port")" num-slaves 1 sentinel master mymaster
        done
        servers="127.0.0.1:$mport"
        export RLT_REDIS_SENTINELS="$sentinels"
        ;;
    *) die "unknown kind '$kind' (standalone, cluster, cluster6 or sentinel)" ;;
    esac
    export RLT_REDIS_BASE="$base" RLT_REDIS_SERVERS="$servers" RLT_REDIS_SH="$0"
    set +e
    "$@"
    rc=$?
    set -e
    exit $rc
}

[ $# -ge 1 ] || die "usage: $0 run standalone|cluster|cluster6|sentinel -- CMD... | start|restart|stop DIR"
what=$1
shift
case $what in
run) cmd_run "$@" ;;
start) cmd_start "$@" ;;
restart) cmd_restart "$@" ;;
stop) cmd_stop "$@" ;;
*) die "unknown command '$what'" ;;
esac
