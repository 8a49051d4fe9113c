#!/bin/bash
# readme_example.sh OUT_DIR README CC [CFLAGS/LIBS...]: extracts the C program of README.md (the
# first ```c block) and the output shown after it (the ``` block whose first line is
# "$ cc ..."), builds the program with CC and the given flags, runs it and compares its output
# (CRLF shown as LF) with the README's, byte for byte.  Used against the build tree
# (readme_c_example) and against the installed package (package_deb).
set -eu
out=$1 readme=$2
shift 2
mkdir -p "$out"
awk '/^```c$/ && !done { on = 1; next } on && /^```$/ { on = 0; done = 1 } on' "$readme" >"$out/hello.c"
awk '/^```/ && !on { fence = 1; next } fence && /^\$ cc / { on = 1; fence = 0; next }
     { fence = 0 } on && /^```$/ { exit } on' "$readme" >"$out/want.txt"
[ -s "$out/hello.c" ] || { echo "FAIL no \`\`\`c block in $readme"; exit 1; }
[ -s "$out/want.txt" ] || { echo "FAIL no '\$ cc' output block after the C block in $readme"; exit 1; }
cc=$1
shift
args=()
for a in "$@"; do [ -n "$a" ] && args+=("$a"); done
if ! "$cc" -std=c11 -Wall -Wextra -Werror -o "$out/hello" "$out/hello.c" "${args[@]}" 2>"$out/cc.err"; then
  echo "FAIL the README's C program does not compile: $cc $out/hello.c ${args[*]}"
  cat "$out/cc.err"
  exit 1
fi
"$out/hello" | tr -d '\r' >"$out/got.txt"
if ! cmp -s "$out/want.txt" "$out/got.txt"; then
  echo "FAIL the README's C program prints something else than the README shows:"
  diff -u "$out/want.txt" "$out/got.txt"
  exit 1
fi
echo "ok   the README's C program compiles and prints what the README shows"
