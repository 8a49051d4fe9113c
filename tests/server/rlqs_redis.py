#!/usr/bin/env python3
"""Envoy's Rate Limit Quota Service in Redis mode, end to end: two ratelimitd on one private
redis-server (tests/redis/redis-servers.sh) serve one fleet of Envoys (grpcio streams acting as
Envoys, rlqs_integration.py's Envoy and Fleet) for the same budget.  Each daemon claims its
demand-proportional part of every quota bucket in Redis (src/redis/lua/quota.lua) and divides
it among its own streams.  The tests check what docs/envoy.md promises: the sums over both
daemons' live assignments never pass R and B, utilization under saturation, claims following
the demand, a light daemon next to a heavy one served (not denied), a reload that changes the
rule while Envoys hold assignments, each fail mode while Redis is stopped (and the sum while
entering fail: local), then claims again once it is back; and each daemon's /v1/stats and
/metrics show its claims.

Usage: redis-servers.sh run standalone -- rlqs_redis.py PATH_TO_RATELIMITD [TEST_NAME...]"""
import os
import signal
import subprocess
import sys
import threading
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


def quota_rows(d):
    """/v1/stats' quota rows by BucketId, and /metrics' per-bucket claim gauges, read as
    stats, metrics, stats until the two stats reads agree (an exchange every 500 ms may move
    the numbers between two reads)."""
    import json
    for _ in range(50):
        a = json.loads(d.curl("/v1/stats").split("\n\n", 1)[1])["quotas"]
        m = d.curl("/metrics").split("\n\n", 1)[1]
        b = json.loads(d.curl("/v1/stats").split("\n\n", 1)[1])["quotas"]
        if a == b:
            return a, m
    raise AssertionError("the quota state never held still for three reads")


@test
def each_daemon_shows_its_claims_in_stats_and_metrics(tmp):
    # The quota service in sight in Redis mode: each daemon's /v1/stats and /metrics show the
    # bucket's claim on the global budget (the same numbers, from one snapshot), claimed by
    # both daemons, the two claims within Q and B.
    import shutil
    ds = daemons(tmp, config())
    envoys = []
    try:
        fleet = rq.Fleet([], WEB)
        for d, demand in zip(ds, (1.5 * R, 0.5 * R)):
            e = rq.Envoy(d.grpc)
            envoys.append(e)
            fleet.add(e, demand)
        fleet.run(3.0)
        claims = []
        for d in ds:
            rq.wait_for(lambda: quota_rows(d)[0]["shown"][0]["claim"] == "claimed", 10,
                        what="a claimed bucket")
            q, m = quota_rows(d)
            assert q["redis"] is True and q["buckets"] == 1, q
            row = q["shown"][0]
            assert row["bucket"] == "name=web", row
            assert 0 < row["claim_tokens_per_fill"] <= 200 and 0 < row["claim_max_tokens"] <= 40, row
            assert row["budget_tokens_per_fill"] <= row["claim_tokens_per_fill"], row
            for part, key in (("tokens_per_fill", "claim_tokens_per_fill"),
                              ("max_tokens", "claim_max_tokens")):
                line = 'ratelimitd_rlqs_bucket_claim{domain="q",bucket="name=web",part="%s"} %d' % (
                    part, row[key])
                assert line in m.splitlines(), (line, m[:3000])
            if shutil.which("promtool"):
                r = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True,
                                   text=True, timeout=30)
                assert r.returncode == 0, (r.stdout, r.stderr)
            claims.append(row)
        print("    claims %d (%d) and %d (%d) of 200 (40)" % (
            claims[0]["claim_tokens_per_fill"], claims[0]["claim_max_tokens"],
            claims[1]["claim_tokens_per_fill"], claims[1]["claim_max_tokens"]))
        assert sum(c["claim_tokens_per_fill"] for c in claims) <= 200, claims
        assert sum(c["claim_max_tokens"] for c in claims) <= 40, claims
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
        # fail: local divides each daemon's last claim (equal demands: about Q / 2 each)
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


def drive(envoys, key, demand, seconds, every, at=None, action=None):
    """Requests at demand[e] per second on each Envoy, each reporting every every[e] s
    (staggered), for `seconds`; action() once `at` s in."""
    start = time.monotonic()
    end = start + seconds
    due = {id(e): 0.0 for e in envoys}
    nxt = {id(e): time.monotonic() + 0.1 * (i % 5) for i, e in enumerate(envoys)}
    last = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= end:
            return
        if action is not None and now >= start + at:
            action()
            action = None
        dt, last = now - last, now
        for e in envoys:
            due[id(e)] += demand[id(e)] * dt
            while due[id(e)] >= 1:
                due[id(e)] -= 1
                e.request(key, now)
            if now >= nxt[id(e)]:
                e.report([key], now)
                nxt[id(e)] = now + every[id(e)]
        time.sleep(0.004)


@test
def a_light_daemon_next_to_a_heavy_one_gets_a_token_bucket_not_deny_all(tmp):
    ds = daemons(tmp, config())
    envoys = []
    try:
        fleet = rq.Fleet([], WEB)
        for _ in range(3):
            e = rq.Envoy(ds[0].grpc)
            envoys.append(e)
            fleet.add(e, 1.5 * R)  # heavy: 3 x 1.5 R on the first daemon
        light = rq.Envoy(ds[1].grpc)
        envoys.append(light)
        fleet.add(light, 2.0)  # light: 2 requests a second, 1 % of R
        t0 = time.monotonic()
        fleet.run(7.0)
        t1 = time.monotonic()
        a = light.current(WEB)
        got = sum(1 for (at, k) in light.admitted if at >= t0 + 3.0)
        wr, wb = worst_sums(envoys, WEB, t0, t1)
        print("    light daemon: %s %s/%ss burst %s, %d of %d admitted after 3 s; max sums %.1f/s, %d"
              % (a["kind"], a.get("tpf"), a.get("fill"), a.get("max"), got,
                 sum(1 for (at, k, ok) in light.requests if at >= t0 + 3.0), wr, wb))
        assert a["kind"] == "tb" and a["max"] >= 1 and a["tpf"] >= 1, a
        assert got >= 2, got  # deny-all admits none
        assert wr <= R + 1e-6 and wb <= BURST, (wr, wb)
    finally:
        stop_all(ds, envoys)


@test
def a_reload_that_changes_the_rule_keeps_the_sums_over_both_daemons_within_the_budget(tmp):
    ds = daemons(tmp, config())
    envoys = [rq.Envoy(ds[0].grpc) for _ in range(2)] + [rq.Envoy(ds[1].grpc) for _ in range(3)]
    demand = {id(e): 1.5 * R for e in envoys}
    # The first daemon's first Envoy reports every 1.2 s, the others every 0.1 s: after the
    # reload the fast ones are abandoned and served by the new rule's bucket while the slow one
    # still enforces (for 1.1 s) what the old bucket gave it just before, so the first
    # daemon's claim must still cover that (the old bucket's live sums carried in its key).
    every = {id(e): 0.1 for e in envoys}
    every[id(envoys[0])] = 1.2
    t_reload = []

    def reload():
        t_reload.append(time.monotonic())
        for d in ds:
            with open(d.config_path, "w") as f:  # the same budget, another rule's text
                f.write(config().replace("200/1s,burst=40", "200/1000ms,burst=40"))
            d.p.send_signal(signal.SIGHUP)

    try:
        drive(envoys, WEB, demand, 9.0, every, at=3.7, action=reload)  # slow: 3.6, 4.8
        t1 = time.monotonic()
        t_reload = t_reload[0]
        assert any(dd == "abandon" for e in envoys for (_, k, dd) in e.log), "no AbandonAction"
        wr, wb = worst_sums(envoys, WEB, t_reload - 3.0, t1)
        print("    around a reload that changes the rule: max sums %.1f/s (R %d), %d (B %d)"
              % (wr, R, wb, BURST))
        assert wr <= R + 1e-6 and wb <= BURST, (wr, wb)
        for e in envoys:
            assert e.current(WEB)["kind"] == "tb", e.current(WEB)
    finally:
        stop_all(ds, envoys)


@test
def entering_fail_local_keeps_the_sum_over_both_daemons_within_q(tmp):
    cfg = config(FAIL_BUCKETS, "  timeout: 100ms\n  backoff_min: 50ms\n  backoff_max: 200ms\n")
    ds = daemons(tmp, cfg.replace("  timeout: 1s\n", ""))
    key = rq.B(name="local")
    heavy = [rq.Envoy(ds[0].grpc) for _ in range(3)]
    light = [rq.Envoy(ds[1].grpc)]
    envoys = heavy + light
    demand = {id(e): 150.0 for e in heavy}
    demand[id(light[0])] = 60.0
    # the heavy daemon's Envoys report every 0.6 s (it lowers their shares only then), the
    # light one's every 0.1 s (it would raise its share at once)
    every = {id(e): 0.6 for e in heavy}
    every[id(light[0])] = 0.1
    t_stop = []

    def stop():  # in a thread: the Envoys go on reporting meanwhile
        t_stop.append(time.monotonic())
        th = threading.Thread(target=subprocess.run, daemon=True,
                              args=(["sh", SH, "stop", os.path.join(BASE, "s0")],))
        th.start()
        t_stop.append(th)

    try:
        # claims: the heavy daemon holds most of Q = 100 / B = 20, the light one a little;
        # then both enter fail: local, each dividing its last claim (never Q / N: the light
        # one must not raise its share while the heavy one's Envoys still hold theirs)
        drive(envoys, key, demand, 9.0, every, at=5.0, action=stop)
        t1 = time.monotonic()
        wr, wb = worst_sums(envoys, key, t_stop[0], t1)
        print("    entering fail: local (heavy 3 x 150/s, light 60/s): max sums %.1f/s, %d "
              "(Q 100, B 20)" % (wr, wb))
        assert wr <= 100 + 1e-6 and wb <= 20, (wr, wb)
        for e in envoys:
            a = e.current(key)
            assert a["kind"] == "tb" and a["tpf"] / a["fill"] <= 50 and a["max"] <= 10, a
    finally:
        if len(t_stop) == 2:
            t_stop[1].join(30)
        subprocess.run(["sh", SH, "restart", os.path.join(BASE, "s0")], check=True, timeout=30)
        stop_all(ds, envoys)


@test
def two_tenants_reporting_one_bucket_id_each_claim_their_own_key(tmp):
    # Issue 42: a tenant's buckets are its own, in Redis too: its key carries its prefix, as
    # the per-request doors' keys do, so two tenants on two daemons do not split one budget.
    cfg = config() + ("server:\n  password: admin-pw\ntenants:\n"
                      "  - {name: acme, password: acme-pw}\n"
                      "  - {name: umbrella, password: umbrella-pw}\n")
    ds = daemons(tmp, cfg)
    envoys = []
    try:
        fleet = rq.Fleet([], WEB)
        for d, token in zip(ds, ("acme-pw", "umbrella-pw")):
            e = rq.Envoy(d.grpc, token=token)
            envoys.append(e)
            fleet.add(e, 1.5 * R)
        fleet.run(6.0)
        rates = [[dd["tpf"] / dd["fill"] for (at, k, dd) in e.log
                  if isinstance(dd, dict) and dd["kind"] == "tb"][-1] for e in envoys]
        print("    acme %.0f/s, umbrella %.0f/s of %d" % (rates[0], rates[1], R))
        assert all(r >= 0.75 * R for r in rates), rates  # one budget would give R / 2 each
        port = int(SERVERS.split(",")[0].rsplit(":", 1)[1])
        keys = it.raw(port, it.resp("KEYS", "*rlqs*"), wait=0.5)
        assert b"rlt:rlqs:{acme:q%00name%00web%00}" in keys, keys
        assert b"rlt:rlqs:{umbrella:q%00name%00web%00}" in keys, keys
        for e in envoys:
            assert e.error is None, e.error
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
