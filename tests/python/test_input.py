"""Bad input: every argument's type and range traps raise the right Python exception with the C
library's message, never crash; a fuzz-style property test of policy strings; limits' notation."""
import random
import string

import pytest

import libratelimit as rl


@pytest.fixture
def lim():
    return rl.Limiter("gcra:10/1s")


@pytest.mark.parametrize("key,exc", [(None, TypeError), (1, TypeError), (b"", ValueError),
                                     ("", ValueError), ("x" * 513, ValueError),
                                     (b"x" * 513, ValueError), (bytearray(b"k"), TypeError)])
def test_bad_keys(lim, key, exc):
    with pytest.raises(exc):
        lim.hit(key)


def test_key_limits_are_the_stores(lim):
    assert lim.hit("x" * 512).allowed
    assert lim.hit(b"\x00\xff binary").allowed
    assert lim.hit("ключ").allowed  # UTF-8


@pytest.mark.parametrize("cost,exc", [(-1, ValueError), (1.0, TypeError), ("1", TypeError),
                                      (True, TypeError), (2**63, OverflowError),
                                      (-2**64, OverflowError), (None, TypeError)])
def test_bad_costs(lim, cost, exc):
    with pytest.raises(exc):
        lim.hit("k", cost)


def test_cost_beyond_policy_is_a_decision(lim):
    d = lim.hit("k", 11)
    assert not d.allowed and d.retry_after == -1.0 and d.retry_after_ns == -1
    assert "Retry-After" not in d.headers()  # never fits: no Retry-After


def test_now_out_of_the_arithmetic_is_overflow():
    lim = rl.Limiter("gcra:3/1s")  # |now| x 3 must fit int64 (ratelimit.h)
    with pytest.raises(OverflowError, match="out of range"):
        lim.hit("k", 1, now_ns=2**62)


@pytest.mark.parametrize("now,exc", [(1.5, TypeError), ("0", TypeError), (2**63, OverflowError),
                                     (-(2**63), ValueError), (True, TypeError)])
def test_bad_now(lim, now, exc):
    with pytest.raises(exc):
        lim.hit("k", 1, now)


def test_bad_arguments_shape(lim):
    with pytest.raises(TypeError):
        lim.hit()
    with pytest.raises(TypeError):
        lim.hit("k", 1, 0, 4)
    with pytest.raises(TypeError):
        lim.hit("k", bogus=1)
    with pytest.raises(TypeError):
        lim.hit("k", 1, cost=2)
    with pytest.raises(TypeError):
        lim.multi([("k",)])
    with pytest.raises(TypeError):
        lim.multi(5)
    with pytest.raises(ValueError):
        lim.multi([])
    with pytest.raises(TypeError):
        lim.settle("k", "abc", 1)
    with pytest.raises(ValueError):
        lim.settle("k", 0, 1)
    with pytest.raises(ValueError):
        lim.acquire("k")  # not a concurrency policy
    with pytest.raises(KeyError, match="unknown reservation"):
        lim.settle("k", 12345, 1)


@pytest.mark.parametrize("text,exc,msg", [
    ("gcra:2/1x", ValueError, 'period "1x"'),
    ("gcra:0/1s", ValueError, ""),
    ("bogus:1/1s", ValueError, "cannot parse"),
    ("100/fortnight", ValueError, "cannot parse"),
    ("gcra:1/99999999999999d", OverflowError, "too large"),
    ("sliding_log:2000000/1s", OverflowError, "too large"),
    ("gcra:1/1s,jitter=101%", ValueError, "jitter"),
    ("", ValueError, ""),
    (";", ValueError, "empty"),
    ("fixed_window:1/1mo,tz=No/Such_Zone", ValueError, "No/Such_Zone"),
])
def test_bad_policies(text, exc, msg):
    with pytest.raises(exc, match=msg):
        rl.Limiter(text)


def test_bad_policy_types():
    with pytest.raises(TypeError):
        rl.Limiter(5)
    with pytest.raises(TypeError):
        rl.Limiter([5])
    with pytest.raises(TypeError):
        rl.Limiter("1/second", store=5)
    with pytest.raises(ValueError):
        rl.Limiter("1/second", strategy="nope")
    with pytest.raises(ValueError):
        rl.Limiter("1/second", name="bad name")
    with pytest.raises(ValueError):
        rl.Limiter(";".join(["1/second"] * 17))
    with pytest.raises(ValueError):
        rl.Limiter("concurrency:2;gcra:1/1s")


def test_reinit_is_refused(lim):
    with pytest.raises(RuntimeError):
        rl._native.Limiter.__init__(lim, ["gcra:1/1s"], rl.MemoryStore())


def test_uninitialised_limiter_raises():
    raw = rl._native.Limiter.__new__(rl._native.Limiter)
    with pytest.raises(RuntimeError):
        raw.hit("k")


@pytest.mark.parametrize("text,want", [
    ("100/minute", ["fixed_window:100/1m"]),
    ("10 per second", ["fixed_window:10/1s"]),
    ("5 per 2 hours", ["fixed_window:5/2h"]),
    ("100/minute;1000/hour", ["fixed_window:100/1m", "fixed_window:1000/1h"]),
    ("1/second, 5/minute | 7/day", ["fixed_window:1/1s", "fixed_window:5/1m",
                                    "fixed_window:7/1d"]),
    ("3/month", ["fixed_window:3/30d"]),
    ("3/year", ["fixed_window:3/360d"]),
    ("gcra:100/1m,burst=20;10/second", ["gcra:100/1m,burst=20", "fixed_window:10/1s"]),
])
def test_limits_notation(text, want):
    assert list(rl.Limiter(text).policies) == [rl.format_policy(w) for w in want]


def test_strategies():
    assert rl.parse_policy("5/second", "moving-window") == ["sliding_log:5/1s"]
    assert rl.parse_policy("5/second", "sliding-window-counter") == ["sliding_window:5/1s"]
    assert rl.parse_policy("5/second", "gcra") == ["gcra:5/1s"]


def test_multi_limit_is_all_or_nothing():
    lim = rl.Limiter("2/second;3/minute", store=rl.MemoryStore(origin_ns=0))
    assert lim.hit("u", now_ns=0).allowed and lim.hit("u", now_ns=0).allowed
    d = lim.hit("u", now_ns=0)
    assert not d.allowed and d.refused == 0
    # the second limit was not charged by the denial: one more fits once the second passes
    assert lim.hit("u", now_ns=10**9).allowed
    d = lim.hit("u", now_ns=10**9)
    assert not d.allowed and d.refused == 1 and d.policy == "fixed_window:3/1m"


def test_policy_fuzz_never_crashes_and_round_trips():
    """Valid texts mutated by random edits: whatever comes out is refused with an exception or
    accepted, and what is accepted round-trips through its canonical form and decides."""
    r = random.Random(31)
    seeds = ["gcra:100/1m,burst=20", "fixed_window:5/1s", "sliding_log:10/1h",
             "sliding_window:3/250ms", "token_bucket:7/1d,burst=9,block=1s*2..8s",
             "leaky_bucket:10/1s,queue=5,delay=2", "leaky_bucket:10/1s,burst=3,nodelay",
             "concurrency:4/30s", "fixed_window:100/1mo,tz=UTC", "gcra:5/1s,jitter=20%",
             "100/minute", "10 per second", "5 per 2 hours;1/second", "1/day|2/year"]
    alphabet = string.ascii_letters + string.digits + ":/,=%.*;|_- \x00\xff\u00e9"
    accepted = refused = 0
    for i in range(20000):
        text = r.choice(seeds)
        for _ in range(r.randrange(0, 4)):
            pos = r.randrange(len(text) + 1)
            op = r.randrange(3)
            if op == 0:
                text = text[:pos] + r.choice(alphabet) + text[pos:]
            elif op == 1:
                text = text[:pos] + text[pos + 1:]
            else:
                text = text[:pos] + r.choice(["0", "9" * 19, "-", "s", "mo", ";"]) + text[pos:]
        try:
            canon = rl.parse_policy(text)
        except (ValueError, OverflowError):
            refused += 1
            continue
        accepted += 1
        assert rl.parse_policy(";".join(canon)) == canon  # canonical text round-trips
        if not any(c.startswith("concurrency") for c in canon) or len(canon) == 1:
            rl.Limiter(canon).hit("k", now_ns=0)
    assert accepted > 1000 and refused > 1000
