#!/usr/bin/env python3
"""Envoy's Rate Limit Quota Service in Redis mode, end to end: two ratelimitd on one private
redis-server (tests/redis/redis-servers.sh) serve one fleet of Envoys (grpcio streams acting as
Envoys, rlqs_integration.py's Envoy and Fleet) for the same budget.  Each daemon claims its
demand-proportional part of every quota bucket in Redis (src/redis/lua/quota.lua) and divides
it among its own streams.  The tests check what docs/envoy.md promises: the sums over both
daemons' live assignments never pass R and B, utilization under saturation, claims following
the demand, and each fail mode while Redis is stopped, then claims again once it is back.

Usage: redis-servers.sh run standalone -- rlqs_redis.py PATH_TO_RATELIMITD [TEST_NAME...]"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import integration as it  # noqa: E402
import rlqs_integration as rq  # noqa: E402  (Envoy, Fleet, live_sums, B)

SERVERS = os.environ.get("RLT_REDIS_SERVERS", "")
BASE = os.environ.get("RLT_REDIS_BASE", "")
SH = os.environ.get("RLT_REDIS_SH", "")
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


R, BURST = 200.0, 40.0
WEB = rq.B(name="web")


def config(extra_buckets="", redis_extra=""):
    return ("domain: q\nquota_buckets:\n"
            "  - match: {name: web}\n    policy: token_bucket:200/1s,burst=40\n" +
            extra_buckets +
            "redis:\n  address: \"%s\"\n  timeout: 1s\n%s" % (SERVERS, redis_extra))


def daemons(tmp, cfg, n=2):
    ds = []
    for i in range(n):
        d = os.path.join(tmp, "d%d" % i)
        os.mkdir(d)
        ds.append(it.Daemon(d, "--no-snapshot", config=cfg))
    return ds


def info(d):
    text = it.raw(d.port, it.resp("INFO"), wait=2.0).decode(errors="replace")
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l and not l.startswith("#"))


def worst_sums(envoys, key, t0, t1):
    """The largest sums of live rates and bursts over every instant of [t0, t1), sampled every
    20 ms (an answer in flight is given 30 ms to land, as rlqs_integration.py does)."""
    worst_r = worst_b = 0.0
    t = t0
    while t < t1:
        r1, b1 = rq.live_sums(envoys, key, t)
        r2, b2 = rq.live_sums(envoys, key, t + 0.03)
        worst_r, worst_b = max(worst_r, min(r1, r2)), max(worst_b, min(b1, b2))
        t += 0.02
    return worst_r, worst_b


def stop_all(ds, envoys):
    for e in envoys:
        e.close()
    for d in ds:
        assert d.stop() == 0, d.stderr()


@test
def two_daemons_share_one_budget_and_the_sums_over_both_stay_within_it(tmp):
    ds = daemons(tmp, config())
    envoys = []
    try:
        fleet = rq.Fleet([], WEB)
        for d in ds:
            for _ in range(3):
                e = rq.Envoy(d.grpc)
                envoys.append(e)
                fleet.add(e, 1.5 * R)  # every Envoy asks 1.5 x the whole budget
        t0 = time.monotonic()
        fleet.run(8.0)
        t1 = time.monotonic()
        wr, wb = worst_sums(envoys, WEB, t0, t1)
        adm = [a for e in envoys for (a, k) in e.admitted if a >= t0 + 2.0]
        u = len(adm) / (R * (t1 - t0 - 2.0))
        print("    max sum of live rates %.1f/s (R %d), of bursts %d (B %d); utilization %.1f%%"
              % (wr, R, wb, BURST, 100 * u))
        assert wr <= R + 1e-6 and wb <= BURST, (wr, wb)
        assert u >= 0.85, u
        for d in ds:
            i = info(d)
            assert int(i["rlqs_redis_exchanges_ok"]) >= 10, i
            assert i["rlqs_redis_fail_buckets"] == "0", i
        for e in envoys:
            assert e.error is None, e.error
    finally:
        stop_all(ds, envoys)


@test
def claims_follow_each_daemons_demand(tmp):
    ds = daemons(tmp, config())
    envoys = []
    try:
        fleet = rq.Fleet([], WEB)
        per = {}
        for d, demand in zip(ds, (1.6 * R, 0.4 * R)):  # 4 x more on the first daemon
            per[d] = [rq.Envoy(d.grpc) for _ in range(2)]
            for e in per[d]:
                envoys.append(e)
                fleet.add(e, demand)
        t0 = time.monotonic()
        fleet.run(7.0)
        t1 = time.monotonic()
        rates = [sum(rq.rate_between(e, WEB, t0 + 3.0, t1) for e in per[d]) for d in ds]
        wr, wb = worst_sums(envoys, WEB, t0, t1)
        print("    admitted %.0f/s and %.0f/s (demands 4:1); max sums %.1f/s, %d"
              % (rates[0], rates[1], wr, wb))
        assert wr <= R + 1e-6 and wb <= BURST, (wr, wb)
        assert 2.5 <= rates[0] / rates[1] <= 6.0, rates
        assert sum(rates) >= 0.8 * R, rates
    finally:
        stop_all(ds, envoys)


FAIL_BUCKETS = """  - match: {name: closed}
    policy: token_bucket:100/1s,burst=20
    fail: closed
  - match: {name: open}
    policy: token_bucket:100/1s,burst=20
    fail: open
  - match: {name: local}
    policy: token_bucket:100/1s,burst=20
    fail: local
"""
KINDS = {rq.B(name="closed"): "deny", rq.B(name="open"): "allow", rq.B(name="local"): "tb"}


@test
def stopped_redis_gives_each_fail_mode_and_claims_resume_once_it_is_back(tmp):
    cfg = config(FAIL_BUCKETS, "  timeout: 100ms\n  backoff_min: 50ms\n  backoff_max: 200ms\n")
    ds = daemons(tmp, cfg.replace("  timeout: 1s\n", ""))
    envoys = [rq.Envoy(d.grpc) for d in ds]
    keys = list(KINDS) + [WEB]

    def run(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for e in envoys:
                for k in keys:
                    for _ in range(3):
                        e.request(k, time.monotonic())
                e.report(keys)
            time.sleep(0.1)

    try:
        # Claims: every bucket a token bucket.  The second daemon to exchange finds the budget
        # claimed by the first, which gives way at its next exchanges (an interval, the
        # division's G = TTL / 3 before its stream is lowered, an interval): about 2 s.
        run(4.0)
        for k in keys:
            for e in envoys:
                assert e.current(k)["kind"] == "tb", (k, e.current(k))
        subprocess.run(["sh", SH, "stop", os.path.join(BASE, "s0")], check=True, timeout=30)
        t_stop = time.monotonic()
        run(2.0)
        for k, kind in KINDS.items():
            for e in envoys:
                assert e.current(k)["kind"] == kind, (k, e.current(k))
        # fail: local divides Q / N on each daemon, N = 2 the live servers last seen
        for e in envoys:
            a = e.current(rq.B(name="local"))
            assert 0 < a["tpf"] / a["fill"] <= 50 and a["max"] <= 10, a
        for d in ds:
            i = info(d)
            assert int(i["rlqs_redis_fail_buckets"]) == 4, i  # web's default: closed
            assert int(i["rlqs_redis_exchanges_error"]) >= 4, i
        subprocess.run(["sh", SH, "restart", os.path.join(BASE, "s0")], check=True, timeout=30)
        t_back = time.monotonic()
        run(4.0)  # fresh Redis: the claims settle again as at the start
        for k in keys:
            for e in envoys:
                assert e.current(k)["kind"] == "tb", (k, e.current(k))
        # back under each budget within one TTL of Redis's return
        for k, budget in ((WEB, (R, BURST)), (rq.B(name="local"), (100.0, 20.0))):
            wr, wb = worst_sums(envoys, k, t_back + 2.2, time.monotonic() - 0.05)
            print("    %s after the restart: max sums %.1f/s, %d (budget %d, %d)"
                  % (dict(k)["name"], wr, wb, budget[0], budget[1]))
            assert wr <= budget[0] + 1e-6 and wb <= budget[1], (k, wr, wb)
        for d in ds:
            assert info(d)["rlqs_redis_fail_buckets"] == "0"
        print("    Redis stopped %.1fs" % (t_back - t_stop))
    finally:
        stop_all(ds, envoys)


def main():
    it.BIN = os.path.abspath(sys.argv[1])
    if not SERVERS:
        print("FAIL rlqs_redis: run under tests/redis/redis-servers.sh (RLT_REDIS_SERVERS unset)")
        return 1
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltqr-")


if __name__ == "__main__":
    sys.exit(main())
