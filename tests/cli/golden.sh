#!/bin/bash
# golden.sh RATELIMIT SOURCE_DIR: runs the `ratelimit` command on fixed inputs and compares
# stdout (and written files) byte for byte with tests/cli/golden/.  To accept new output after
# a deliberate change:  RLT_UPDATE_GOLDEN=1 ctest -R cli_golden  (then review `git diff`).
# The sim goldens are the program's own output, reviewed once; the replay goldens were checked
# by hand against the policies' arithmetic (see docs/cli.md).
set -u
rl=$1 src=$2
golden=$src/tests/cli/golden ex=$src/examples
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C
fail=0 ok=0

# check NAME FILE: compares FILE with golden/NAME (or rewrites it).
check() {
  if [ "${RLT_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$2" "$golden/$1"
    echo "updated $1"
    ok=$((ok + 1))
  elif cmp -s "$2" "$golden/$1"; then
    echo "ok   $1"
    ok=$((ok + 1))
  else
    echo "FAIL $1: output differs from tests/cli/golden/$1:"
    diff -u "$golden/$1" "$2" | head -40
    fail=$((fail + 1))
  fi
}

# run NAME STDIN ARGS...: runs the command (exit status must be 0) and checks its stdout.
run() {
  local name=$1 in=$2
  shift 2
  if ! "$rl" "$@" <"$in" >"$tmp/$name" 2>"$tmp/$name.err"; then
    echo "FAIL $name: exit status $? from ratelimit $*: $(head -3 "$tmp/$name.err")"
    fail=$((fail + 1))
    return
  fi
  check "$name" "$tmp/$name"
}

# The simulator.
run sim_default.out /dev/null sim
run sim_random.out /dev/null sim --pattern random --rate 0.6 --seed 42
run sim_random_long.out /dev/null sim --pattern random --rate 1.5 --seed 3 --limit 10 --window 20 --duration 200 --width 80
run sim_llm.out /dev/null sim --llm
run sim_llm_small.out /dev/null sim --llm --streams 8 --requests 300 --budget 20000 --max-tokens 512 --estimate 128 --seed 7
run sim_steady.out /dev/null sim --pattern steady --rate 0.5
run sim_burst.out /dev/null sim --pattern burst --limit 3 --window 6
run sim_at.out /dev/null sim --at 1,2,9.5,9.6,10,10.5,11,30 --until 35
run sim_trace.out "$ex/boundary.trace" sim --trace -
run sim_accuracy.out /dev/null sim --pattern random --rate 0.45 --seed 2024 --duration 20000 --accuracy
run sim_accuracy_large.out /dev/null sim --pattern random --rate 2 --seed 9 --limit 100 --window 60 --duration 20000 --accuracy
run sim_svg.out /dev/null sim --svg "$tmp/sim_default.svg"
check sim_default.svg "$tmp/sim_default.svg"
# A penalty box on every algorithm (fixed window checked by hand: blocks of 4, 8, 16 ticks).
run sim_block.out /dev/null sim --pattern steady --rate 1 --block '4s*2..20s'
run sim_hold.out /dev/null sim --at 0,0.5,1,1.5,2,2.5,3,6 --hold 2.2 --limit 3 --window 4
run sim_accuracy_svg.out /dev/null sim --pattern random --rate 0.45 --seed 7 --duration 3000 --accuracy --svg "$tmp/sim_accuracy.svg"
check sim_accuracy.svg "$tmp/sim_accuracy.svg"
# The fleet simulator, one table per pattern (fleet.sh checks properties of them), and a picture.
for p in steady skewed join die flash; do
  run "sim_fleet_$p.out" /dev/null sim --fleet 20 --pattern "$p" --seconds 6
done
# break: node 0's stream breaks at S/3 = 4 s; its assignment expires by 7 s, then it runs its
# --expired-assignment fallback (split).
run sim_fleet_break.out /dev/null sim --fleet 20 --pattern break --seconds 12 --ttl 3s
run sim_fleet_latency.out /dev/null sim --fleet 20 --pattern flash --seconds 6 --latency 50ms --interval 0.5s --ttl 2s --lease 4 --seed 3
run sim_fleet_svg.out /dev/null sim --fleet 20 --pattern flash --seconds 6 --svg "$tmp/sim_fleet.svg"
check sim_fleet.svg "$tmp/sim_fleet.svg"
# Each picture is well-formed XML and renders.
for svg in sim_default.svg sim_accuracy.svg sim_fleet.svg; do
  if command -v python3 >/dev/null; then
    if python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg"), r.tag' "$tmp/$svg"; then
      echo "ok   $svg is well-formed XML"
      ok=$((ok + 1))
    else
      echo "FAIL $svg is not well-formed XML"
      fail=$((fail + 1))
    fi
  fi
  if command -v rsvg-convert >/dev/null; then
    if rsvg-convert -o "$tmp/$svg.png" "$tmp/$svg" && [ -s "$tmp/$svg.png" ]; then
      echo "ok   $svg renders (rsvg-convert)"
      ok=$((ok + 1))
    else
      echo "FAIL $svg does not render with rsvg-convert"
      fail=$((fail + 1))
    fi
  fi
done
# The README's picture is the default one.
if cmp -s "$tmp/sim_default.svg" "$src/docs/img/sim-boundary.svg"; then
  echo "ok   docs/img/sim-boundary.svg is today's 'ratelimit sim --svg'"
  ok=$((ok + 1))
elif [ "${RLT_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$tmp/sim_default.svg" "$src/docs/img/sim-boundary.svg"
  echo "updated docs/img/sim-boundary.svg"
else
  echo "FAIL docs/img/sim-boundary.svg differs from 'ratelimit sim --svg' (RLT_UPDATE_GOLDEN=1 rewrites it)"
  fail=$((fail + 1))
fi

# Replay: one verdict line per request, several policies over the same traces.
for p in fixed_window:4/10s sliding_log:4/10s sliding_window:4/10s token_bucket:4/10s gcra:4/10s leaky_bucket:4/10s,queue=4; do
  run "replay_boundary_${p%%:*}.out" "$ex/boundary.trace" replay --policy "$p"
done
run replay_api_token_bucket.out "$ex/api.trace" replay --policy token_bucket:10/1s,burst=5
run replay_api_gcra_ms.out "$ex/api.trace" replay --policy gcra:10/1s,burst=5 --unit ms
# block= (checked by hand: the breach at 9.9 blocks until 13.9, the new window at 10 is still
# blocked) and jitter= (each wait within [exact, exact x 1.5], per key and instant).
run replay_block_fixed_window.out "$ex/boundary.trace" replay --policy 'fixed_window:3/10s,block=4s*2..20s'
run replay_api_gcra_jitter.out "$ex/api.trace" replay --policy 'gcra:1/2s,jitter=50%'
run replay_api_leaky.out "$ex/api.trace" replay --policy leaky_bucket:10/1s,queue=5
run replay_api_summary.out "$ex/api.trace" replay --policy token_bucket:10/1s,burst=5 --summary
run replay_api_summary_top1.out "$ex/api.trace" replay --policy gcra:1/1s --summary --top-keys 1
run replay_api_summary_top0.out "$ex/api.trace" replay --policy gcra:1/1s --summary --top-keys 0
run replay_combined.out "$ex/access.log" replay --policy token_bucket:2/1s --format combined
run replay_month_end_paris.out "$ex/month_end.trace" replay --policy fixed_window:2/1mo,tz=Europe/Paris
run replay_month_end_new_york.out "$ex/month_end.trace" replay --policy fixed_window:2/1mo,tz=America/New_York
run replay_combined_calendar.out "$ex/access.log" replay --policy fixed_window:3/1mo,tz=Europe/Paris --format combined
# Charge after the response: reserve:NAME / settle:NAME (checked by hand: docs/cli.md).
run replay_llm_token_bucket.out "$ex/llm.trace" replay --policy token_bucket:1000/1m
run replay_llm_fixed_window.out "$ex/llm.trace" replay --policy fixed_window:1000/1m
run replay_combined_epoch.out "$ex/access.log" replay --policy fixed_window:3/5s --format combined --epoch
run replay_combined_summary.out "$ex/access.log" replay --policy token_bucket:2/1s --format combined --summary
# IPv6 clients per /56 (rlt_addr_key), or per /128 with --prefix: 2001:db8::1 either way here.
run replay_combined_prefix_128.out "$ex/access.log" replay --policy token_bucket:2/1s --format combined --prefix 128 --summary
run replay_combined_key_user.out "$ex/access.log" replay --policy token_bucket:2/1s --format combined --key user
run replay_combined_key_request.out "$ex/access.log" replay --policy fixed_window:1/1m --format combined --key request --summary
run replay_combined_cost_bytes.out "$ex/access.log" replay --policy token_bucket:10000/1s --format combined --cost bytes
run replay_combined_key_appended.out "$ex/access-apikey.log" replay --policy gcra:2/1s --format combined --key 10 --cost 11

# Headers.
run headers_gcra.out /dev/null headers --policy gcra:2/1s --at 0,0,0,0.25,1 --name api
run headers_leaky.out /dev/null headers --policy leaky_bucket:2/1s,queue=1 --at 0,0,0 --unit s
# burst or queue != N for every algorithm: q/w is the rate, never the burst (docs/algorithms.md)
for p in gcra:100/1m,burst=20 token_bucket:1000/1h,burst=10 leaky_bucket:2/1s,queue=5 \
  fixed_window:4/10s sliding_log:4/10s sliding_window:4/10s concurrency:3/30s; do
  run "headers_rate_${p%%:*}.out" /dev/null headers --policy "$p" --at 0,0,0,0,0.5 --cost 1 --name api
done

echo "$ok passed, $fail failed"
[ "$fail" = 0 ]
