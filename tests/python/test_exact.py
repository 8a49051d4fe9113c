"""Exactness: the same traces through the Python package and through `ratelimit replay` give
identical decisions, field by field, in integer nanoseconds: every algorithm, costs, clocks that
step back, block=, jitter= (deterministic per key and instant), calendar months, reservations."""
import random
import subprocess

import pytest

import libratelimit as rl

POLICIES = [
    "fixed_window:5/1s",
    "sliding_log:5/1s",
    "sliding_window:5/1s",
    "token_bucket:5/1s,burst=8",
    "gcra:5/1s,burst=3",
    "leaky_bucket:5/1s,queue=4,delay=2",
    "concurrency:3/2s",
    "gcra:3/1s,block=2s*2..10s",
    "sliding_window:4/1s,jitter=50%",
    "token_bucket:4/1s,jitter=100%,block=500ms",
    "fixed_window:7/1mo,tz=Europe/Paris",
    "fixed_window:3/250ms",
]
MONTH_START = 1706745600 * 10**9  # 2024-02-01 UTC: the calendar trace crosses a month end


def trace(policy, seed, n=400):
    """Lines TIME KEY COST (ns): mostly forward, now and then a step back; costs 0..3."""
    r = random.Random(seed)
    t = MONTH_START - 3 * 86400 * 10**9 if "mo" in policy else 10**9
    step = 86400 * 10**9 // 40 if "mo" in policy else 10**8
    lines = []
    for _ in range(n):
        t += r.randrange(0, step) if r.random() > 0.1 else -r.randrange(0, 3 * step)
        t = max(t, 0)
        cost = r.choice([0, 1, 1, 1, 2]) if policy.startswith("concurrency") else r.choice(
            [0, 1, 1, 1, 2, 3])
        if policy.startswith("concurrency"):
            cost = min(cost, 1)
        lines.append((t, r.choice("abc"), cost))
    return lines


def replay(cli, policy, lines):
    text = "".join("%d %s %s\n" % line for line in lines)
    out = subprocess.run([cli, "replay", "--policy", policy, "--unit", "ns"], input=text,
                         capture_output=True, text=True, check=True).stdout
    return [l.split() for l in out.splitlines()]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hit_matches_replay(cli, policy, seed):
    lines = trace(policy, seed)
    want = replay(cli, policy, lines)
    lim = rl.Limiter(policy, store=rl.MemoryStore(origin_ns=0))
    assert len(want) == len(lines)
    for (t, key, cost), w in zip(lines, want):
        d = lim.hit(key, cost, now_ns=t)
        got = [str(t), key, str(cost), "allow" if d.allowed else "deny", str(d.remaining),
               str(d.retry_after_ns), str(d.reset_after_ns), str(d.delay_ns)]
        assert got == w, "policy %s at %d" % (policy, t)
        # The float seconds are the exact ns, as near as a double gets.
        assert d.retry_after == (-1.0 if d.retry_after_ns < 0 else d.retry_after_ns / 1e9)


@pytest.mark.parametrize("policy", ["token_bucket:100/1s", "gcra:50/1s,burst=100",
                                    "fixed_window:100/1s", "sliding_log:100/1s",
                                    "sliding_window:100/1s"])
def test_reserve_settle_matches_replay(cli, policy):
    r = random.Random(7)
    t, lines, ours = 0, [], []
    open_names = []
    for i in range(300):
        t += r.randrange(0, 5 * 10**7)
        if open_names and r.random() < 0.4:
            name = open_names.pop(r.randrange(len(open_names)))
            lines.append("%d %s %d settle:%s" % (t, name[0], r.randrange(0, 120), name))
        else:
            key = r.choice("xy")
            name = "%s%d" % (key, i)
            open_names.append(name)
            lines.append("%d %s %d reserve:%s" % (t, key, r.randrange(0, 60), name))
    out = subprocess.run([cli, "replay", "--policy", policy, "--unit", "ns"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    lim = rl.Limiter(policy, store=rl.MemoryStore(origin_ns=0))
    ids = {}
    for line, w in zip(lines, out):
        ts, key, cost, op = line.split()
        verb, name = op.split(":")
        if verb == "reserve":
            d = lim.reserve(key, int(cost), now_ns=int(ts))
            ids[name] = d.reservation
            verdict = "allow" if d.allowed else "deny"
        else:
            try:
                d = lim.settle(key, ids.get(name) or 1, int(cost), now_ns=int(ts))
                verdict = "settle"
            except KeyError:
                d = lim.peek(key, now_ns=int(ts))
                verdict = "unknown"
        got = [ts, key, cost, verdict, str(d.remaining), str(d.retry_after_ns),
               str(d.reset_after_ns), str(d.delay_ns)]
        assert got == w.split(), line


def test_headers_are_the_c_librarys(cli):
    """Headers: Retry-After in whole seconds rounded up, the IETF fields, as `ratelimit headers`."""
    lim = rl.Limiter("gcra:2/1s", store=rl.MemoryStore(origin_ns=0), name="api")
    lim.hit("k", now_ns=0)
    lim.hit("k", now_ns=0)
    d = lim.hit("k", now_ns=100)
    assert not d.allowed
    h = d.headers()
    assert h["Retry-After"] == "1"
    assert h["RateLimit-Policy"] == '"api";q=2;w=1'
    assert h["RateLimit"] == '"api";r=0;t=1'
    assert "X-RateLimit-Limit" in d.headers(rl.HDR_X)
