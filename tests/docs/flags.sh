#!/bin/bash
# flags.sh SOURCE_DIR RATELIMITD RATELIMIT: every option the programs' --help lists is in their
# manual page (ratelimitd(8), ratelimit(1)); ratelimitd(8) describes the gRPC listener; and the
# README's Quick start shows the options that move the listeners (a second daemon, or a busy
# port, is the first thing a new user hits).
set -u
src=$1 daemon=$2 cli=$3
fail=0
bad() { echo "FAIL $*"; fail=1; }
# in_man PAGE FLAG: FLAG (--x-y) written in roff (\-\-x\-y) and not as the start of a longer one.
in_man() { grep -q -- "$(printf '%s' "$2" | sed 's/-/\\\\-/g')\\([^a-z\\\\]\\|\\\\[^-]\\|$\\)" "$1"; }
flags() { "$@" --help 2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u; }
n=0
for f in $(flags "$daemon"); do
  n=$((n + 1))
  in_man "$src/docs/man/ratelimitd.8" "$f" || bad "ratelimitd --help lists $f; ratelimitd(8) does not"
done
for c in "" sim "sim --fleet" "sim --backend 1" replay headers bench quota; do
  for f in $(flags "$cli" $c); do
    n=$((n + 1))
    in_man "$src/docs/man/ratelimit.1" "$f" || bad "ratelimit $c --help lists $f; ratelimit(1) does not"
  done
done
[ "$n" -gt 40 ] || bad "only $n options found in the --help texts"
for w in gRPC 'grpc\\-port' ShouldRateLimit; do
  grep -q "$w" "$src/docs/man/ratelimitd.8" || bad "ratelimitd(8) does not mention $w"
done
quick=$(awk '/^## Quick start/ { on = 1; next } /^## / { on = 0 } on' "$src/README.md")
for f in --port --http-port --grpc-port --bind; do
  printf '%s\n' "$quick" | grep -q -- "$f " || bad "the README's Quick start does not show $f"
done
# The contributor's guide and the test command stand alone: nothing outside the checkout.
for f in CONTRIBUTING.md scripts/test scripts/run scripts/deps; do
  grep -n '\.\./shared\|/work/shared' "$src/$f" && bad "$f refers to a folder outside the checkout"
done
grep -q '^### Files to copy' "$src/CONTRIBUTING.md" || bad "CONTRIBUTING.md lacks the style guide's files to copy"
[ "$fail" = 0 ] && echo "ok   $n options of --help in the manual pages; gRPC in ratelimitd(8); the port options in the Quick start"
exit "$fail"
