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
