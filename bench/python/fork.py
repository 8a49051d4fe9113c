"""What the fork handlers cost: fork() + _exit + waitpid with no live in-process store, then
with 10 of 1024 shards (the default) and with 10 of 64, interleaved, RUNS times N forks;
medians in microseconds.
The handlers lock every shard before the fork and free them after it on both sides, so each
side copies (COW) the pages of every shard.  Usage: /usr/bin/python3 bench/python/fork.py
[RUNS] [N] (the package importable: PYTHONPATH or an installed wheel)."""
import os
import statistics
import sys
import time

import libratelimit as rl


def fork_us(n):
    t = time.perf_counter()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return (time.perf_counter() - t) / n * 1e6


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    res = {"no store": [], "10 x 1024 shards": [], "10 x 64 shards": []}
    for _ in range(runs):
        res["no store"].append(fork_us(n))
        stores = [rl.MemoryStore() for _ in range(10)]
        res["10 x 1024 shards"].append(fork_us(n))
        stores = [rl.MemoryStore(shards=64) for _ in range(10)]
        res["10 x 64 shards"].append(fork_us(n))
        del stores
    for k, v in res.items():
        print("%-16s fork+exit+wait median %.0f us (runs: %s)"
              % (k, statistics.median(v), " ".join("%.0f" % x for x in v)))


if __name__ == "__main__":
    main()
