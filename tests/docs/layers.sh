#!/usr/bin/env bash
# scripts/layers guards the architecture without a build: the tree as it is passes, and in a copy
# each planted fault is refused by name (a room using one listed below it, a server room using
# a later one, a circle by calls, a file over 700 lines).  Usage: layers.sh SOURCE_DIR
set -uo pipefail
src=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
out=$(python3 "$src/scripts/layers" --root "$src") || bad "the tree fails its own check: $out"
echo "$out" | tail -1
plant() { # plant NAME EXPECTED EDIT...: copy, edit, expect a refusal matching EXPECTED
  local name=$1 want=$2
  shift 2
  local t
  t=$(mktemp -d)
  mkdir -p "$t/docs" "$t/python" "$t/web"
  cp -r "$src/src" "$src/include" "$src/fuzz" "$src/bench" "$t/"
  cp -r "$src/python/src" "$t/python/"
  cp -r "$src/web/wasm" "$t/web/"
  cp "$src/docs/architecture.md" "$t/docs/"
  (cd "$t" && eval "$@")
  local got
  got=$(python3 "$src/scripts/layers" --root "$t") && bad "$name: accepted"
  grep -qE "$want" <<<"$got" || bad "$name: expected /$want/, got: $got"
  rm -rf "$t"
}
# The core may use nothing above it.
plant core_uses_the_store '^order: room core uses room store' \
  "sed -i '1a #include \"ratelimit/store.h\"' src/core/algo.c"
# base/ is the server's lowest room: it may not use http/.
plant base_uses_http '^order: server room base/ uses http/' \
  "sed -i '1a #include \"server/http/http1.h\"' src/server/base/log.c"
# Two units of one room calling each other.
plant circle_by_calls '^circle of 2 units: src/core/jitter src/core/text' \
  "printf 'int rlt__plant_a(void) { return rlt__plant_b(); }\n' >>src/core/jitter.c;
   printf 'int rlt__plant_b(void) { return rlt__plant_a(); }\n' >>src/core/text.c"
plant long_file '^long: src/core/algo.c has 7[0-9][0-9] lines' \
  "for i in \$(seq 700); do echo '/* */' >>src/core/algo.c; done"
[ "$fail" = 0 ] && echo "ok   layers_guards_the_room_order_circles_and_file_length"
exit "$fail"
