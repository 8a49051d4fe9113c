#!/usr/bin/env bash
# scripts/run as a newcomer meets it: it installs only what building and running need (not the
# tests' browser, nginx, Prometheus or pytest), and once the daemon is up prints one block with
# the playground's URL and the other doors, and that URL answers with the page.  Usage:
# run_script.sh RATELIMITD (scripts/run runs that binary instead of building; RATELIMITD=...).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
run_set=$(DEPS_LIST=1 "$root/scripts/deps" --run)
all_set=$(DEPS_LIST=1 "$root/scripts/deps")
for p in chromium nginx prometheus python3-pytest python3-flask python3-grpcio; do
  grep -qx "$p" <<<"$run_set" && fail "scripts/deps --run installs $p, a test's package"
  grep -qx "$p" <<<"$all_set" || fail "scripts/deps (the tests' set) lacks $p"
done
for p in cmake libevent-dev libnghttp2-dev wasi-libc; do
  grep -qx "$p" <<<"$run_set" || fail "scripts/deps --run lacks $p, which the build needs"
done
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
RATELIMITD=$bin "$root/scripts/run" --port 0 --http-port 0 --grpc-port 0 --no-snapshot \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 300); do grep -q '^  gRPC ' "$tmp/out" && break; sleep 0.1; done
cat "$tmp/out"
url=$(sed -n 's/^  playground  \(http:[^ ]*\)$/\1/p' "$tmp/out")
[ -n "$url" ] || fail "no playground URL in scripts/run's output"
grep -q '^ratelimitd is up' "$tmp/out" || fail "no block saying the daemon is up"
grep -qE '^  RESP        redis-cli -h 127.0.0.1 -p [0-9]+ CL.THROTTLE' "$tmp/out" || fail "no RESP line"
page=$(curl -s --max-time 10 "$url") || fail "the playground URL $url does not answer"
grep -qi '<html' <<<"$page" || fail "the playground URL $url does not answer with the page"
# The same command, as printed, answers.
cmd=$(sed -n 's/^  RESP        //p' "$tmp/out")
r=$($cmd | tr '\n' ' ')
[ "$r" = "0 16 15 -1 2 " ] || fail "the printed RESP command answered: $r"
kill -TERM $pid
wait $pid || true
grep -q 'ratelimitd: stopped' "$tmp/err" || fail "a TERM to scripts/run did not stop the daemon cleanly: $(cat "$tmp/err")"
echo "ok   scripts_run_installs_only_its_needs_and_prints_the_playground_url"
