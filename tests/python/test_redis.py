"""Redis and ratelimitd stores against real servers: decisions identical to the in-process
store's (scripts and module), multi, reservations, leases, Cluster and Sentinel URLs, fail modes
with Redis stopped, the GIL released during a blocking call, threads and fork()."""
import os
import random
import threading
import time

import pytest
import redis as redispy

import libratelimit as rl

POLICIES = ["fixed_window:5/1s", "sliding_log:5/1s", "sliding_window:5/1s",
            "token_bucket:5/1s,burst=8", "gcra:5/1s,burst=3", "leaky_bucket:5/1s,queue=4",
            "gcra:3/1s,block=2s", "sliding_window:4/1s,jitter=50%"]


def fields(d):
    return (d.allowed, d.limit, d.remaining, d.retry_after_ns, d.reset_after_ns, d.delay_ns)


def same_as_memory(store, policies=POLICIES, keys="abc", n=150, seed=5):
    for policy in policies:
        r = random.Random(seed)
        ours = rl.Limiter(policy, store=store)
        ref = rl.Limiter(policy, store=rl.MemoryStore(origin_ns=0))
        t = 10**12
        for _ in range(n):
            t += r.randrange(0, 10**5) * 1000  # whole microseconds: Redis's resolution
            key, cost = "%s-%s" % (policy, r.choice(keys)), r.choice([0, 1, 1, 2])
            assert fields(ours.hit(key, cost, now_ns=t)) == fields(ref.hit(key, cost, now_ns=t)), \
                (policy, t)


def test_redis_scripts_decide_as_the_library(redis_server):
    store = rl.RedisStore("127.0.0.1:%d" % redis_server.port, engine="scripts", timeout=5)
    same_as_memory(store)
    assert store.stats()["module_calls"] == 0


def test_redis_module_decides_as_the_library(redis_module_server):
    store = rl.store_from_url(redis_module_server.url + "?engine=auto&timeout=5")
    same_as_memory(store)
    assert store.stats()["module_calls"] > 0


def test_redis_clock_multi_reserve_lease(redis_server):
    lim = rl.Limiter("fixed_window:3/1h", redis_server.url + "?timeout=5")
    assert [lim.hit("u").remaining for _ in range(3)] == [2, 1, 0]
    d = lim.hit("u")
    assert not d.allowed and d.headers()["Retry-After"]
    lim.reset("u")
    assert lim.peek("u").remaining == 3
    other = rl.Limiter("gcra:1/1h", lim.store)
    d = lim.multi([("{u}a", 1), (other, "{u}a", 1)])
    assert d.allowed
    d = lim.multi([("{u}a", 1), (other, "{u}a", 1)])
    assert not d.allowed and d.refused == 1
    assert lim.peek("{u}a").remaining == 2  # all-or-nothing: the first was not charged
    tb = rl.Limiter("token_bucket:100/1h", lim.store)
    d = tb.reserve("llm", 60)
    assert d.allowed and d.reservation
    d = tb.settle("llm", d.reservation, 10)
    assert d.remaining == 90
    with pytest.raises(KeyError):
        tb.settle("llm", 12345, 10)
    conc = rl.Limiter("concurrency:1/10s", lim.store)
    with conc.acquire("job") as lease:
        assert lease.allowed
        assert not conc.acquire("job").allowed
        with pytest.raises(rl.RateLimitExceeded):
            with conc.acquire("job"):
                pass
    assert conc.acquire("job").release()


def test_redis_async_twins(redis_server):
    import asyncio
    lim = rl.Limiter("fixed_window:2/1h", redis_server.url + "?timeout=5")

    async def go():
        a = await lim.ahit("k")
        b = await lim.ahit("k")
        c = await lim.ahit("k")
        p = await lim.apeek("k")
        await lim.areset("k")
        return a.allowed, b.allowed, c.allowed, p.remaining, (await lim.apeek("k")).remaining

    assert asyncio.run(go()) == (True, True, False, 0, 2)


def test_redis_stopped_fail_modes(redis_server):
    closed = rl.Limiter("gcra:10/1s", redis_server.url)
    opened = rl.Limiter("gcra:10/1s", redis_server.url, fail_open=True)
    assert closed.hit("k").error is None
    redis_server.stop()
    d = closed.hit("k")
    assert not d.allowed and d.error and d.retry_after > 0
    d = opened.hit("k")
    assert d.allowed and d.error
    with pytest.raises(rl.BackendError):
        closed.reset("k")


def test_redis_gil_released_during_a_blocking_call(redis_server):
    """DEBUG SLEEP 1 holds Redis; our hit waits for it.  Another Python thread stamps the time
    every 1000 turns of its loop: it must have stamped inside the middle of the wait, which it
    could not do if the wait held the GIL."""
    lim = rl.Limiter("gcra:10/1s", rl.RedisStore("127.0.0.1:%d" % redis_server.port, timeout=5))
    lim.hit("warm")
    admin = redispy.Redis(port=redis_server.port)
    blocker = threading.Thread(target=lambda: admin.execute_command("DEBUG", "SLEEP", 1))
    stamps, stop = [], threading.Event()

    def spin():
        i = 0
        while not stop.is_set():
            i += 1
            if i % 1000 == 0:
                stamps.append(time.monotonic())

    blocker.start()
    time.sleep(0.1)  # let DEBUG SLEEP reach Redis first
    spinner = threading.Thread(target=spin)
    spinner.start()
    start = time.monotonic()
    d = lim.hit("k")  # blocks until Redis wakes
    end = time.monotonic()
    stop.set()
    spinner.join()
    blocker.join()
    assert d.allowed and d.error is None
    assert end - start > 0.6  # it did block
    middle = [t for t in stamps if start + 0.2 < t < end - 0.2]
    assert len(middle) > 10, len(middle)


def test_redis_eight_threads_exact(redis_server):
    lim = rl.Limiter("fixed_window:500/1h", redis_server.url + "?timeout=5")
    from test_threads import hammer
    assert hammer(lim, "k", 100, now_ns=10**12) == 500
    assert lim.store.stats()["connections"] >= 2  # one handle per concurrent thread


def test_redis_fork_child_opens_its_own_connection(redis_server):
    lim = rl.Limiter("fixed_window:100/1h", redis_server.url + "?timeout=5")
    lim.hit("k")
    admin = redispy.Redis(port=redis_server.port)
    before = admin.info("clients")["connected_clients"]
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            d = lim.hit("k")
            os.write(w, b"%d" % d.remaining)
            os.read(go_r, 1)  # hold the connection until the parent has counted
        finally:
            os._exit(0)
    assert os.read(r, 10) == b"98"
    during = admin.info("clients")["connected_clients"]
    os.write(go_w, b"x")
    os.waitpid(pid, 0)
    assert during == before + 1
    assert lim.hit("k").remaining == 97  # the parent's own connection still answers in step


def test_redis_connection_closed_by_the_server_is_replaced_before_use(redis_server):
    """A pooled connection the server has closed (CLIENT KILL, a timeout) is noticed before a
    command is sent on it (one poll a call, src/redis/conn.c): the next call reconnects and
    decides, with no error and no fail-mode decision."""
    store = rl.store_from_url(redis_server.url + "?engine=scripts&timeout=5")
    lim = rl.Limiter("fixed_window:100/1h", store)
    admin = redispy.Redis(port=redis_server.port)
    for i in range(5):
        assert lim.hit("closed").remaining == 99 - 2 * i
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
        time.sleep(0.05)  # the FIN reaches our socket
        assert lim.hit("closed").remaining == 98 - 2 * i
    st = store.stats()
    assert st["errors"] == 0 and st["fail_open"] == 0 and st["fail_closed"] == 0
    assert st["round_trips"] >= st["decisions"] == 10


def test_redis_cluster_url(redis_cluster):
    store = rl.store_from_url("redis+cluster://" + redis_cluster + "?timeout=5")
    same_as_memory(store, POLICIES[:4], keys="abcdefgh", n=80)
    lim = rl.Limiter("fixed_window:2/1h", store)
    other = rl.Limiter("gcra:5/1h", store)
    assert lim.multi([("{user1}:a", 1), (other, "{user1}:b", 1)]).allowed


def test_redis_sentinel_url(redis_sentinel):
    store = rl.store_from_url("redis+sentinel://%s/mymaster?timeout=1" % redis_sentinel)
    lim = rl.Limiter("fixed_window:2/1h", store)
    deadline = time.monotonic() + 10
    d = lim.hit("k")
    while d.error and time.monotonic() < deadline:  # until a sentinel has answered
        time.sleep(0.1)
        d = lim.hit("k")
    assert d.allowed and d.error is None
    assert lim.hit("k").remaining == 0 and not lim.hit("k").allowed


def test_rediss_is_refused():
    with pytest.raises(ValueError, match="TLS"):
        rl.store_from_url("rediss://127.0.0.1:6379")


def test_daemon_store(ratelimitd):
    lim = rl.Limiter("fixed_window:3/1h", "ratelimitd://127.0.0.1:%d?timeout=5" % ratelimitd)
    assert [lim.hit("u").remaining for _ in range(3)] == [2, 1, 0]
    d = lim.hit("u")
    assert not d.allowed and d.retry_after_ns % 10**6 == 0 and d.headers()["Retry-After"]
    with pytest.raises(ValueError, match="own clock"):
        lim.hit("u", now_ns=0)
    lim.reset("u")
    assert lim.peek("u").remaining == 3
    other = rl.Limiter("gcra:1/1h", lim.store)
    assert lim.multi([("m", 1), (other, "m", 1)]).allowed
    d = lim.multi([("m", 1), (other, "m", 1)])
    assert not d.allowed and d.refused == 1
    tb = rl.Limiter("token_bucket:100/1h", lim.store)
    d = tb.reserve("llm", 60)
    assert d.allowed and d.reservation
    assert tb.settle("llm", d.reservation, 10).remaining == 90
    with pytest.raises(KeyError):
        tb.settle("llm", d.reservation, 10)
    conc = rl.Limiter("concurrency:1/10s", lim.store)
    with conc.acquire("job"):
        assert not conc.acquire("job").allowed
    assert conc.acquire("job").allowed
    from test_threads import hammer
    hl = rl.Limiter("fixed_window:200/1h", lim.store)
    assert hammer(hl, "t", 50) == 200


def test_daemon_stopped_is_the_fail_mode():
    store = rl.DaemonStore("127.0.0.1", 1, timeout=0.2)
    d = rl.Limiter("gcra:1/1s", store).hit("k")
    assert not d.allowed and d.error
    assert rl.Limiter("gcra:1/1s", store, fail_open=True).hit("k").allowed
