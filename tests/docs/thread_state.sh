#!/bin/bash
# thread_state.sh SOURCE_DIR: the daemon keeps no hidden per-thread buffers.  Room for one
# request comes from the worker's scratch arena (src/server/base/scratch.h), passed to where it
# is used and counted in max_memory; a `__thread` in src/server is refused unless it is one of
# the per-thread states listed here, each documented at its declaration as "Per-thread state,
# not scratch" (what outlives a request: a thread's identity, its Redis connection, a bounded
# cache, a log limiter).  A planted buffer is refused, to show the check can fail.
set -u
src=$1
ALLOWED="src/server/backend/redis.c src/server/request/decide.c src/server/request/srv.c
src/server/stats/metrics.c src/server/stats/metrics.h"
check() { # check ROOT: prints the refused lines, fails when there are any
  local root=$1 bad=0
  while IFS= read -r hit; do
    f=${hit%%:*}
    rel=${f#"$root"/}
    if ! printf '%s\n' $ALLOWED | grep -qx "$rel"; then
      echo "FAIL $rel: a __thread buffer (take it from the worker's scratch: base/scratch.h): ${hit#*:}"
      bad=1
    elif ! grep -q "Per-thread state, not scratch" "$f"; then
      echo "FAIL $rel: its __thread is not documented as \"Per-thread state, not scratch\""
      bad=1
    fi
  done < <(grep -rn --include='*.c' --include='*.h' '__thread' "$root/src/server")
  return $bad
}
fail=0
check "$src" || fail=1
n=$(grep -rn --include='*.c' --include='*.h' '__thread' "$src/src/server" | wc -l)
[ "$n" -le 6 ] || { echo "FAIL $n __thread lines in src/server (at most the 6 listed states)"; fail=1; }
# The planted fault: a copy of src/server with one hidden buffer more must be refused.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
cp -r "$src/src/server" "$tmp/src/server"
printf 'static __thread char planted[4096];\n' >> "$tmp/src/server/resp/cmd.c"
if check "$tmp" > /dev/null; then
  echo "FAIL a planted __thread buffer in resp/cmd.c was not refused"
  fail=1
fi
[ $fail = 0 ] && echo "ok: no hidden __thread buffers in src/server ($n per-thread state lines)"
exit $fail
