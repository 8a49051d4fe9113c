#!/usr/bin/env python3
"""Writes the script wasm_vs_native.sh feeds to both decide_trace programs: every algorithm with
its options (burst, queue, delay, block with escalation, jitter, calendar-free windows), bad
policy texts (the parser's messages must match too), and random traces of decisions, peeks and
releases with times that mostly advance, sometimes step back or jump to int64's edges.
Usage: gen_script.py SEED STEPS_PER_POLICY"""
import random
import sys

POLICIES = [
    "fixed_window:4/10s", "fixed_window:1/1ms", "fixed_window:100/1m,block=5s",
    "fixed_window:3/7s,block=2s*3..1m", "sliding_log:4/10s", "sliding_log:7/3s,jitter=25%",
    "sliding_log:1/1s", "sliding_window:4/10s", "sliding_window:10/1m", "sliding_window:3/7ms",
    "sliding_window:5/10s,block=4s*2..20s", "token_bucket:4/10s", "token_bucket:3/1s,burst=10",
    "token_bucket:7/3s,burst=1", "token_bucket:1000000/1s", "gcra:4/10s", "gcra:2/1s,burst=5",
    "gcra:5/7s,jitter=50%", "leaky_bucket:4/10s,queue=4", "leaky_bucket:2/1s,queue=5,delay=2",
    "leaky_bucket:3/1s,burst=3,nodelay", "leaky_bucket:1/1s", "concurrency:4/10s",
    "concurrency:2/1s", "concurrency:3", "token_bucket:5/1h,block=1m*4..1h",
    # errors: the parser's own messages
    "gcra:2/1x", "bogus:1/1s", "token_bucket:0/1s", "leaky_bucket:4/10s,queue=-1",
    "fixed_window:4/10s,block=5s,block=6s", "sliding_log:99999999/1s", "",
]


def main():
    rng = random.Random(int(sys.argv[1]))
    steps = int(sys.argv[2])
    out = []
    for text in POLICIES:
        out.append("policy " + text)
        now = rng.randrange(-10**10, 10**10)
        for _ in range(steps):
            r = rng.random()
            if r < 0.02:
                now = rng.choice([2**62, -(2**62), 2**63 - 1, -(2**63)])
            elif r < 0.06:
                now -= rng.randrange(0, 5 * 10**9)
            else:
                now += rng.choice([0, 1, rng.randrange(10**6), rng.randrange(4 * 10**9)])
            now = max(-(2**63), min(2**63 - 1, now))
            k = rng.random()
            if k < 0.15:
                out.append(f"peek {now}")
            elif k < 0.25:
                out.append(f"release {now}")
            else:
                cost = rng.choice([1, 1, 1, 1, 0, 2, 3, 5, 1000, -1])
                out.append(f"decide {now} {cost}")
    print("\n".join(out))


main()
