"""Threads and processes: exact totals from 8 threads on one key, the GIL released around store
calls, fork() (a child has its own state and connections)."""
import os
import threading

import libratelimit as rl


def hammer(lim, key, per_thread, threads=8, **kw):
    allowed = [0] * threads
    start = threading.Barrier(threads)

    def run(i):
        start.wait()
        for _ in range(per_thread):
            if lim.hit(key, **kw).allowed:
                allowed[i] += 1

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(allowed)


def test_eight_threads_one_key_exact_in_process():
    # A fixed instant: whatever the interleaving, exactly the limit is allowed.
    for policy in ["gcra:1000/1h", "fixed_window:1000/1h", "sliding_log:1000/1h",
                   "token_bucket:1000/1h", "sliding_window:1000/1h"]:
        lim = rl.Limiter(policy)
        assert hammer(lim, "k", 500, now_ns=10**9) == 1000, policy
        assert lim.store.stats()["allowed"] == 1000


def test_eight_threads_multi_limit_exact():
    lim = rl.Limiter("fixed_window:300/1h;gcra:500/1h")
    assert hammer(lim, "k", 100, now_ns=10**9) == 300
    assert lim.peek("k", now_ns=10**9).remaining == 0


def test_fork_child_has_its_own_state():
    lim = rl.Limiter("fixed_window:3/1h")
    lim.hit("k", now_ns=0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a copy of the state at fork time, then its own
        try:
            got = [lim.hit("k", now_ns=0).allowed for _ in range(3)]
            os.write(w, repr(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    child = os.read(r, 100).decode()
    os.waitpid(pid, 0)
    assert child == "[True, True, False]"
    assert lim.hit("k", now_ns=0).remaining == 1  # the parent's state did not move


def fork_while_hammered(store, forks=300, threads=4, child_timeout=60.0):
    """Forks `forks` times while `threads` threads call hit on `store` (with the GIL released
    inside the store); returns the pids of children that did not finish within
    `child_timeout` seconds (killed then; forking stops at the first) and of those that failed.
    Each child makes one decision and exits 0."""
    import signal
    import time
    lim = rl.Limiter("gcra:1000000/1s", store)
    stop = threading.Event()

    def run(i):
        n = 0
        while not stop.is_set():
            lim.hit("k%d" % (n % 64))
            n += 1

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    hung, failed = [], []
    try:
        for _ in range(forks):
            if hung:
                break
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = 0 if lim.hit("child").allowed else 2
                finally:
                    os._exit(code)
            # a hung child never exits: wait for it, but give up after child_timeout (this is
            # a bound on a hang, not a timing assumption about a healthy child)
            deadline = time.monotonic() + child_timeout
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    if os.waitstatus_to_exitcode(status) != 0:
                        failed.append(pid)
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    hung.append(pid)
                    break
                time.sleep(0.001)
    finally:
        stop.set()
        for t in ts:
            t.join()
    return hung, failed


def test_fork_while_threads_hit_never_hangs_the_child():
    # One shard: its lock is held most of the time the threads run, so a fork that does not
    # take it first hands the child a held lock (before the fix: most children hung).
    hung, failed = fork_while_hammered(rl.MemoryStore(shards=1), child_timeout=20.0)
    assert (hung, failed) == ([], [])


def test_fork_while_threads_hit_default_store_never_hangs_the_child():
    hung, failed = fork_while_hammered(rl.MemoryStore(), child_timeout=20.0)
    assert (hung, failed) == ([], [])


CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import libratelimit as rl
lim = rl.Limiter("10/hour")                # a fixed window, as limits counts it
before = time.time_ns()
d = lim.hit("k")
after = time.time_ns()
print(before + d.reset_after_ns, after + d.reset_after_ns)
"""


def test_fixed_windows_end_on_wall_clock_hours_in_two_processes():
    # Each process has its own in-process store; both must put the window's end on a whole
    # Unix hour (as limits does), so they agree on the window.  The window's end is bracketed
    # by two wall-clock reads around the hit; SLACK covers the drift between the monotonic and
    # the wall clock over the process's life (NTP slews by at most 0.5 ms/s), not scheduling.
    import subprocess
    import sys
    path = os.path.dirname(os.path.dirname(rl.__file__))
    hour, slack = 3600 * 10**9, 50 * 10**6
    ends = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE,
                             check=True, text=True).stdout.split()
        lo, hi = int(out[0]), int(out[1])
        k = (hi + slack) // hour * hour
        assert lo - slack <= k <= hi + slack, (lo, hi, k)  # a whole hour inside the bracket
        ends.append(k)
    assert ends[1] - ends[0] in (0, hour)  # the same window, or the next at an hour's turn
