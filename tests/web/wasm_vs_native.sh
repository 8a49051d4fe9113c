#!/usr/bin/env bash
# The core as WebAssembly decides exactly as the native library: the same scripts of policies
# and decisions (gen_script.py, several seeds) through decide_trace (native) and through
# decide_trace.mjs (Node, web/ratelimit.js, ratelimit.wasm), compared byte for byte: every
# status, verdict, number and the state's bytes after each step.
# Usage: wasm_vs_native.sh DECIDE_TRACE RATELIMIT_WASM SOURCE_DIR
set -euo pipefail
native=$1 wasm=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lines=0
for seed in 1 2 3 4 5; do
  python3 "$src/tests/web/gen_script.py" "$seed" 400 >"$tmp/script"
  "$native" <"$tmp/script" >"$tmp/native"
  node "$src/tests/web/decide_trace.mjs" "$src/web/ratelimit.js" "$wasm" <"$tmp/script" >"$tmp/wasm"
  if ! cmp -s "$tmp/native" "$tmp/wasm"; then
    echo "seed $seed: the WebAssembly core differs from the native one:" >&2
    diff "$tmp/native" "$tmp/wasm" | head -20 >&2
    exit 1
  fi
  # The comparison is worth something only if the script reached every kind of answer.
  for want in '^policy ok ' '^policy error ' '^0 1 ' '^0 0 ' '^-2 ' '^-1 ' '^release 0' '^release -6'; do
    grep -q -- "$want" "$tmp/native" || { echo "seed $seed: no line matching $want" >&2; exit 1; }
  done
  lines=$((lines + $(wc -l <"$tmp/native")))
done
echo "wasm_vs_native: $lines lines equal"
