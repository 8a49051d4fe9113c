#!/bin/bash
# install_prefix.sh BUILD_DIR SOURCE_DIR: runs the README's commands for an install under a
# prefix of one's own, exactly as shown (the ```sh block with `cmake --install build/release
# --prefix`), in a copy of the checkout whose build/release is BUILD_DIR and with HOME in a
# temporary folder: they install, build the README's hello.c (with -Wl,-rpath and statically)
# and run it, printing what the README shows.  Then checks what the README says around them:
# without -rpath the program stops with the loader's error; and the installed systemd unit:
# `systemd-analyze verify` passes, its ExecStart is this prefix's ratelimitd with the
# installed, commented config (valid as it stands), and SIGHUP (its ExecReload) re-reads
# that file.
set -u
build=$1 src=$2
tmp=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
for tool in cmake pkg-config cc systemd-analyze redis-cli; do
  command -v "$tool" >/dev/null || { echo "FAIL install_prefix needs $tool (Debian: apt-get install cmake pkgconf gcc systemd redis-tools)"; exit 1; }
done

co=$tmp/checkout
mkdir -p "$co/build" "$tmp/home"
ln -s "$build" "$co/build/release"
awk '/^```c$/ && !done { on = 1; next } on && /^```$/ { on = 0; done = 1 } on' "$src/README.md" >"$co/hello.c"
awk '/^```/ && !on { fence = 1; next } fence && /^\$ cc / { on = 1; fence = 0; next }
     { fence = 0 } on && /^```$/ { exit } on' "$src/README.md" >"$tmp/want1.txt"
awk '/^```sh$/ { on = 1; n = 0; blk = ""; next }
     on && /^```$/ { on = 0; if (blk ~ /cmake --install build\/release --prefix/) { printf "%s", blk; exit } next }
     on { blk = blk $0 "\n" }' "$src/README.md" >"$tmp/commands.sh"
[ -s "$co/hello.c" ] && [ -s "$tmp/want1.txt" ] || { echo "FAIL no C program and output in README.md"; exit 1; }
[ -s "$tmp/commands.sh" ] || { echo "FAIL README.md shows no \`cmake --install build/release --prefix\` block"; exit 1; }
echo "the README's commands:"
sed 's/^/  /' "$tmp/commands.sh"

# The block as a user runs it: one shell, stopping at the first failure.
runs=$(grep -c '&& \./hello' "$tmp/commands.sh")
(cd "$co" && HOME=$tmp/home PKG_CONFIG_PATH= bash -e "$tmp/commands.sh") >"$tmp/got.txt" 2>"$tmp/err.txt"
rc=$?
for _ in $(seq "$runs"); do cat "$tmp/want1.txt"; done >"$tmp/want.txt"
grep -v '^-- \(Install\|Up-to-date\)' "$tmp/got.txt" | grep -v '^-- Set runtime path' | tr -d '\r' >"$tmp/got-hello.txt"
if [ "$rc" = 0 ] && cmp -s "$tmp/want.txt" "$tmp/got-hello.txt"; then
  ok "the README's prefix install builds hello.c $runs ways and each prints what the README shows"
else
  bad "the README's prefix install (exit $rc):"
  cat "$tmp/err.txt"
  diff -u "$tmp/want.txt" "$tmp/got-hello.txt"
fi
prefix=$tmp/home/opt/ratelimit
[ -d "$prefix" ] || { echo "FAIL the README's commands installed nothing under \$HOME/opt/ratelimit"; exit 1; }

# What the README says about the loader: a plain pkg-config build stops at start.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -o "$tmp/plain" "$co/hello.c" $(pkg-config --cflags --libs ratelimit) || bad "plain pkg-config build"
if "$tmp/plain" >/dev/null 2>"$tmp/plain.err"; then
  bad "without -rpath the program ran: the README's warning is wrong"
elif grep -q "error while loading shared libraries: libratelimit.so" "$tmp/plain.err"; then
  ok "without -rpath or ldconfig: $(cat "$tmp/plain.err")"
else
  bad "without -rpath: $(cat "$tmp/plain.err")"
fi

# The systemd unit, installed for this prefix.
unit=$prefix/lib/systemd/system/ratelimitd.service
conf=$prefix/etc/ratelimit/ratelimitd.yaml
[ -f "$unit" ] || { echo "FAIL no $unit"; exit 1; }
[ -f "$conf" ] || bad "no $conf"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
case "$exec_start" in
"$prefix/sbin/ratelimitd --config $conf "*) ok "ExecStart=$exec_start" ;;
*) bad "ExecStart is not this prefix's ratelimitd with its config: $exec_start" ;;
esac
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$unit" || bad "no ExecReload sending SIGHUP"
if systemd-analyze verify --man=no "$unit" >"$tmp/sd.out" 2>&1; then
  ok "systemd-analyze verify $unit"
else
  bad "systemd-analyze verify: $(cat "$tmp/sd.out")"
fi
"$prefix/sbin/ratelimitd" --check-config --config "$conf" >/dev/null 2>"$tmp/check.err" ||
  bad "the installed config is not valid as shipped: $(cat "$tmp/check.err")"
grep -v '^#' "$conf" | grep -q '[^[:space:]]' && bad "the installed config has uncommented lines"

# ExecReload has a file to re-read: the daemon started on it (as the unit does, on free ports
# and without the state directory) learns a policy written into it, on SIGHUP.
cp "$conf" "$tmp/before.yaml"
"$prefix/sbin/ratelimitd" --config "$conf" --no-snapshot --port 0 --http-port -1 --grpc-port -1 \
  >"$tmp/d.out" 2>"$tmp/d.err" &
daemon=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/^ratelimitd: resp [^ ]*:\([0-9]*\).*/\1/p' "$tmp/d.out")
  [ -n "$port" ] && break
  sleep 0.05
done
if [ -z "$port" ]; then
  bad "ratelimitd did not start on the installed config: $(cat "$tmp/d.err")"
else
  before=$(redis-cli -p "$port" RL.CHECK k fromfile 2>&1)
  printf 'policies:\n  fromfile: fixed_window:7/1h\n' >>"$conf"
  kill -HUP "$daemon"
  after=
  for _ in $(seq 100); do
    after=$(redis-cli -p "$port" --no-raw RL.CHECK k fromfile 2>&1)
    case "$after" in *"(integer) 7"*) break ;; esac
    sleep 0.05
  done
  case "$before/$after" in
  *ERR*"/"*"(integer) 7"*) ok "SIGHUP re-reads the unit's config: policy 'fromfile' unknown before, 7/1h after" ;;
  *) bad "SIGHUP did not re-read $conf: before '$before', after '$after'; log: $(cat "$tmp/d.err")" ;;
  esac
  kill "$daemon"
  wait "$daemon" 2>/dev/null
  daemon=
fi
[ "$fail" = 0 ] && echo "install_prefix: all checks passed"
exit "$fail"
