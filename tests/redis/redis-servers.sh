#!/bin/sh
# Starts and stops private redis-server processes for the Redis tests, on loopback ephemeral
# ports, each in its own temporary directory, with no persistence.
#
#   redis-servers.sh run standalone|cluster -- CMD [ARGS...]
#       starts one server (or a 3-node cluster), exports RLT_REDIS_BASE (the temp dir),
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

# start DIR PORT ARGS...: one attempt; 0 when the server answers PING.
start_on() {
    dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    printf '%s\n' "$*" >"$dir/args"
    # shellcheck disable=SC2086
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no \
        --daemonize yes --pidfile "$dir/pid" --logfile "$dir/log" $* >/dev/null 2>&1 || return 1
    i=0
    while [ $i -lt 100 ]; do
        if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "$port" >"$dir/port"
            return 0
        fi
        [ -f "$dir/pid" ] && ! alive "$dir" && return 1
        sleep 0.05
        i=$((i + 1))
    done
    return 1
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
        rm -f "$dir/pid"
        start_on "$dir" "$port" "$@" && return 0
        tries=$((tries + 1))
    done
    die "cannot start redis-server (see $dir/log)"
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
        for s in "$base"/s*; do [ -d "$s" ] && cmd_stop "$s"; done
        rm -rf "$base"
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
    *) die "unknown kind '$kind' (standalone or cluster)" ;;
    esac
    export RLT_REDIS_BASE="$base" RLT_REDIS_SERVERS="$servers" RLT_REDIS_SH="$0"
    set +e
    "$@"
    rc=$?
    set -e
    exit $rc
}

[ $# -ge 1 ] || die "usage: $0 run standalone|cluster -- CMD... | start|restart|stop DIR"
what=$1
shift
case $what in
run) cmd_run "$@" ;;
start) cmd_start "$@" ;;
restart) cmd_restart "$@" ;;
stop) cmd_stop "$@" ;;
*) die "unknown command '$what'" ;;
esac
