"""libratelimit.limits: limits' API.  Its documented quick start, changed only at the import
line, runs as limits' docs say, in-process and on a real redis-server; then each strategy's
exact counts at a window's edge (times passed as now_ns), test() charging nothing and agreeing
with hit(), clear(), keys that never collide, and bad input."""
import random
import threading
import time

import pytest

from libratelimit import BackendError, MemoryStore
from libratelimit.limits import (ConfigurationError, FixedWindowRateLimiter,
                                 MovingWindowRateLimiter, RateLimitItem, RateLimitItemPerDay,
                                 RateLimitItemPerHour, RateLimitItemPerMinute,
                                 RateLimitItemPerMonth, RateLimitItemPerSecond,
                                 RateLimitItemPerYear, SlidingWindowCounterRateLimiter,
                                 WindowStats, parse, parse_many, storage_from_string)

S = 10**9
T = 1_000_000 * 3600 * S  # a whole hour of the store's clock: a fixed window starts there
STRATEGIES = [FixedWindowRateLimiter, MovingWindowRateLimiter, SlidingWindowCounterRateLimiter]


@pytest.fixture(params=["memory", "redis"])
def store_url(request):
    if request.param == "memory":
        yield "memory://"
        return
    r = request.getfixturevalue("redis_server")
    yield r.url + "?timeout=5"


# ---- limits' quick start (limits.readthedocs.io "Quickstart"), only the import changed ------

def quickstart(url, errors):
    """The quick start's sections, each on a fresh store, as the docs write them."""
    try:
        import time
        # was: from limits import storage, strategies, parse, RateLimitItemPerSecond
        from libratelimit.limits import storage, strategies, parse, RateLimitItemPerSecond

        def fresh(section):
            s = storage.storage_from_string(url if url == "memory://" else
                                            url + "&prefix=qs%s:" % section)
            return s

        one_per_minute = parse("1/minute")
        one_per_second = RateLimitItemPerSecond(1, 1)

        # Consume the limits
        limiter = strategies.MovingWindowRateLimiter(fresh(1))
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is True
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is False
        assert limiter.hit(one_per_minute, "test_namespace", "bar") is True
        assert limiter.hit(one_per_second, "test_namespace", "foo") is True
        assert limiter.hit(one_per_second, "test_namespace", "foo") is False
        time.sleep(1)
        assert limiter.hit(one_per_second, "test_namespace", "foo") is True

        # Check without consuming
        limiter = strategies.MovingWindowRateLimiter(fresh(2))
        assert limiter.hit(one_per_second, "test_namespace", "foo") is True
        while not limiter.test(one_per_second, "test_namespace", "foo"):
            time.sleep(0.01)
        assert limiter.hit(one_per_second, "test_namespace", "foo") is True

        # Query available capacity and reset time
        limiter = strategies.MovingWindowRateLimiter(fresh(3))
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is True
        window = limiter.get_window_stats(one_per_minute, "test_namespace", "foo")
        assert window.remaining == 0
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is False
        time.sleep(window.reset_time - time.time())
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is True

        # Clear a limit
        limiter = strategies.MovingWindowRateLimiter(fresh(4))
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is True
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is False
        limiter.clear(one_per_minute, "test_namespace", "foo")
        assert limiter.hit(one_per_minute, "test_namespace", "foo") is True
    except BaseException as e:  # reported by the test's thread
        errors.append(e)


def test_limits_quickstart_in_memory_and_on_redis(redis_server):
    """Both at once (each waits out a real minute, as the docs' code does)."""
    errors = []
    threads = [threading.Thread(target=quickstart, args=(u, errors))
               for u in ("memory://", redis_server.url + "?timeout=5")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# ---- the items: limits' notation, equality, text, keys ------------------------------------

def test_items_as_limits_has_them():
    assert parse("1/minute") == RateLimitItemPerMinute(1)
    assert parse("1/minute") == RateLimitItemPerMinute(1, 1, namespace="other")
    assert parse("1/minute") != RateLimitItemPerSecond(1)
    assert parse("1/minute") != RateLimitItemPerMinute(2)
    assert parse("10 per 2 hours") == RateLimitItemPerHour(10, 2)
    assert str(parse("10 per 2 hours")) == "10 per 2 hour"
    assert repr(parse("5/second")) == "5 per 1 second"
    assert parse("3/day").get_expiry() == 86400
    assert parse("3/2 months").get_expiry() == 60 * 86400
    assert parse("3/year").get_expiry() == 360 * 86400
    assert isinstance(parse("3/year"), RateLimitItemPerYear)
    assert isinstance(parse("3 per month"), RateLimitItemPerMonth)
    assert isinstance(parse("3 PER Day"), RateLimitItemPerDay)
    assert parse("10/minute").key_for("a", b"b", 3) == "LIMITER/a/b/3/10/1/minute"
    assert RateLimitItemPerSecond(1, namespace="N").key_for() == "N/1/1/second"
    assert parse_many("10/hour;100/day, 500 per 7 days|2 per year") == [
        RateLimitItemPerHour(10), RateLimitItemPerDay(100), RateLimitItemPerDay(500, 7),
        RateLimitItemPerYear(2)]
    assert sorted([parse("1/day"), parse("1/second")]) == [parse("1/second"), parse("1/day")]
    assert len({parse("1/minute"), RateLimitItemPerMinute(1)}) == 1
    assert isinstance(parse("1/minute"), RateLimitItem)


@pytest.mark.parametrize("bad", ["", "1/fortnight", "minute", "1/minute;", "-1/minute",
                                 "1.5/minute", "1 / minute / 2", "ten/minute", "1/minute;;2/day"])
def test_a_malformed_limit_string_raises_value_error(bad):
    with pytest.raises(ValueError):
        parse(bad)
    with pytest.raises(ValueError):
        parse_many(bad)


def test_bad_input():
    with pytest.raises(ValueError):
        parse(None)
    with pytest.raises(ConfigurationError):
        storage_from_string("memcached://localhost:11211")
    with pytest.raises(ValueError):
        storage_from_string("rediss://localhost:6379")
    with pytest.raises(TypeError):
        storage_from_string("memory://", foo=1)
    lim = FixedWindowRateLimiter(storage_from_string("memory://"))
    with pytest.raises(TypeError):
        lim.hit("1/minute", "k")
    with pytest.raises(ValueError):
        lim.hit(RateLimitItemPerMinute(0), "k")  # our policies need a positive amount
    with pytest.raises(ValueError):
        lim.hit(parse("1/minute"), "k", cost=-1)
    with pytest.raises(ValueError):
        lim.test(parse("1/minute"), "k", cost=-1)
    with pytest.raises(TypeError):
        FixedWindowRateLimiter(object())


# ---- exact counts at a window's edge, the times passed explicitly ---------------------------
# On Redis a written key expires after its reset_after in real time (PEXPIRE), and Redis counts
# whole microseconds: there, the instant before an edge is 1 us, and every write leaves at least
# 30 s before its key expires (only denials, which write nothing, fall just before an edge).

@pytest.fixture
def eps(store_url):
    return 1 if store_url == "memory://" else 1000


def hits(lim, item, t, n, *ids):
    return [lim.hit(item, "edge", *ids, now_ns=t) for _ in range(n)]


def test_fixed_window_edge(store_url, eps):
    lim, two = FixedWindowRateLimiter(storage_from_string(store_url)), parse("2/minute")
    assert hits(lim, two, T, 1) == [True]
    assert hits(lim, two, T + 30 * S, 2) == [True, False]
    assert hits(lim, two, T + 60 * S - eps, 1) == [False]   # the window's last instant
    assert lim.get_window_stats(two, "edge", now_ns=T + 60 * S - eps) == \
        WindowStats((T + 60 * S) / 1e9, 0)
    assert hits(lim, two, T + 60 * S, 3) == [True, True, False]  # the next window: 2 again
    assert lim.get_window_stats(two, "edge", now_ns=T + 90 * S) == \
        WindowStats((T + 120 * S) / 1e9, 0)


def test_moving_window_edge_exact(store_url, eps):
    lim, two = MovingWindowRateLimiter(storage_from_string(store_url)), parse("2/minute")
    assert hits(lim, two, T, 1) == [True]
    assert hits(lim, two, T + 10 * S, 2) == [True, False]
    assert hits(lim, two, T + 60 * S - eps, 1) == [False]  # the hit of T has not left yet
    assert hits(lim, two, T + 60 * S, 2) == [True, False]  # ...and now has: one fits
    assert lim.get_window_stats(two, "edge", now_ns=T + 65 * S) == \
        WindowStats((T + 120 * S) / 1e9, 0)                 # the last hit's minute
    assert hits(lim, two, T + 70 * S - eps, 1) == [False]
    assert hits(lim, two, T + 70 * S, 2) == [True, False]


def test_sliding_window_counter_edge(store_url, eps):
    lim, two = SlidingWindowCounterRateLimiter(storage_from_string(store_url)), parse("2/minute")
    assert hits(lim, two, T, 1) == [True]
    assert hits(lim, two, T + 10 * S, 2) == [True, False]
    # the next window counts the previous one's 2 hits weighted by the part still covered
    assert hits(lim, two, T + 60 * S, 1) == [False]          # weight 1: 2
    assert hits(lim, two, T + 90 * S - eps, 1) == [False]    # 2 * (30 s + eps) / 60 s > 1
    assert hits(lim, two, T + 90 * S, 2) == [True, False]    # 2 * 1/2 = 1: one more fits
    assert hits(lim, two, T + 120 * S, 2) == [True, False]   # the previous window's 1, weight 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_test_charges_nothing_and_agrees_with_hit(store_url, strategy):
    # in-process: a 10 s window, so the trace crosses many edges; Redis: an hour (every write
    # keeps its key for at least 30 real seconds, see above), whole microseconds
    memory = store_url == "memory://"
    lim = strategy(storage_from_string(store_url))
    item = parse("5 per 10 seconds") if memory else parse("5/hour")
    rng = random.Random(36)
    t, allowed = T, 0
    for _ in range(300):
        t += rng.randrange(0, 3 * S) if memory else rng.randrange(0, 5 * 10**6) * 1000
        cost = rng.randrange(0, 4)
        for _ in range(3):  # repeated tests change nothing
            predicted = lim.test(item, "user", cost=cost, now_ns=t)
        assert lim.hit(item, "user", cost=cost, now_ns=t) is predicted
        allowed += predicted
    assert 0 < allowed < 300
    # a full count stays full however often it is tested
    lim.clear(item, "user")
    assert hits(lim, item, T, 5, "u2") == [True] * 5
    for _ in range(50):
        assert lim.test(item, "edge", "u2", now_ns=T) is False
    lim.clear(item, "edge", "u2")
    for _ in range(50):
        assert lim.test(item, "edge", "u2", cost=5, now_ns=T) is True
    assert hits(lim, item, T, 6, "u2") == [True] * 5 + [False]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_clear(store_url, strategy):
    lim, one = strategy(storage_from_string(store_url)), parse("1/hour")
    assert hits(lim, one, T, 2, "a") == [True, False]
    assert hits(lim, one, T, 2, "b") == [True, False]
    lim.clear(one, "edge", "a")
    assert lim.get_window_stats(one, "edge", "a", now_ns=T).remaining == 1
    assert hits(lim, one, T, 2, "a") == [True, False]
    assert hits(lim, one, T, 1, "b") == [False]  # another key's count untouched


def test_keys_never_collide(store_url):
    store = storage_from_string(store_url)
    fixed, moving = FixedWindowRateLimiter(store), MovingWindowRateLimiter(store)
    items = [RateLimitItemPerMinute(1), RateLimitItemPerMinute(1, namespace="other"),
             RateLimitItemPerHour(1), RateLimitItemPerMinute(1, 60), RateLimitItemPerMinute(2)]
    idents = [("a/b",), ("a", "b"), ("a", "b", ""), ("ab",), (b"a", "b/"), ("x" * 600,),
              ("x" * 599, "x"), ("x" * 600, "y")]
    for lim in (fixed, moving):
        for item in items:
            for ids in idents:
                assert [lim.hit(item, *ids, now_ns=T) for _ in range(item.amount)] == \
                    [True] * item.amount, (lim, item, ids)
                assert lim.hit(item, *ids, now_ns=T) is False
    # limits' key_for text is the same for some of these; ours are not
    assert items[0].key_for("a/b") == items[0].key_for("a", "b")


def test_store_from_our_urls_and_objects(redis_server):
    one = parse("1/minute")
    for store in (storage_from_string("memory://"), MemoryStore(),
                  storage_from_string(redis_server.url + "/0?timeout=5&prefix=p1:")):
        lim = MovingWindowRateLimiter(store)
        assert lim.hit(one, "k", now_ns=T) is True
        assert lim.hit(one, "k", now_ns=T) is False


def test_redis_down_raises(redis_server):
    lim = FixedWindowRateLimiter(storage_from_string(redis_server.url + "?timeout=5"))
    assert lim.hit(parse("1/minute"), "k") is True
    redis_server.kill()
    with pytest.raises(BackendError):
        lim.hit(parse("1/minute"), "k")
    with pytest.raises(BackendError):
        lim.test(parse("1/minute"), "k")
    redis_server.start()


def test_default_clock_is_unix_time():
    """Without now_ns the in-process store reads Unix time: reset_time is a Unix time within
    the window of the hit (bounds only from below and above the real calls)."""
    lim, one = FixedWindowRateLimiter(storage_from_string("memory://")), parse("1/minute")
    before = time.time()
    assert lim.hit(one, "k") is True
    stats = lim.get_window_stats(one, "k")
    after = time.time()
    assert stats.remaining == 0
    assert before < stats.reset_time <= after + 60 + 0.001
