#!/bin/sh
# redis-servers.sh never hands a test a server it did not start: a start on a port another
# server already holds fails (it used to take that server's PONG for its own, and the test ran
# on a stranger's replica or sentinel); a start on a free port, a restart and a stop work.
set -u
SH=$1
base=$(mktemp -d "${TMPDIR:-/tmp}/rlt-servers-sh.XXXXXX")
trap 'for d in "$base"/*; do sh "$SH" stop "$d" 2>/dev/null; done; rm -rf "$base"' EXIT
fail() { echo "FAIL $*" >&2; exit 1; }

sh "$SH" start "$base/a" 0 || fail "a start on a free port"
port=$(cat "$base/a/port")
redis-cli -p "$port" set owner a >/dev/null || fail "server a does not answer"

if sh "$SH" start "$base/b" "$port" 2>"$base/b.err"; then
    fail "a start on port $port (held by server a) succeeded"
fi
grep -q "cannot start redis-server on port $port" "$base/b.err" || fail "no clear error: $(cat "$base/b.err")"
[ "$(redis-cli -p "$port" get owner)" = a ] || fail "server a was disturbed"
echo "ok a start on a taken port fails"

sh "$SH" restart "$base/a" || fail "restart on its own port"
[ "$(cat "$base/a/port")" = "$port" ] || fail "restart moved the port"
redis-cli -p "$port" info server | tr -d '\r' | grep -qx "process_id:$(cat "$base/a/pid")" ||
    fail "after the restart the pid file is not the answering server's"
echo "ok a restart comes back on its port, pid file true"

sh "$SH" stop "$base/a"
redis-cli -p "$port" ping >/dev/null 2>&1 && fail "server a still answers after stop"
echo "ok stop"
