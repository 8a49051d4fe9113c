#!/usr/bin/python3
"""libratelimit against limits (Debian's python3-limits 2.8.0) on the same keys, one thread:
decisions per second in-process (ours: the keyed store; limits: MemoryStorage fixed and moving
window) and through one local redis-server (ours: libratelimit_redis; limits: RedisStorage
fixed and moving window), 100k random keys; then the accuracy of each on one trace against an
exact log ("at most N in any span of W").

Rounds alternate the two sides of each pair; each figure is the median over the rounds.
limits 2.8 has no sliding window counter (3.x's SlidingWindowCounterRateLimiter): ours is
reported without a peer.

With the Redis module (src/redismodule's ratelimit.so, found in build/release or build/dev, or
given by --module; --module none: without it) the redis-server loads it, and ours also runs with
engine=module (RL.* commands) beside engine=scripts, on the same server as limits.

Usage: bench/python/bench.py [--ops N] [--redis-ops N] [--keys K] [--rounds R] [--module SO]
       (RLT_PY_PATH or PYTHONPATH: the package)
"""
import argparse
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import limits
import limits.storage
import limits.strategies

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.environ.get("RLT_PY_PATH") or os.path.join(ROOT, "python"))
import libratelimit as rl  # noqa: E402

LIMIT, PERIOD = 1000, "minute"


def rate(fn, keys):
    t0 = time.perf_counter()
    fn(keys)
    return len(keys) / (time.perf_counter() - t0)


def ours_loop(lim):
    def run(keys):
        hit = lim.hit
        for k in keys:
            hit(k)
    return run


def limits_loop(strategy, item):
    def run(keys):
        hit = strategy.hit
        for k in keys:
            hit(item, k)
    return run


def self_cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def proc_cpu(pid):
    """A process's CPU seconds (user + system) from /proc (clock ticks: run enough calls)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_module(arg):
    if arg == "none":
        return None
    if arg:
        return os.path.abspath(arg)
    for b in ("release", "dev"):
        so = os.path.join(ROOT, "build", b, "src", "redismodule", "ratelimit.so")
        if os.path.exists(so):
            return so
    return None


def start_redis(module=None):
    d = tempfile.mkdtemp(prefix="rlt-bench-redis-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", d] + (["--loadmodule", module] if module else []),
                         stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.02)
    return p, port, d


def exact_log(trace, n, w):
    """The reference: a request is allowed iff fewer than n allowed ones lie in (t - w, t]."""
    out, log = [], []
    for t in trace:
        log = [x for x in log if x > t - w]
        ok = len(log) < n
        if ok:
            log.append(t)
        out.append(ok)
    return out


def worst_span(trace, allowed, w):
    ts = [t for t, a in zip(trace, allowed) if a]
    best, j = 0, 0
    for i in range(len(ts)):
        while ts[i] - ts[j] >= w:
            j += 1
        best = max(best, i - j + 1)
    return best


def accuracy(n=10, w_s=1.0, count=20000, seed=3):
    """One key, Poisson-ish arrivals at 3x the limit's rate, on a clock we drive: ours by now_ns,
    limits' by replacing time.time (its MemoryStorage reads it)."""
    r = random.Random(seed)
    t, trace = 1000.0, []
    for _ in range(count):
        t += r.expovariate(3 * n / w_s)
        trace.append(round(t, 6))
    ref = exact_log(trace, n, w_s)
    rows = []

    def report(name, allowed):
        wrong = sum(1 for a, b in zip(allowed, ref) if a != b)
        rows.append((name, sum(allowed), wrong, worst_span(trace, allowed, w_s)))

    for policy in ["sliding_log:%d/1s" % n, "fixed_window:%d/1s" % n, "gcra:%d/1s" % n]:
        lim = rl.Limiter(policy, store=rl.MemoryStore(origin_ns=0))
        report("ours " + policy.split(":")[0],
               [lim.hit("k", now_ns=int(round(x * 1e6)) * 1000).allowed for x in trace])
    real_time = time.time
    try:
        for name, cls in [("limits moving-window", limits.strategies.MovingWindowRateLimiter),
                          ("limits fixed-window", limits.strategies.FixedWindowRateLimiter)]:
            now = [0.0]
            time.time = lambda: now[0]
            storage = limits.storage.MemoryStorage()
            strat, item = cls(storage), limits.parse("%d/second" % n)
            allowed = []
            for x in trace:
                now[0] = x
                allowed.append(strat.hit(item, "k"))
            report(name, allowed)
    finally:
        time.time = real_time
    return ref, rows


def interleaved(pairs, keys, rounds):
    """pairs: {name: run}; each round runs every one of them on `keys`, in turn; the median
    rate of each over the rounds."""
    got = {k: [] for k in pairs}
    for _ in range(rounds):
        for name, run in pairs.items():
            got[name].append(rate(run, keys))
    return {k: statistics.median(v) for k, v in got.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=200000, help="hits per round, in-process")
    ap.add_argument("--redis-ops", type=int, default=20000, help="hits per round, Redis")
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--module", default="", help="ratelimit.so to load, or none")
    a = ap.parse_args()
    r = random.Random(1)
    pool = ["user:%d" % i for i in range(a.keys)]
    keys = [r.choice(pool) for _ in range(a.ops)]
    rkeys = keys[:a.redis_ops]
    item = limits.parse("%d/%s" % (LIMIT, PERIOD))
    print("limits %s, libratelimit %s, Python %s; %d rounds of %d hits over %d keys in-process, "
          "%d through Redis; interleaved, medians"
          % (limits.__version__, rl.__version__, sys.version.split()[0], a.rounds, a.ops, a.keys,
             a.redis_ops))
    strat = limits.strategies
    # limits' strategies hold their storage by a weak reference: keep the storages alive here.
    mem_fw, mem_mw = limits.storage.MemoryStorage(), limits.storage.MemoryStorage()
    res = interleaved({
        "ours in-process fixed_window": ours_loop(rl.Limiter("fixed_window:%d/1m" % LIMIT)),
        "limits MemoryStorage fixed-window": limits_loop(
            strat.FixedWindowRateLimiter(mem_fw), item),
        "ours in-process sliding_log": ours_loop(rl.Limiter("sliding_log:%d/1m" % LIMIT)),
        "limits MemoryStorage moving-window": limits_loop(
            strat.MovingWindowRateLimiter(mem_mw), item),
        "ours in-process sliding_window": ours_loop(rl.Limiter("sliding_window:%d/1m" % LIMIT)),
        "ours in-process gcra": ours_loop(rl.Limiter("gcra:%d/1m" % LIMIT)),
    }, keys, a.rounds)
    module = find_module(a.module)
    print("redis-server with the module %s" % module if module else "redis-server without the module")
    proc, port, d = start_redis(module)
    try:
        url = "redis://127.0.0.1:%d" % port
        store = rl.store_from_url(url + "?engine=scripts&timeout=1")
        rs = limits.storage.storage_from_string(url)
        rs.reset()
        # limits' two strategies name their keys alike: each its own prefix of the same keys.
        fw_keys, mw_keys = ["fw/" + k for k in rkeys], ["mw/" + k for k in rkeys]
        rres = {}
        for name, run, ks in [
                ("ours Redis fixed_window", ours_loop(rl.Limiter("fixed_window:%d/1m" % LIMIT, store)), rkeys),
                ("limits RedisStorage fixed-window", limits_loop(strat.FixedWindowRateLimiter(rs), item), fw_keys),
                ("ours Redis sliding_log", ours_loop(rl.Limiter("sliding_log:%d/1m" % LIMIT, store)), rkeys),
                ("limits RedisStorage moving-window", limits_loop(strat.MovingWindowRateLimiter(rs), item), mw_keys),
                ("ours Redis sliding_window", ours_loop(rl.Limiter("sliding_window:%d/1m" % LIMIT, store)), rkeys),
                ("ours Redis gcra", ours_loop(rl.Limiter("gcra:%d/1m" % LIMIT, store)), rkeys)]:
            rres[name] = (run, ks)
        if module:
            mstore = rl.store_from_url(url + "?engine=module&timeout=1")
            for algo in ("fixed_window", "sliding_log"):
                # its own keys: the module and the scripts keep the same state format
                rres["ours Redis+module " + algo] = (
                    ours_loop(rl.Limiter("%s:%d/1m" % (algo, LIMIT), mstore)), ["m/" + k for k in rkeys])
        got = {k: [] for k in rres}
        cpu = {k: ([], []) for k in rres}  # CPU us a decision: this process's, redis-server's
        for _ in range(a.rounds):
            for name, (run, ks) in rres.items():
                c0, s0 = self_cpu(), proc_cpu(proc.pid)
                got[name].append(rate(run, ks))
                cpu[name][0].append((self_cpu() - c0) / len(ks) * 1e6)
                cpu[name][1].append((proc_cpu(proc.pid) - s0) / len(ks) * 1e6)
        res.update({k: statistics.median(v) for k, v in got.items()})
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("\n| what | decisions/s |\n|---|---:|")
    for k, v in res.items():
        print("| %s | %s |" % (k, format(int(v), ",")))
    for where, ours, theirs in [("in-process", "ours in-process", "limits MemoryStorage"),
                                ("Redis", "ours Redis", "limits RedisStorage"),
                                ("Redis, ours on the module", "ours Redis+module",
                                 "limits RedisStorage")]:
        if ours + " fixed_window" not in res:
            continue
        print("%s: fixed_window / fixed-window = %.1fx, sliding_log / moving-window = %.1fx; "
              "sliding window counter: no peer in limits %s" % (
                  where, res[ours + " fixed_window"] / res[theirs + " fixed-window"],
                  res[ours + " sliding_log"] / res[theirs + " moving-window"],
                  limits.__version__))
    # CPU, not the wall: on a loaded machine the wall is mostly the wait for the scheduler, the
    # CPU each side spends a decision (client and server) is what a free core would run at.
    print("\n| through Redis | client CPU us | redis-server CPU us | sum |\n|---|---:|---:|---:|")
    tot = {}
    for k, (c, sv) in cpu.items():
        tot[k] = statistics.median(c) + statistics.median(sv)
        print("| %s | %.1f | %.1f | %.1f |" % (k, statistics.median(c), statistics.median(sv), tot[k]))
    for ours, theirs in [("fixed_window", "fixed-window"), ("sliding_log", "moving-window")]:
        for eng in ("ours Redis ", "ours Redis+module "):
            if eng + ours in tot:
                print("CPU a decision, limits RedisStorage %s / %s%s = %.2fx" % (
                    theirs, eng, ours, tot["limits RedisStorage " + theirs] / tot[eng + ours]))
    ref, rows = accuracy()
    print("\naccuracy: 20000 requests on one key at 3x the rate of 10/second; the exact log "
          "allows %d\n\n| limiter | allowed | decisions unlike the exact log | most allowed in "
          "any 1 s |\n|---|---:|---:|---:|" % sum(ref))
    for name, allowed, wrong, worst in rows:
        print("| %s | %d | %d | %d |" % (name, allowed, wrong, worst))


if __name__ == "__main__":
    main()
