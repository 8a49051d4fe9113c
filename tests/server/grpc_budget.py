#!/usr/bin/env python3
"""Envoy's reserve-then-settle over several descriptors (src/server/envoy/rls_budget.c),
called by Debian's grpcio against a real ratelimitd: the request-time ShouldRateLimit
(descriptors ending in `ratelimit.reserve=ID`, hits_addend the estimate) is one all-or-nothing
reservation over their limits; the stream-end call (`ratelimit.settle=ID`, hits_addend each
descriptor's real usage, as apply_on_stream_done sends) charges each limit its real usage,
once.  A reference ledger in the test says what each limit must hold.

Usage: grpc_budget.py PATH_TO_RATELIMITD [--redis] [TEST_NAME...]  (under /usr/bin/python3)
  --redis: only the Redis test, under tests/redis/redis-servers.sh run standalone."""
import os
import random
import sys

import grpc_integration as g  # noqa: E402  (messages, GDaemon, req)
import integration as it  # noqa: E402

TESTS, REDIS_TESTS = [], []
REDIS = "--redis" in sys.argv[2:]
ARGS = [a for a in sys.argv[2:] if a != "--redis"]
CFG = ("domain: llm\ndescriptors:\n"
       "  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n"
       "  - key: org\n    rate_limit: {unit: hour, requests_per_unit: 1500}\n"
       "  - key: model\n    rate_limit: {unit: hour, requests_per_unit: 500}\n")
LIMITS = {"user": 1000, "org": 1500, "model": 500}


def test(fn):
    TESTS.append(fn)
    return fn


def call(cl, mark, rid, hits):
    """One call over the three descriptors; hits: {key: hits_addend}."""
    descs = [{"entries": [(k, k[0] + "1")] + ([(mark, rid)] if mark else []), "hits_addend": h}
             for k, h in hits.items()]
    return cl(g.req("llm", *descs))


def remaining(cl):
    r = call(cl, None, None, {k: 0 for k in LIMITS})
    return {k: s.limit_remaining for k, s in zip(LIMITS, r.statuses)}


@test
def one_reservation_over_three_descriptors_is_all_or_nothing_and_settles_once(tmp):
    with g.GDaemon(tmp, config=CFG) as d:
        cl = d.client()
        used = {k: 0 for k in LIMITS}  # the reference ledger
        r = call(cl, "ratelimit.reserve", "a", {"user": 400, "org": 400, "model": 400})
        assert r.overall_code == g.OK, r
        assert remaining(cl) == {"user": 600, "org": 1100, "model": 100}
        # 200 does not fit the model's 100 left: refused, and no limit is charged
        r = call(cl, "ratelimit.reserve", "b", {"user": 200, "org": 200, "model": 200})
        assert r.overall_code == g.OVER and [s.code for s in r.statuses] == [g.OK, g.OK, g.OVER], r
        assert remaining(cl) == {"user": 600, "org": 1100, "model": 100}
        # the stream end: each limit charged its real usage, the rest of the estimate back
        real = {"user": 100, "org": 150, "model": 50}
        call(cl, "ratelimit.settle", "a", real)
        for k in LIMITS:
            used[k] += real[k]
        want = {k: LIMITS[k] - used[k] for k in LIMITS}
        assert remaining(cl) == want, (remaining(cl), want)
        # a second settle, a settle of a refused or unknown id: nothing charged, nothing back
        for rid in ("a", "b", "zzz"):
            r = call(cl, "ratelimit.settle", rid, {"user": 300, "org": 300, "model": 300})
            assert r.overall_code == g.OK, r
            assert remaining(cl) == want, (rid, remaining(cl), want)
        # usage over the estimate: the excess charged too, once
        assert call(cl, "ratelimit.reserve", "c", {"user": 10, "org": 10, "model": 10}).overall_code == g.OK
        call(cl, "ratelimit.settle", "c", {"user": 30, "org": 5, "model": 0})
        for k, v in {"user": 30, "org": 5, "model": 0}.items():
            used[k] += v
        want = {k: LIMITS[k] - used[k] for k in LIMITS}
        assert remaining(cl) == want, (remaining(cl), want)
        cl.close()


@test
def random_streams_settle_each_limit_its_real_usage_exactly_once(tmp):
    rnd = random.Random(38)
    with g.GDaemon(tmp, config=CFG) as d:
        cl = d.client()
        used = {k: 0 for k in LIMITS}
        held = {}  # id -> estimate, reserved and not yet settled
        for i in range(60):
            rid = "s%d" % i
            est = {k: rnd.randint(1, 60) for k in LIMITS}
            fits = all(used[k] + sum(e[k] for e in held.values()) + est[k] <= LIMITS[k]
                       for k in LIMITS)
            r = call(cl, "ratelimit.reserve", rid, est)
            assert (r.overall_code == g.OK) == fits, (i, r, used, held)
            if fits:
                held[rid] = est
            # settle a random outstanding one, and sometimes twice
            if held and rnd.random() < 0.6:
                sid = rnd.choice(sorted(held))
                real = {k: rnd.randint(0, held[sid][k] + 10) for k in LIMITS}
                for _ in range(rnd.choice((1, 2))):
                    call(cl, "ratelimit.settle", sid, real)
                del held[sid]
                for k in LIMITS:
                    used[k] += real[k]
            want = {k: max(0, LIMITS[k] - used[k] - sum(e[k] for e in held.values()))
                    for k in LIMITS}
            assert remaining(cl) == want, (i, remaining(cl), want)
        cl.close()


@test
def a_call_that_both_reserves_and_settles_or_names_no_id_is_invalid_argument(tmp):
    with g.GDaemon(tmp, config=CFG) as d:
        cl = d.client()
        for descs in ([{"entries": [("user", "u1"), ("ratelimit.reserve", "a")]},
                       {"entries": [("org", "o1"), ("ratelimit.settle", "a")]}],
                      [{"entries": [("user", "u1"), ("ratelimit.reserve", "a")]},
                       {"entries": [("org", "o1"), ("ratelimit.reserve", "b")]}],
                      [{"entries": [("user", "u1"), ("ratelimit.reserve", "")]}],
                      [{"entries": [("user", "u1"), ("ratelimit.settle", "x" * 200)]}]):
            code, msg = cl.error(g.req("llm", *descs))
            assert code == g.grpc.StatusCode.INVALID_ARGUMENT, (code, msg)
        nine = [{"entries": [("user", "u%d" % i), ("ratelimit.reserve", "n")]} for i in range(9)]
        code, msg = cl.error(g.req("llm", *nine))
        assert code == g.grpc.StatusCode.INVALID_ARGUMENT and "at most 8" in msg, (code, msg)
        assert remaining(cl) == LIMITS
        cl.close()


@test
def another_tenant_cannot_settle_a_reservation_by_its_id(tmp):
    cfg = ("server:\n  password: s3cret\ntenants:\n  - {name: acme, password: acmepw}\n"
           "  - {name: evil, password: evilpw}\n" + CFG)
    with g.GDaemon(tmp, config=cfg) as d:
        acme, evil = d.client("acmepw"), d.client("evilpw")
        est = {"user": 400, "org": 400, "model": 400}
        assert call(acme, "ratelimit.reserve", "a", est).overall_code == g.OK
        call(evil, "ratelimit.settle", "a", {"user": 0, "org": 0, "model": 0})
        assert remaining(acme) == {k: LIMITS[k] - 400 for k in LIMITS}  # still held
        assert remaining(evil) == LIMITS
        call(acme, "ratelimit.settle", "a", {"user": 7, "org": 8, "model": 9})
        assert remaining(acme) == {"user": 993, "org": 1492, "model": 491}
        acme.close()
        evil.close()


@REDIS_TESTS.append
def on_redis_two_daemons_see_one_reservation_charged_once(tmp):
    cfg = "redis:\n  address: \"%s\"\n" % os.environ["RLT_REDIS_SERVERS"] + CFG
    os.makedirs(os.path.join(tmp, "a"))
    os.makedirs(os.path.join(tmp, "b"))
    with g.GDaemon(os.path.join(tmp, "a"), "--no-snapshot", config=cfg) as a, \
            g.GDaemon(os.path.join(tmp, "b"), "--no-snapshot", config=cfg) as b:
        ca, cb = a.client(), b.client()
        assert call(ca, "ratelimit.reserve", "a", {"user": 400, "org": 400, "model": 400}
                    ).overall_code == g.OK
        r = call(cb, "ratelimit.reserve", "b", {"user": 200, "org": 200, "model": 200})
        assert r.overall_code == g.OVER, r  # the model's 100 left, seen by the other daemon
        assert remaining(cb) == {"user": 600, "org": 1100, "model": 100}
        for _ in range(2):
            call(ca, "ratelimit.settle", "a", {"user": 100, "org": 150, "model": 50})
        assert remaining(cb) == {"user": 900, "org": 1350, "model": 450}
        ca.close()
        cb.close()


if __name__ == "__main__":
    sys.exit(it.run_tests(REDIS_TESTS if REDIS else TESTS, ARGS, prefix="rltb-"))
