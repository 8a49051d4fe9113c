#!/usr/bin/env python3
"""ratelimitd as Envoy's Rate Limit Quota Service, end to end: Debian's grpcio opens real
bidirectional StreamRateLimitQuotas streams with messages built at test time from
src/server/grpc/proto/rlqs.proto.  Each stream acts as one Envoy: it applies every assignment
when it arrives (a token bucket starts full, as Envoy's does), admits nothing without a live
assignment, and reports its counts every 100-200 ms.  The tests check what docs/quota.md
promises: the sums of the live assignments never pass the budget, admissions over every window
stay within the documented bound, utilization under saturation, max-min fairness, a joiner and
a leaver, abandon on reload, blanket rules, "*" buckets, auth, hostile clients, one client's
share of the bucket table (issue 42's flood locks no one else out), and tenants' own buckets.

Usage: rlqs_integration.py PATH_TO_RATELIMITD [TEST_NAME...]   (with /usr/bin/python3)"""
import os
import queue
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import integration as it  # noqa: E402  (Daemon, run_tests)
import grpc_integration as gi  # noqa: E402  (load_messages)

try:
    import grpc
except ImportError as e:
    print("FAIL rlqs_integration: %s (install python3-grpcio python3-protobuf "
          "python3-grpc-tools; run with /usr/bin/python3)" % e)
    sys.exit(1)

PATH = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"
TESTS = []
SANITIZED = os.environ.get("RLT_SANITIZE", "") != ""


def test(fn):
    TESTS.append(fn)
    return fn


M = gi.load_messages(("rlqs.proto",))
Rep = M("envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports")
Resp = M("envoy.service.rate_limit_quota.v3.RateLimitQuotaResponse")


def secs(d):
    return d.seconds + d.nanos / 1e9


def key_of(d):
    return tuple(sorted(d.items()))


class Envoy:
    """One Envoy's rate_limit_quota filter: a stream, its assignments, local token buckets."""

    def __init__(self, port, domain="q", token=None, own_connection=False):
        # gRPC shares one connection among channels to the same address unless asked not to;
        # own_connection makes this Envoy another client of the daemon, as a real one is.
        opts = [("grpc.use_local_subchannel_pool", 1)] if own_connection else None
        self.ch = grpc.insecure_channel("127.0.0.1:%d" % port, options=opts)
        self.domain = domain
        self.out = queue.Queue()
        self.lock = threading.Lock()
        self.assign = {}    # bucket key -> the assignment in force
        self.tokens = {}    # bucket key -> [tokens, last refill time]
        self.log = []       # (time, key, assignment or "abandon")
        self.counts = {}    # bucket key -> [allowed, denied] since the last report
        self.admitted = []  # (time, key)
        self.requests = []  # (time, key, admitted)
        self.first = True
        self.last_report = {}
        self.error = None
        self.responses = 0
        md = [("authorization", "Bearer " + token)] if token else None
        self.call = self.ch.stream_stream(PATH, request_serializer=lambda m: m.SerializeToString(),
                                          response_deserializer=Resp.FromString)(
            iter(self.out.get, None), metadata=md)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for resp in self.call:
                now = time.monotonic()
                with self.lock:
                    self.responses += 1
                    for a in resp.bucket_action:
                        self._apply(key_of(a.bucket_id.bucket), a, now)
        except grpc.RpcError as e:
            self.error = e

    def _apply(self, key, a, now):
        if a.HasField("abandon_action"):
            self.assign.pop(key, None)
            self.log.append((now, key, "abandon"))
            return
        q = a.quota_assignment_action
        s = q.rate_limit_strategy
        d = {"ttl": secs(q.assignment_time_to_live), "at": now}
        if s.HasField("token_bucket"):
            tb = s.token_bucket
            d.update(kind="tb", max=tb.max_tokens, tpf=tb.tokens_per_fill.value,
                     fill=secs(tb.fill_interval))
            old = self.assign.get(key)
            same = (old is not None and now < old["at"] + old["ttl"] and old["kind"] == "tb" and
                    (old["max"], old["tpf"], old["fill"]) == (d["max"], d["tpf"], d["fill"]))
            # The same strategy extends the active assignment (rlqs.proto); another one
            # replaces it, and Envoy's new token bucket starts full.
            if not same:
                self.tokens[key] = [float(tb.max_tokens), now]
        else:
            d["kind"] = "deny" if s.blanket_rule == 1 else "allow"
        self.assign[key] = d
        self.log.append((now, key, d))

    def request(self, key, now):
        with self.lock:
            a = self.assign.get(key)
            ok = False
            if a is not None and now < a["at"] + a["ttl"]:
                if a["kind"] == "allow":
                    ok = True
                elif a["kind"] == "tb":
                    t, last = self.tokens[key]
                    t = min(a["max"], t + (now - last) * a["tpf"] / a["fill"])
                    if t >= 1:
                        t -= 1
                        ok = True
                    self.tokens[key] = [t, now]
            c = self.counts.setdefault(key, [0, 0])
            c[0 if ok else 1] += 1
            if ok:
                self.admitted.append((now, key))
            self.requests.append((now, key, ok))
            return ok

    def report(self, keys, now=None, elapsed=None, allowed=None, denied=None):
        now = time.monotonic() if now is None else now
        r = Rep(domain=self.domain if self.first else "")
        self.first = False
        with self.lock:
            for k in keys:
                u = r.bucket_quota_usages.add()
                for kk, vv in k:
                    u.bucket_id.bucket[kk] = vv
                e = now - self.last_report.get(k, now) if elapsed is None else elapsed
                self.last_report[k] = now
                u.time_elapsed.seconds = int(e)
                u.time_elapsed.nanos = int((e - int(e)) * 1e9)
                c = self.counts.pop(k, [0, 0])
                u.num_requests_allowed = c[0] if allowed is None else allowed
                u.num_requests_denied = c[1] if denied is None else denied
        self.out.put(r)

    def send(self, msg):
        self.out.put(msg)

    def current(self, key):
        with self.lock:
            return self.assign.get(key)

    def close(self):
        self.out.put(None)
        self.reader.join(5)
        self.ch.close()


def B(**kv):
    return tuple(sorted(kv.items()))


def wait_for(cond, timeout=5.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


class Fleet:
    """Drives Envoys at set demands (requests/s per bucket), each reporting every 100-200 ms."""

    def __init__(self, envoys, key, seed=1):
        self.envoys = list(envoys)
        self.key = key
        self.demand = {id(e): 0.0 for e in self.envoys}
        self.due = {id(e): 0.0 for e in self.envoys}
        self.next_report = {}
        self.rng = random.Random(seed)

    def add(self, e, demand):
        self.envoys.append(e)
        self.demand[id(e)] = demand
        self.due[id(e)] = 0.0

    def remove(self, e):
        self.envoys.remove(e)

    def run(self, seconds, tick=0.004):
        end = time.monotonic() + seconds
        last = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                return
            dt, last = now - last, now
            for e in list(self.envoys):
                self.due[id(e)] += self.demand[id(e)] * dt
                while self.due[id(e)] >= 1:
                    self.due[id(e)] -= 1
                    e.request(self.key, now)
                nr = self.next_report.get(id(e))
                if nr is None or now >= nr:
                    e.report([self.key], now)
                    self.next_report[id(e)] = now + self.rng.uniform(0.1, 0.2)
            time.sleep(tick)


def live_sums(envoys, key, t):
    """Sum of rates (tokens/s) and bursts of the token buckets in force at t."""
    rate = burst = 0.0
    for e in envoys:
        cur = None
        for (at, k, d) in e.log:
            if k == key and at <= t:
                cur = d
        if isinstance(cur, dict) and cur["kind"] == "tb" and t < cur["at"] + cur["ttl"]:
            rate += cur["tpf"] / cur["fill"]
            burst += cur["max"]
    return rate, burst


def max_in_window(times, T):
    times = sorted(times)
    best, j = 0, 0
    for i in range(len(times)):
        while times[i] - times[j] > T:
            j += 1
        best = max(best, i - j + 1)
    return best


def rate_between(e, key, t0, t1):
    return sum(1 for (t, k) in e.admitted if k == key and t0 <= t < t1) / (t1 - t0)


QCFG = """domain: q
quota_buckets:
  - match: {name: web}
    policy: token_bucket:200/1s,burst=40
  - match: {name: api, user: "*"}
    policy: token_bucket:100/1s,burst=20
  - match: {name: shadow}
    policy: token_bucket:10/1s
    shadow_mode: true
  - match: {name: fast}
    policy: token_bucket:10/100ms
  - match: {name: boxed}
    policy: token_bucket:5/1s,block=10s
  - match: {name: closed}
    blanket: deny_all
  - match: {name: open}
    blanket: allow_all
"""
WEB = B(name="web")
R, BURST, TTL = 200.0, 40.0, 2.0  # web's budget; the default TTL (reports < 667 ms apart)
G = TTL / 3  # the division's min_resend: its reporting interval, TTL / 3


def daemon(tmp, *args, config=QCFG):
    return it.Daemon(tmp, "--no-snapshot", *args, config=config)


@test
def sums_stay_within_the_budget_and_admissions_within_the_bound_under_saturation(tmp):
    d = daemon(tmp)
    try:
        envoys = [Envoy(d.grpc) for _ in range(3)]
        fleet = Fleet([], WEB)
        for e in envoys:
            fleet.add(e, 2 * R)  # every Envoy asks twice the whole budget
        t0 = time.monotonic()
        fleet.run(7.0)
        t1 = time.monotonic()
        # The sums of the assignments in force, sampled every 20 ms (an answer in flight on
        # loopback is given 30 ms to land: a decrease sent before an increase may arrive after).
        t = t0 + 0.05
        while t < t1:
            r1, b1 = live_sums(envoys, WEB, t)
            r2, b2 = live_sums(envoys, WEB, t + 0.03)
            assert min(r1, r2) <= R + 1e-6 and min(b1, b2) <= BURST, (t - t0, r1, b1, r2, b2)
            t += 0.02
        adm = [a for e in envoys for (a, k) in e.admitted]
        for T in (0.5, 1.0, 3.0):
            bound = R * T + BURST + BURST * (1 + T / G)
            got = max_in_window(adm, T)
            print("    window %.1fs: %d admitted, R*T+B = %d, bound %d" %
                  (T, got, R * T + BURST, bound))
            assert got <= bound, (T, got, bound)
        # Utilization from three reporting intervals on.
        u = sum(1 for a in adm if a >= t0 + 1.0) / (R * (t1 - t0 - 1.0))
        print("    utilization %.1f%%" % (100 * u))
        # 0.95-0.99 on a quiet machine; the Envoys here are Python threads, which a loaded
        # machine delays (89.7 % seen with both cores busy): the floor catches a division that
        # strands budget (a share never handed out is 1/3 of it), not the machine's pace.
        assert u >= 0.80, u
        for e in envoys:
            assert e.error is None, e.error
            e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def the_ttl_comes_from_the_first_report_with_an_elapsed_and_the_budget_holds_across_the_move(tmp):
    # Envoy's first report of a bucket has time_elapsed 0 (sent as it creates the bucket); its
    # reports every 5 s then show 5 s: the default TTL must become 3 x 5 s, not stay at 2 s.
    d = daemon(tmp)
    try:
        a, b = Envoy(d.grpc), Envoy(d.grpc)
        for e in (a, b):
            e.report([WEB], elapsed=0.0, allowed=1)
        wait_for(lambda: a.current(WEB) and b.current(WEB), what="first assignments")
        assert a.current(WEB)["ttl"] == 2.0 and b.current(WEB)["ttl"] == 2.0
        t0 = time.monotonic()
        b.report([WEB], elapsed=5.0, allowed=1000)  # b moves the bucket to the 15 s division
        wait_for(lambda: b.current(WEB)["ttl"] == 15.0, what="a 15 s TTL")
        # a still enforces its 2 s assignment from the old division: the sums hold.
        ra, ba = a.current(WEB)["tpf"] / a.current(WEB)["fill"], a.current(WEB)["max"]
        rb, bb = b.current(WEB)["tpf"] / b.current(WEB)["fill"], b.current(WEB)["max"]
        print("    across the move: rates %.0f + %.0f <= %d, bursts %d + %d <= %d" %
              (ra, rb, R, ba, bb, BURST))
        assert ra + rb <= R and ba + bb <= BURST, (ra, rb, ba, bb)
        assert time.monotonic() < t0 + 1.5  # a's old assignment was live throughout
        while time.monotonic() < t0 + 6.5:
            for e in (a, b):
                e.report([WEB], elapsed=5.0, allowed=1000)
            time.sleep(0.25)
            t = time.monotonic()
            r, bu = live_sums([a, b], WEB, t)
            assert r <= R + 1e-6 and bu <= BURST, (t - t0, r, bu)
        for e in (a, b):
            assert e.current(WEB)["ttl"] == 15.0, e.current(WEB)
        # Once the old division's assignments ran out (2 s), the whole budget is divided again,
        # each share moving at its member's next answer (G = 5 s in the 15 s division, one or
        # two of them after the move's): by t0 + 10 s, plus what a loaded machine adds, within
        # the assignments' 15 s.
        while True:
            r, bu = live_sums([a, b], WEB, time.monotonic())
            assert r <= R + 1e-6 and bu <= BURST, (r, bu)
            if r >= 0.85 * R or time.monotonic() > t0 + 14:
                break
            for e in (a, b):
                e.report([WEB], elapsed=5.0, allowed=1000)
            time.sleep(0.25)
        print("    after %.1f s: %.0f/s of %d, burst %d of %d" %
              (time.monotonic() - t0, r, R, bu, BURST))
        assert r >= 0.85 * R, r
        a.close()
        b.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def durations_are_sent_in_whole_seconds(tmp):
    # Envoy reads assignment_time_to_live's seconds only and divides tokens_per_fill by
    # fill_interval's whole seconds: 10/100ms is sent as 100 per 1 s, never a 100 ms interval.
    d = daemon(tmp)
    try:
        e = Envoy(d.grpc)
        fast = B(name="fast")
        e.report([fast, WEB], elapsed=1.0, allowed=1000)
        wait_for(lambda: e.current(fast) and e.current(WEB), what="assignments")
        for k in (fast, WEB):
            for (_, kk, dd) in e.log:
                if kk == k:
                    assert dd["ttl"] == int(dd["ttl"]) >= 1 and dd["fill"] == int(dd["fill"]), dd
        f = e.current(fast)
        assert f["kind"] == "tb" and f["fill"] == 1.0 and f["tpf"] <= 100, f
        assert f["tpf"] >= 90, f  # alone, nearly the whole 100/s less the reserve
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()
    cfg = os.path.join(tmp, "half.yaml")
    with open(cfg, "w") as fh:
        fh.write("domain: q\nassignment_ttl: 500ms\n")
    import subprocess
    r = subprocess.run([it.BIN, "--check-config", "--config", cfg], capture_output=True, text=True)
    assert r.returncode != 0 and "whole seconds, at least 1s" in r.stderr + r.stdout, r


@test
def the_penalty_box_closes_only_when_the_fleet_reached_the_budget(tmp):
    d = daemon(tmp)
    try:
        # One Envoy at 3/s (denying one more a second past its share): the fleet is under its
        # 5/s budget, so no box.
        e = Envoy(d.grpc)
        one = B(name="boxed", n="1")
        for _ in range(6):
            e.report([one], elapsed=1.0, allowed=3, denied=1)
            time.sleep(0.15)
        wait_for(lambda: e.current(one), what="an assignment")
        kinds = [dd["kind"] for (_, k, dd) in e.log if k == one]
        assert kinds and all(x == "tb" for x in kinds), kinds
        # Three Envoys at 2 x the budget together (4/s each): the bucket is boxed.
        es = [Envoy(d.grpc) for _ in range(3)]
        fleet = B(name="boxed", n="2")
        for _ in range(6):
            for x in es:
                x.report([fleet], elapsed=1.0, allowed=2, denied=2)
            time.sleep(0.15)
        wait_for(lambda: any((x.current(fleet) or {}).get("kind") == "deny" for x in es),
                 what="the box")
        dd = [x.current(fleet) for x in es if x.current(fleet)["kind"] == "deny"][0]
        assert 1 <= dd["ttl"] <= 10 and dd["ttl"] == int(dd["ttl"]), dd
        for x in es + [e]:
            x.close()
    finally:
        assert d.stop() == 0, d.stderr()


def metric(d, name):
    for line in d.curl("/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no metric " + name)


@test
def shadow_mode_counts_would_be_denials_and_an_empty_bucket_id_is_skipped(tmp):
    d = daemon(tmp)
    try:
        e = Envoy(d.grpc)
        sh = B(name="shadow")  # token_bucket:10/1s, shadow_mode: true
        for _ in range(3):
            e.report([sh], elapsed=1.0, allowed=100)
            time.sleep(0.1)
        wait_for(lambda: e.current(sh), what="an answer")
        assert all(dd["kind"] == "allow" for (_, k, dd) in e.log if k == sh)
        # alone, its would-be share is at most 10 of each second's 100 requests
        wait_for(lambda: metric(d, "ratelimitd_rlqs_usages_total") >= 3, what="3 usages")
        n = metric(d, "ratelimitd_rlqs_shadow_denied_total")
        print("    shadow_denied %d of 300" % n)
        assert 3 * 90 <= n <= 3 * 99, n
        assert metric(d, 'ratelimitd_decisions_total{outcome="shadow_denied"}') == n
        # An empty BucketId beside a good one: skipped and counted, the other answered.
        m = Rep()
        m.bucket_quota_usages.add().num_requests_allowed = 1
        u = m.bucket_quota_usages.add()
        u.bucket_id.bucket["name"] = "web"
        u.time_elapsed.seconds = 1
        e.send(m)
        wait_for(lambda: e.current(WEB), what="the good bucket's answer")
        assert e.error is None, e.error
        assert metric(d, "ratelimitd_rlqs_usages_skipped_total") == 1
        assert metric(d, "ratelimitd_rlqs_streams") == 1
        assert metric(d, "ratelimitd_rlqs_buckets") == 2
        assert metric(d, "ratelimitd_rlqs_actions_total") >= 2
        info = d.cli("INFO")
        assert "rlqs_usages_skipped:1" in info and "rlqs_members:2" in info, info
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def a_light_stream_gets_its_demand_and_a_heavy_one_the_rest(tmp):
    d = daemon(tmp)
    try:
        light, heavy = Envoy(d.grpc), Envoy(d.grpc)
        fleet = Fleet([], WEB)
        fleet.add(light, 0.1 * R)
        fleet.add(heavy, 2 * R)
        t0 = time.monotonic()
        fleet.run(5.0)
        reqs = [ok for (t, k, ok) in light.requests if t >= t0 + 1.0]
        frac = sum(reqs) / len(reqs)
        hr = rate_between(heavy, WEB, t0 + 1.5, t0 + 5.0)
        print("    light admitted %.1f%% of its requests; heavy %.0f/s of %d" % (100 * frac, hr, R))
        # Max-min: from its first measured interval on, the light stream is granted at least
        # its demand (0.1 R), and the heavy one the rest less the reserve.
        for (e, least) in ((light, 0.1 * R), (heavy, 0.75 * R)):
            for (at, k, dd) in e.log:
                if at >= t0 + 1.0:
                    assert dd["kind"] == "tb" and dd["tpf"] / dd["fill"] >= least, (at - t0, dd)
        assert frac >= 0.85, frac  # the rest: the client's lumps of requests past its burst
        assert hr >= 0.75 * R, hr
        light.close()
        heavy.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def a_joiner_gets_a_share_and_a_leavers_share_is_freed_only_after_its_ttl(tmp):
    d = daemon(tmp)
    try:
        a = Envoy(d.grpc)
        fleet = Fleet([], WEB)
        fleet.add(a, 2 * R)
        fleet.run(2.0)
        b = Envoy(d.grpc)
        tj = time.monotonic()
        fleet.add(b, 2 * R)
        fleet.run(3.0)
        ra, rb = rate_between(a, WEB, tj + 1.5, tj + 3.0), rate_between(b, WEB, tj + 1.5, tj + 3.0)
        print("    after the join: %.0f/s and %.0f/s" % (ra, rb))
        assert rb >= 0.3 * R and ra <= 0.7 * R, (ra, rb)
        b_last = max(at + dd["ttl"] for (at, k, dd) in b.log if isinstance(dd, dict))
        fleet.remove(b)
        b.close()  # the stream ends; its Envoy may enforce its last assignment until the TTL
        tl = time.monotonic()
        fleet.run(TTL + 2.5)
        # Until b's last assignment expires, a's token buckets never pass R minus b's share.
        brate = [dd["tpf"] / dd["fill"] for (at, k, dd) in b.log if isinstance(dd, dict)
                 and dd["kind"] == "tb"][-1]
        for (at, k, dd) in a.log:
            if isinstance(dd, dict) and dd["kind"] == "tb" and tl <= at < b_last - 0.03:
                assert dd["tpf"] / dd["fill"] + brate <= R + 1e-6, (at - tl, dd, brate)
        ra2 = rate_between(a, WEB, b_last + 1.0, time.monotonic())
        print("    after the leave and its TTL: %.0f/s" % ra2)
        assert ra2 >= 0.8 * R, ra2
        a.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def a_reload_that_removes_a_rule_abandons_its_buckets(tmp):
    d = daemon(tmp)
    try:
        e = Envoy(d.grpc)
        e.report([WEB], elapsed=0.1, allowed=5)
        wait_for(lambda: (e.current(WEB) or {}).get("kind") == "tb", what="a token bucket")
        # A reload that leaves web's item as it was keeps the bucket and its division.
        with open(d.config_path, "w") as f:
            f.write(QCFG.replace("{name: open}", "{name: open2}"))
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        n = len(e.log)
        e.report([WEB], elapsed=0.1, allowed=5)
        time.sleep(0.3)
        assert all(dd != "abandon" for (_, k, dd) in e.log[n:]), e.log[n:]
        with open(d.config_path, "w") as f:
            f.write(QCFG.replace("  - match: {name: web}\n    policy: token_bucket:200/1s,burst=40\n",
                                 ""))
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        e.report([WEB], elapsed=0.1, allowed=5)
        wait_for(lambda: any(dd == "abandon" for (_, k, dd) in e.log), what="an AbandonAction")
        e.report([WEB], elapsed=0.1, allowed=5)  # subscribes again: quota_default
        wait_for(lambda: (e.current(WEB) or {}).get("kind") == "allow", what="allow_all")
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def blanket_rules_defaults_shadow_mode_and_unknown_domains(tmp):
    d = daemon(tmp)
    try:
        e = Envoy(d.grpc)
        keys = [B(name="closed"), B(name="open"), B(name="nothing"), B(name="shadow")]
        e.report(keys, elapsed=0.1, allowed=100)
        wait_for(lambda: all(e.current(k) for k in keys), what="four assignments")
        assert e.current(keys[0])["kind"] == "deny"
        assert e.current(keys[1])["kind"] == "allow"
        assert e.current(keys[2])["kind"] == "allow"  # quota_default
        assert e.current(keys[3])["kind"] == "allow"  # shadow mode: never enforced
        assert abs(e.current(keys[0])["ttl"] - 2.0) < 1e-9
        n = e.responses
        e.report(keys, elapsed=0.1, allowed=1)  # nothing changed: nothing resent
        time.sleep(0.3)
        assert e.responses == n, "an unchanged blanket was sent again"
        e.close()
        u = Envoy(d.grpc, domain="nobody")
        for _ in range(2):
            u.report([B(a="b")], elapsed=0.1)
        wait_for(lambda: (u.current(B(a="b")) or {}).get("kind") == "allow", what="allow_all")
        u.close()
        time.sleep(0.1)
        assert d.stderr().count("unknown domain 'nobody'") == 1, d.stderr()
    finally:
        assert d.stop() == 0, d.stderr()
    d = daemon(tmp, config="domain: q\nquota_default: deny_all\n")
    try:
        e = Envoy(d.grpc)
        e.report([B(x="y")], elapsed=0.1)
        wait_for(lambda: (e.current(B(x="y")) or {}).get("kind") == "deny", what="deny_all")
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def each_value_of_a_star_key_has_its_own_budget(tmp):
    d = daemon(tmp)
    try:
        e1, e2 = Envoy(d.grpc), Envoy(d.grpc)
        alice, bob = B(name="api", user="alice"), B(name="api", user="bob")
        # Heavy demand everywhere: each bucket's budget is divided among its reporters only.
        # A joiner's first answer is its equal share among the open streams (no cold start):
        # report until bob's is raised at a later answer (G apart), or long past it.
        tb = lambda e, k: e.current(k)["tpf"] / e.current(k)["fill"]
        t_end = time.monotonic() + 8 * G * it.SCALE
        while True:
            e1.report([alice, bob], elapsed=0.1, allowed=100)
            e2.report([alice], elapsed=0.1, allowed=100)
            time.sleep(0.12)
            have = e1.current(bob) and e1.current(alice) and e2.current(alice)
            if (have and tb(e1, bob) >= 80) or time.monotonic() > t_end:
                break
        wait_for(lambda: e1.current(bob) and e1.current(alice) and e2.current(alice),
                 what="assignments")
        print("    bob %.0f/s; alice %.0f/s + %.0f/s" % (tb(e1, bob), tb(e1, alice), tb(e2, alice)))
        assert tb(e1, bob) >= 80  # bob alone: nearly the whole 100/s
        assert tb(e1, alice) + tb(e2, alice) <= 100  # alice's 100/s shared
        e1.close()
        e2.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def streams_need_the_bearer_token_when_the_server_has_a_password(tmp):
    d = daemon(tmp, "--password", "s3cret")
    try:
        e = Envoy(d.grpc)
        e.report([WEB], elapsed=0.1)
        wait_for(lambda: e.error is not None, what="an error")
        assert e.error.code() == grpc.StatusCode.UNAUTHENTICATED, e.error
        e.close()
        e = Envoy(d.grpc, token="s3cret")
        e.report([WEB], elapsed=0.1, allowed=3)
        wait_for(lambda: e.current(WEB) is not None, what="an assignment")
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def status_of(e, timeout=10):
    wait_for(lambda: e.error is not None, timeout, what="the call's end")
    return e.error.code(), e.error.details()


@test
def hostile_streams_are_refused_with_a_status_and_others_are_served(tmp):
    # The thousands of streams below all share one connection (one client): its bucket cap
    # (one_client_filling_its_share_locks_no_other_envoy_out) is raised out of the way.
    d = daemon(tmp, config=QCFG + "server:\n  rlqs_max_buckets_per_client: 65536\n")
    try:
        # The Envoys meant to be served are other clients (connections of their own): the
        # streams dropped below share one, and under load gRPC's client can cancel a stream
        # whose HEADERS it has not sent yet, an RST_STREAM on an idle stream that nghttp2
        # answers, as RFC 9113 says, by closing that connection (GOAWAY PROTOCOL_ERROR).
        ok = Envoy(d.grpc, own_connection=True)  # a well-behaved Envoy served throughout
        silent = Envoy(d.grpc, own_connection=True)  # never reports
        empty = Envoy(d.grpc, own_connection=True)
        empty.send(Rep(domain="q"))  # no buckets: nothing to answer
        odd = Envoy(d.grpc, own_connection=True)  # zero, negative elapsed, counts near 2^64
        odd.report([B(name="web")], elapsed=0.0, allowed=2**64 - 1, denied=2**64 - 1)
        odd.report([B(name="open")], elapsed=-5.0, allowed=2**63)
        wait_for(lambda: odd.current(B(name="web")) and odd.current(B(name="open")),
                 what="answers to odd reports")
        assert odd.error is None
        # 100,000 buckets of a rule on one stream, 2,000 a message: refused past 1,024.
        many = Envoy(d.grpc)
        for i in range(50):
            m = Rep(domain="q" if i == 0 else "")
            for j in range(2000):
                u = m.bucket_quota_usages.add()
                u.bucket_id.bucket["name"] = "api"
                u.bucket_id.bucket["user"] = "%d" % (i * 2000 + j)
                u.time_elapsed.nanos = 100000000
            many.send(m)
        code, det = status_of(many)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "1024 per stream" in det, (code, det)
        # One report too large, and BucketIds past their bounds.
        big = Envoy(d.grpc)
        m = Rep(domain="q")
        for j in range(100000):
            u = m.bucket_quota_usages.add()
            u.bucket_id.bucket["n"] = "%d" % j
        big.send(m)
        assert status_of(big)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
        for pairs in ({"k%d" % i: "v" for i in range(17)}, {"k": "v" * 100000}):
            h = Envoy(d.grpc)
            m = Rep(domain="q")
            u = m.bucket_quota_usages.add()
            u.bucket_id.bucket.update(pairs)
            h.send(m)
            assert status_of(h)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
            h.close()
        bad = Envoy(d.grpc)
        bad.send(Rep())  # no domain in the first report
        assert status_of(bad)[0] == grpc.StatusCode.INVALID_ARGUMENT
        # Thousands of streams opened, reporting and dropped.
        before = rss_kb(d.p.pid)
        n = 300 if SANITIZED else 2000
        for i in range(n):
            e = Envoy(d.grpc)
            e.report([B(name="api", user="u%d-%d" % (i, j)) for j in range(10)], elapsed=0.1,
                     allowed=1)
            if i % 50 == 49:
                wait_for(lambda: e.responses > 0, what="an answer")
            e.call.cancel()
            e.close()
        ok.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: ok.current(WEB) is not None, 30, what="the good Envoy's answer")
        empty.report([WEB], elapsed=0.1)
        wait_for(lambda: empty.current(WEB) is not None, what="an answer after an empty report")
        grown = rss_kb(d.p.pid) - before
        print("    RSS grew %d KiB over %d streams x 10 buckets" % (grown, n))
        assert grown < 200 * 1024, grown
        assert d.p.poll() is None
        for e in (ok, silent, empty, odd, many, big, bad):
            e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def the_total_bucket_cap_refuses_with_a_status(tmp):
    # One client (the streams share a connection) with its bucket cap as large as the table.
    d = daemon(tmp, config="domain: q\nquota_buckets:\n  - match: {n: \"*\"}\n"
                          "    policy: token_bucket:1000/1s\n"
                          "server:\n  rlqs_max_buckets_per_client: 65536\n")
    try:
        es = []
        for i in range(70):  # 70 x 1,000 BucketIds > 65,536 in all
            e = Envoy(d.grpc)
            m = Rep(domain="q")
            for j in range(1000):
                u = m.bucket_quota_usages.add()
                u.bucket_id.bucket["n"] = "%d" % (i * 1000 + j)
                u.time_elapsed.nanos = 100000000
            e.send(m)
            wait_for(lambda: e.responses > 0 or e.error is not None, 20, what="an answer")
            es.append(e)
            if e.responses == 0 or len(es) == 66:
                break
        # The 66th stream passes the cap in the middle of its report: the answers to its
        # first 536 buckets, then RESOURCE_EXHAUSTED; the 65 before it are served whole.
        refused = status_of(es[65])
        assert refused[0] == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
        assert "65536 in all" in refused[1], refused
        assert es[65].responses == 1
        assert all(e.error is None for e in es[:65])
        for e in es:
            e.close()
    finally:
        assert d.stop() == 0, d.stderr()


def flood_message(key, first, n):
    """A first report of n BucketIds {key: first}, {key: first + 1}, ..."""
    m = Rep(domain="q")
    for j in range(n):
        u = m.bucket_quota_usages.add()
        u.bucket_id.bucket[key] = "%d" % (first + j)
        u.time_elapsed.nanos = 100000000
    return m


@test
def one_client_filling_its_share_locks_no_other_envoy_out(tmp):
    # Issue 42: one client's 65 streams x 1,024 BucketIds that match no rule filled the
    # 65,536-bucket table, and every other Envoy's stream then ended RESOURCE_EXHAUSTED (the
    # shipped example's Envoy then admits everything).  Such BucketIds now take no place in
    # the table, and a client's buckets of a rule stop at its share (4,096 by default).
    cfg = QCFG + '  - match: {flood: "*"}\n    policy: token_bucket:1000/1s\n'
    d = daemon(tmp, config=cfg)
    try:
        junk = []
        for i in range(65):  # one client: gRPC shares one connection among these channels
            e = Envoy(d.grpc)
            e.send(flood_message("junk", i * 1024, 1024))
            junk.append(e)
        for e in junk:
            wait_for(lambda: e.responses > 0 or e.error is not None, 60, what="an answer")
        honest = Envoy(d.grpc, own_connection=True)
        honest.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: honest.current(WEB) is not None or honest.error is not None, 30,
                 what="the other Envoy's answer")
        assert honest.error is None, honest.error
        assert honest.current(WEB)["kind"] == "tb", honest.current(WEB)
        errors = [e.error for e in junk if e.error is not None]
        assert not errors, (len(errors), errors[0])  # answered quota_default (allow-all)
        assert all(e.current(B(junk="0")) is not None for e in junk[:1])
        assert metric(d, "ratelimitd_rlqs_buckets") == 1
        # The same client floods new buckets of a rule: 20 streams x 1,000 BucketIds.  Past
        # its 4,096 they are not kept and get no answer; its streams go on.
        flood = []
        for i in range(20):
            e = Envoy(d.grpc)
            e.send(flood_message("flood", i * 1000, 1000))
            flood.append(e)
        wait_for(lambda: metric(d, "ratelimitd_rlqs_usages_over_cap_total") >= 20000 - 4096, 60,
                 what="the flood past its share")
        assert metric(d, "ratelimitd_rlqs_usages_over_cap_total") == 20000 - 4096
        assert metric(d, "ratelimitd_rlqs_buckets") == 4096 + 1
        other = Envoy(d.grpc, own_connection=True)  # another client: a bucket of the same rule
        mine = B(flood="mine")
        other.report([mine], elapsed=0.1, allowed=1)
        wait_for(lambda: other.current(mine) is not None or other.error is not None, 30,
                 what="another client's answer")
        assert other.current(mine)["kind"] == "tb", other.current(mine)
        n = honest.responses
        honest.report([WEB], elapsed=0.1, allowed=1)
        time.sleep(0.8)  # a third of the TTL: the assignment is renewed
        honest.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: honest.responses > n, 30, what="the other Envoy served still")
        assert all(e.error is None for e in junk + flood + [honest, other])
        for e in junk + flood + [honest, other]:
            e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def a_clients_streams_past_its_share_are_refused_and_others_are_served(tmp):
    d = daemon(tmp, config=QCFG + "server:\n  rlqs_max_streams_per_client: 2\n")
    try:
        mine = [Envoy(d.grpc) for _ in range(2)]  # one client: one connection
        for e in mine:
            e.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: all(e.current(WEB) for e in mine), what="two assignments")
        third = Envoy(d.grpc)
        third.report([WEB], elapsed=0.1, allowed=1)
        code, det = status_of(third)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "quota streams" in det, (code, det)
        other = Envoy(d.grpc, own_connection=True)
        other.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: other.current(WEB) is not None or other.error is not None,
                 what="another client's answer")
        assert other.error is None and all(e.error is None for e in mine)
        mine[0].close()  # a stream ends: the client may open another
        wait_for(lambda: metric(d, "ratelimitd_rlqs_streams") == 2, what="the stream's end")
        again = Envoy(d.grpc)
        again.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: again.current(WEB) is not None or again.error is not None,
                 what="an answer")
        assert again.error is None, again.error
        for e in mine[1:] + [third, other, again]:
            e.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def tenants_reporting_one_bucket_id_each_get_the_whole_budget(tmp):
    # Issue 42: the quota service ignored tenants: two tenants' Envoys reporting the same
    # BucketId shared one bucket (95/s each of 200/s).  A tenant's buckets are now its own.
    cfg = QCFG + ("server:\n  password: admin-pw\ntenants:\n  - {name: acme, password: acme-pw}\n"
                  "  - {name: umbrella, password: umbrella-pw}\n")
    d = daemon(tmp, config=cfg)
    try:
        def assigned(tokens):
            es = [Envoy(d.grpc, token=t, own_connection=True) for t in tokens]

            def rates():
                cur = [e.current(WEB) or {} for e in es]
                return [c["tpf"] / c["fill"] if c.get("kind") == "tb" else 0.0 for c in cur]
            # Heavy demand (1,000/s each) until the shares settle: a joiner's first answer is
            # its equal share among the streams open on the division (no cold start), raised
            # at its next answer, G later.
            t_end = time.monotonic() + 8 * G * it.SCALE
            while True:
                for e in es:
                    e.report([WEB], elapsed=0.1, allowed=100)
                time.sleep(0.12)
                got = rates()
                if min(got) >= 0.75 * R or time.monotonic() > t_end:
                    break
            wait_for(lambda: all((e.current(WEB) or {}).get("kind") == "tb" for e in es),
                     what="token buckets")
            rates = rates()
            for e in es:
                e.close()
            return rates
        ra, ru = assigned(["acme-pw", "umbrella-pw"])
        print("    tenants: %.0f/s and %.0f/s of %d" % (ra, ru, R))
        assert ra >= 0.75 * R and ru >= 0.75 * R, (ra, ru)  # each alone in its own bucket
        # Without tenants, unchanged: two Envoys of the admin share the bucket (live sums).
        x, y = assigned(["admin-pw", "admin-pw"])
        print("    admin: %.0f/s + %.0f/s of %d" % (x, y, R))
        assert x + y <= R, (x, y)
    finally:
        assert d.stop() == 0, d.stderr()


@test
def a_reload_that_removes_a_tenant_ends_its_streams(tmp):
    tenants = ("server:\n  password: admin-pw\ntenants:\n  - {name: acme, password: acme-pw}\n"
               "  - {name: umbrella, password: umbrella-pw}\n")
    d = daemon(tmp, config=QCFG + tenants)
    try:
        acme = Envoy(d.grpc, token="acme-pw", own_connection=True)
        umb = Envoy(d.grpc, token="umbrella-pw", own_connection=True)
        for e in (acme, umb):
            e.report([WEB], elapsed=0.1, allowed=1)
        wait_for(lambda: acme.current(WEB) and umb.current(WEB), what="assignments")
        with open(d.config_path, "w") as f:
            f.write(QCFG + tenants.replace("  - {name: acme, password: acme-pw}\n", ""))
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.8)  # the reload, and a third of the TTL: umbrella's assignment is renewed
        n = umb.responses
        for e in (acme, umb):
            e.report([WEB], elapsed=0.1, allowed=1)
        code, det = status_of(acme)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "reload" in det, (code, det)
        wait_for(lambda: umb.responses > n, what="the other tenant served still")
        assert umb.error is None, umb.error
        acme.close()
        umb.close()
    finally:
        assert d.stop() == 0, d.stderr()


@test
def the_envoy_example_buckets_get_their_assignments(tmp):
    # examples/envoy/envoy_rlqs.yaml's bucket_id_builders, answered under
    # examples/envoy/ratelimit-quota.yaml.
    import yaml
    ex = os.path.join(ROOT, "examples/envoy")
    env = yaml.safe_load(open(os.path.join(ex, "envoy_rlqs.yaml")))
    hcm = env["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    f = [x for x in hcm["typed_config"]["http_filters"]
         if x["name"] == "envoy.filters.http.rate_limit_quota"][0]["typed_config"]
    m = f["bucket_matchers"]
    settings = [x["on_match"]["action"]["typed_config"] for x in m["matcher_list"]["matchers"]]
    settings.append(m["on_no_match"]["action"]["typed_config"])
    buckets = []
    for st in settings:
        b = {k: v.get("string_value", "key-%d" % len(buckets))
             for k, v in st["bucket_id_builder"]["bucket_id_builder"].items()}
        buckets.append(B(**b))
    d = daemon(tmp, config=open(os.path.join(ex, "ratelimit-quota.yaml")).read())
    try:
        e = Envoy(d.grpc, domain=f["domain"])
        e.report(buckets + [B(name="api", user="blocked-key")], elapsed=1.0, allowed=1)
        wait_for(lambda: all(e.current(b) for b in buckets), what="answers")
        kinds = [e.current(b)["kind"] for b in buckets]
        assert kinds == ["tb", "tb", "allow"], kinds
        assert e.current(B(name="api", user="blocked-key"))["kind"] == "deny"
        assert e.current(buckets[0])["ttl"] == 3.0  # 3 x the 1 s reporting interval
        e.close()
    finally:
        assert d.stop() == 0, d.stderr()


def main():
    it.BIN = os.path.abspath(sys.argv[1])
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltq-")


if __name__ == "__main__":
    sys.exit(main())
