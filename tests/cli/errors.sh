#!/bin/bash
# errors.sh RATELIMIT SOURCE_DIR: the command's usage errors (exit 2, a message naming the bad
# argument) and input errors (exit 1, a message naming the line and what is wrong).
set -u
rl=$1
export LC_ALL=C
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 ok=0

# expect NAME STATUS PATTERN STDIN ARGS...: the exit status must be STATUS and stderr must
# contain PATTERN (a fixed string).
expect() {
  local name=$1 want=$2 pat=$3 in=$4
  shift 4
  # Every case is an error found before any work: a timeout (124) means a check is missing.
  printf '%b' "$in" | timeout 60 "$rl" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL $name: exit status $got, want $want (stderr: $(head -2 "$tmp/err"))"
    fail=$((fail + 1))
  elif ! grep -qF -- "$pat" "$tmp/err"; then
    echo "FAIL $name: stderr lacks '$pat': $(head -2 "$tmp/err")"
    fail=$((fail + 1))
  else
    echo "ok   $name"
    ok=$((ok + 1))
  fi
}

expect no_command 2 "usage: ratelimit" "" 
expect unknown_command 2 "unknown command 'frob'" "" frob
expect sim_unknown_flag 2 "unknown option '--bogus'" "" sim --bogus
expect sim_bad_limit 2 "--limit 'x': not a decimal number" "" sim --limit x
expect sim_zero_limit 2 "--limit '0': must be between 1 and" "" sim --limit 0
expect sim_fractional_limit 2 "--limit '2.5': not a whole number" "" sim --limit 2.5
expect sim_bad_window 2 "--window '-1'" "" sim --window -1
expect sim_bad_block 2 "--block '5s*1..1m': expected DURATION or DURATION*FACTOR..MAX" "" sim --block '5s*1..1m'
expect sim_bad_pattern 2 "unknown --pattern 'zigzag'" "" sim --pattern zigzag
expect sim_bad_at 2 "--at: bad time 'x'" "" sim --at 1,x,3
expect sim_two_sources 2 "alternatives" "" sim --pattern steady --at 1
expect sim_missing_value 2 "option --rate needs a value" "" sim --rate
expect sim_svg_unwritable 1 "cannot write $tmp/no/such/dir.svg" "" sim --svg "$tmp/no/such/dir.svg"
if [ -s "$tmp/out" ]; then echo "FAIL sim_svg_unwritable: printed the table before failing"; fail=$((fail + 1)); fi
expect sim_until_before_last 2 "--until must not be before" "" sim --until 1
expect sim_trace_bad_line 1 "-:2: bad TIME 'x'" "1\nx\n" sim --trace -
expect sim_trace_missing 1 "cannot open /nonexistent/trace" "" sim --trace /nonexistent/trace
expect fleet_zero_nodes 2 "--fleet '0': must be between 1 and 100000" "" sim --fleet 0
expect fleet_too_many_nodes 2 "--fleet '100001': must be between 1 and 100000" "" sim --fleet 100001
expect fleet_bad_pattern 2 "unknown --pattern 'zigzag' (steady, skewed, join, die, flash, break)" "" sim --fleet 10 --pattern zigzag
expect fleet_no_assignment_reuse 2 "--no-assignment 'reuse-last': split, allow-all, deny-all or a token_bucket policy" "" sim --fleet 10 --no-assignment reuse-last
expect fleet_expired_bad 2 "--expired-assignment 'gcra:5/1s': split, allow-all, deny-all, reuse-last or a token_bucket policy" "" sim --fleet 10 --expired-assignment gcra:5/1s
expect fleet_fallback_bad_policy 2 "--no-assignment 'token_bucket:5/1x'" "" sim --fleet 10 --no-assignment token_bucket:5/1x
expect fleet_bad_budget 2 "--budget 'gcra:2/1x'" "" sim --fleet 10 --budget gcra:2/1x
expect fleet_budget_algorithm 2 "--budget 'fixed_window:10/1s': must be a gcra or token_bucket policy" "" sim --fleet 10 --budget fixed_window:10/1s
expect fleet_budget_block 2 "--budget 'gcra:10/1s,block=1s': block= and jitter= are not simulated" "" sim --fleet 10 --budget gcra:10/1s,block=1s
expect fleet_budget_indivisible 1 "--budget 'gcra:5000000000/1s': the quota division cannot divide it" "" sim --fleet 2 --budget gcra:5000000000/1s --seconds 1 --step 100ms
expect fleet_bad_demand 2 "--demand 'x': not a decimal number" "" sim --fleet 10 --demand x
expect fleet_bad_unit 2 "--interval '2h': unknown unit 'h'" "" sim --fleet 10 --interval 2h
expect fleet_bad_seconds 2 "--seconds '0': must be between 0.001 s and 86400 s" "" sim --fleet 10 --seconds 0
expect fleet_ttl_short 2 "--ttl must be at least 3 x --interval" "" sim --fleet 10 --ttl 2s
expect fleet_latency_long 2 "--latency must be below --interval" "" sim --fleet 10 --latency 1s
expect fleet_step_multiple 2 "must be whole multiples of --step (0.03 s)" "" sim --fleet 10 --step 30ms
expect fleet_window_long 2 "--window must not be longer than --seconds" "" sim --fleet 10 --window 20s
expect fleet_too_much_work 2 "is too much work" "" sim --fleet 100000 --seconds 1000 --step 10ms
# The work caps, checked before the run: nodes x steps at most 5e8 (one step more than 100,000
# nodes x 50 s at 10 ms), and the leases' calls at most 4e9 (this one would take about an hour:
# 100 nodes at 1,000,000/s for 1 s take 0.2-4.5 s).
expect fleet_node_steps_cap 2 "--fleet 100000 for 5001 steps is too much work (nodes x steps at most 500000000): lower --fleet or --seconds, or raise --step" "" sim --fleet 100000 --seconds 50.01
expect fleet_lease_calls_cap 2 "--fleet 100000 at --demand 1000000 for 1 s is too much work: the leases may call the global limiter 11000001800 times (at most 4000000000): lower --demand, --fleet or --seconds, or raise --lease" "" sim --fleet 100000 --demand 1000000 --seconds 1
expect fleet_bad_lease 2 "--lease '0': must be between 1 and" "" sim --fleet 10 --lease 0
expect fleet_unknown_flag 2 "unknown option '--bogus'" "" sim --fleet 10 --bogus
expect fleet_missing_value 2 "option --fleet needs a value" "" sim --fleet
expect fleet_svg_unwritable 1 "cannot write $tmp/no/such/dir.svg" "" sim --fleet 10 --svg "$tmp/no/such/dir.svg"
if [ -s "$tmp/out" ]; then echo "FAIL fleet_svg_unwritable: printed the table before failing"; fail=$((fail + 1)); fi
expect replay_no_policy 2 "--policy is required" "" replay
expect replay_bad_policy 2 "--policy 'gcra:2/1x'" "" replay --policy gcra:2/1x
expect replay_bad_algo 2 "--policy 'frob:1/s'" "" replay --policy frob:1/s
expect replay_top_keys_without_summary 2 "--top-keys applies to --summary only" "" replay --policy gcra:1/s --top-keys 5
expect replay_top_keys_bad 2 "--top-keys '-1': expected 0..100000" "" replay --policy gcra:1/s --summary --top-keys -1
expect replay_top_keys_too_many 2 "--top-keys '100001': expected 0..100000" "" replay --policy gcra:1/s --summary --top-keys 100001
expect replay_bad_unit 2 "--unit 'h'" "" replay --policy gcra:1/s --unit h
expect replay_bad_format 2 "--format 'json'" "" replay --policy gcra:1/s --format json
expect replay_bad_key_field 2 "--key 'host'" "" replay --policy gcra:1/s --format combined --key host
expect replay_bad_cost_field 2 "--cost 'size'" "" replay --policy gcra:1/s --format combined --cost size
expect replay_key_needs_combined 2 "--key and --cost apply to --format combined only" "" replay --policy gcra:1/s --key user
LOG='1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 12 "-" "curl" 0.004\n'
expect replay_key_field_missing 1 "line 1: no field 11 (--key 11): the line has 10" "$LOG" replay --policy gcra:1/s --format combined --key 11
expect replay_cost_not_a_number 1 "line 1: --cost 10: '0.004' is not a whole number" "$LOG" replay --policy gcra:1/s --format combined --cost 10
expect replay_cost_field_empty_key 1 "line 1: --key referer: the field is empty" '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /" 200 1 "" "x"\n' replay --policy gcra:1/s --format combined --key referer
expect replay_unknown_flag 2 "unknown option '-x'" "" replay --policy gcra:1/s -x
expect replay_bad_time 1 "line 2: bad TIME 'not-a-time'" "0 a 1\nnot-a-time a 1\n" replay --policy gcra:2/1s
expect replay_missing_key 1 "line 3: missing KEY" "# c\n0 a\n1\n" replay --policy gcra:2/1s
expect replay_bad_cost 1 "line 1: bad COST 'x'" "0 a x\n" replay --policy gcra:2/1s
expect replay_negative_cost 1 "line 1: bad COST '-2': negative" "0 a -2\n" replay --policy gcra:2/1s
expect replay_too_precise 1 "line 1: bad TIME '0.5': more precise than 1 ns" "0.5 a\n" replay --policy gcra:2/1s --unit ns
expect replay_extra_field 1 "line 2: too many fields" "0 a\n0 a 1 1\n" replay --policy gcra:2/1s
expect replay_reserve_needs_a_settling_policy 1 "line 1: reserve:/settle: need a fixed_window" "0 a 1 reserve:x\n" replay --policy leaky_bucket:2/1s
expect replay_bad_reservation_field 1 "line 1: too many fields (expected TIME KEY [COST [reserve:NAME|settle:NAME]]" "0 a 1 hold:x\n" replay --policy gcra:2/1s
expect replay_bad_settle_timeout 2 "--settle-timeout 'x'" "" replay --policy gcra:2/1s --settle-timeout x
expect replay_time_range 1 "line 1: bad TIME '99999999999': out of range" "99999999999 a\n" replay --policy gcra:2/1s
expect replay_combined_bad 1 "line 2: bad timestamp" '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /" 200 1\n1.2.3.4 - - [10/Oct/2000:25:55:36 -0700] "GET /" 200 1\n' replay --policy gcra:2/1s --format combined
expect replay_malformed_address 1 "line 2: --key remote_addr: malformed address 'bad::addr::x'" '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /" 200 1\nbad::addr::x - - [10/Oct/2000:13:55:36 -0700] "GET /" 200 1\n' replay --policy gcra:2/1s --format combined
expect replay_prefix_range 2 "--prefix '31': expected an IPv6 prefix length 32..128" "" replay --policy gcra:1/s --format combined --prefix 31
expect replay_prefix_needs_remote_addr 2 "--prefix applies to --format combined keyed on remote_addr only" "" replay --policy gcra:1/s --format combined --key user --prefix 64
expect replay_epoch_needs_combined 2 "--epoch applies to --format combined" "" replay --policy gcra:1/s --epoch
expect headers_no_at 2 "--at is required" "" headers --policy gcra:1/s
expect headers_bad_name 2 "--name 'a b'" "" headers --policy gcra:1/s --at 0 --name "a b"
expect headers_bad_cost 2 "--cost '0'" "" headers --policy gcra:1/s --at 0 --cost 0

# Lines before a malformed one are still answered, one line each; nothing is skipped silently.
out=$(printf '0 a\n0.1 a\n# comment\n\nbad\n' | "$rl" replay --policy gcra:2/1s 2>/dev/null)
if [ "$(printf '%s\n' "$out" | wc -l)" = 2 ]; then echo "ok   replay_answers_lines_before_the_error"; ok=$((ok + 1))
else echo "FAIL replay_answers_lines_before_the_error: got: $out"; fail=$((fail + 1)); fi

# bench --pin: thread t runs on the t-th CPU the process may use, cycling; a stray value is an
# error, not a silent run.
expect bench_pin_takes_no_value 2 "unexpected argument: 3" "" bench --keys 10 --seconds 0.05 --pin 3
# The CPUs this script may run on, in order (Cpus_allowed_list: "0-3,8,10-11").
mapfile -t cpus < <(awk -F'\t' '/^Cpus_allowed_list/ {print $2}' /proc/self/status | tr ',' '\n' |
  awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c}')
last_cpu=${cpus[${#cpus[@]} - 1]}
line=$(taskset -c "$last_cpu" "$rl" bench --keys 10 --threads 3 --seconds 0.05 --pin 2>&1 | grep '^threads')
if [ "$line" = "threads         3 (pinned to CPU $last_cpu,$last_cpu,$last_cpu)" ]; then
  echo "ok   bench_pin_follows_the_process_affinity"; ok=$((ok + 1))
else echo "FAIL bench_pin_follows_the_process_affinity: got '$line'"; fail=$((fail + 1)); fi
if [ "${#cpus[@]}" -ge 2 ]; then
  a=${cpus[0]} b=${cpus[1]}
  line=$(taskset -c "$a,$b" "$rl" bench --keys 10 --threads 3 --seconds 0.05 --pin 2>&1 | grep '^threads')
  if [ "$line" = "threads         3 (pinned to CPU $a,$b,$a)" ]; then
    echo "ok   bench_pin_cycles_through_the_cpus"; ok=$((ok + 1))
  else echo "FAIL bench_pin_cycles_through_the_cpus: got '$line'"; fail=$((fail + 1)); fi
fi
line=$("$rl" bench --keys 10 --threads 2 --seconds 0.05 2>&1 | grep '^threads')
if [ "$line" = "threads         2" ]; then echo "ok   bench_unpinned_says_nothing_of_cpus"; ok=$((ok + 1))
else echo "FAIL bench_unpinned_says_nothing_of_cpus: got '$line'"; fail=$((fail + 1)); fi

# --help and --version succeed on stdout.
for args in "--help" "--version" "sim --help" "replay --help" "headers --help"; do
  # shellcheck disable=SC2086
  if "$rl" $args >"$tmp/out" 2>&1 && [ -s "$tmp/out" ]; then echo "ok   $args"; ok=$((ok + 1))
  else echo "FAIL $args"; fail=$((fail + 1)); fi
done

echo "$ok passed, $fail failed"
[ "$fail" = 0 ]
