#!/usr/bin/env python3
"""Usage budgets for LLM traffic through the real daemon: RL.MRESERVE / RL.MSETTLE over RESP
(and /v1/mreserve, /v1/msettle over HTTP when the daemon has them).  One reservation over a
user's tokens, an organisation's money budget and a model's output tokens; typed costs; bad
input refused with nothing charged; 64 concurrent streams with random output lengths, checked
against a reference ledger kept by the test: reserving the maximum never admits more than the
budget, reserving an estimate overshoots by at most the in-flight underestimates, and every
limit settles exactly once.  With --redis (under tests/redis/redis-servers.sh run standalone) the same through the Redis
mode: the decisions through one daemon, and the 64 streams through two daemons on one Redis,
half of the streams on each.
Usage: llm_budget.py PATH_TO_RATELIMITD [--redis] [TEST_NAME...]."""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402  (the Daemon class, resp())

REDIS = "--redis" in sys.argv[2:]
ARGS = [a for a in sys.argv[2:] if a != "--redis"]
TESTS, REDIS_TESTS = [], []
# Windows of 1000 days: the next boundary is hundreds of days away, so no run straddles one.
USER = "fixed_window:%d/1000d"
ORG = "fixed_window:%d/1000d"
MODEL = "fixed_window:%d/1000d"


def test(fn):
    TESTS.append(fn)
    return fn


def both(fn):
    """A test run locally and, with --redis, in the Redis mode too."""
    TESTS.append(fn)
    REDIS_TESTS.append(fn)
    return fn


def daemons(tmp, n=1, *args, config=""):
    """n daemons: local ones, or with --redis ones on the one Redis of redis-servers.sh."""
    if not REDIS:
        return [it.Daemon(tmp, *args, **({"config": config} if config else {}))]
    server = os.environ["RLT_REDIS_SERVERS"].split(",")[0]
    subprocess.run(["redis-cli", "-p", server.rsplit(":", 1)[1], "FLUSHALL"], check=True,
                   stdout=subprocess.DEVNULL, timeout=20)  # each test from an empty Redis
    cfg = "redis:\n  address: \"%s\"\n  timeout: 2s\n" % os.environ["RLT_REDIS_SERVERS"] + config
    out = []
    for i in range(n):
        d = os.path.join(tmp, "d%d" % i)
        os.makedirs(d, exist_ok=True)
        out.append(it.Daemon(d, "--no-snapshot", *args, config=cfg))
    return out


def text(v):
    """A reply of it.Replies as text: errors as "ERR ...", bulk and simple strings as str."""
    if isinstance(v, list):
        return [text(x) for x in v]
    if isinstance(v, bytes):
        v = v.decode()
        return v[1:] if v[:1] in ("-", "+") else v
    return v


class Conn:
    """One RESP connection: a command, its parsed reply (errors as str starting with ERR)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.r = it.Replies(self.s)

    def __call__(self, *args):
        self.s.sendall(it.resp(*args))
        return text(self.r.one())

    def close(self):
        self.s.close()


def remaining(c, key, pol):
    return c("RL.PEEK", key, pol)[2]


@both
def one_reservation_charges_three_limits_each_by_its_weights_and_settles_once(tmp):
    d, = daemons(tmp)
    c = Conn(d.port)
    try:
        u, o, m = USER % 10000, ORG % 100000, MODEL % 3000
        lim = ["user:1", u, "in+out", "org:a", o, "in*3+out*15+cached*1", "model:x", m, "out"]
        r = c("RL.MRESERVE", "in=1000,out=2000", *lim)
        assert r[0] == 1 and r[6] == -1 and len(r[5]) == 16, r
        assert [x[1] for x in r[7]] == [7000, 67000, 1000], r
        # A second would overrun the model's output tokens: refused, nothing charged.
        r2 = c("RL.MRESERVE", "in=1000,out=2000", *lim)
        assert r2[0] == 0 and r2[5] is None and r2[6] == 2, r2
        assert [x[1] for x in r2[7]] == [7000, 67000, 1000], r2  # as they stand
        assert remaining(c, "user:1", u) == 7000 and remaining(c, "org:a", o) == 67000
        keys = ["user:1", u, "org:a", o, "model:x", m]
        s = c("RL.MSETTLE", r[5], "in=1000,out=300,cached=200", *keys)
        assert [x[1] for x in s[5]] == [8700, 100000 - 7700, 2700], s
        again = c("RL.MSETTLE", r[5], "in=1000,out=300", *keys)
        assert again.startswith("ERR unknown reservation"), again
        assert remaining(c, "model:x", m) == 2700
    finally:
        c.close()
        d.stop()


@both
def bad_input_is_refused_with_a_clear_error_and_nothing_charged(tmp):
    d, = daemons(tmp)
    c = Conn(d.port)
    try:
        u = USER % 1000
        r = c("RL.MRESERVE", "in=10,out=20", "k", u, "in+out")
        rid = r[5]
        cases = [
            (("RL.MSETTLE", rid, "in=10,tools=1", "k", u), "ERR usage names a count"),
            (("RL.MSETTLE", rid, "in=-1", "k", u), "ERR usage must be named counts"),
            (("RL.MSETTLE", rid, "in=99999999999999", "k", u), "ERR usage count out of range"),
            (("RL.MSETTLE", rid, "in=1", "other", u), "ERR unknown reservation"),
            (("RL.MSETTLE", "zz", "in=1", "k", u), "ERR reservation must be"),
            (("RL.MSETTLE", rid, "in=1", "k", u, "LATER"), "ERR syntax"),
            (("RL.MRESERVE", "in=1", "k", u, "in*"), "ERR limit 1: cost must be a weighting"),
            (("RL.MRESERVE", "in=1", "k", "leaky_bucket:1/s", "in"), "ERR a policy cannot"),
            (("RL.MRESERVE", "in=1099511627775,out=1099511627775", "k", u,
              "in*1099511627775+out*1099511627775"), "ERR cost out of range"),
            (("RL.MRESERVE", "in=1", "k", u), "ERR syntax"),
        ]
        for args, want in cases:
            got = c(*args)
            assert isinstance(got, str) and got.startswith(want), (args, got)
        many = []
        for i in range(17):
            many += ["k%d" % i, u, "in"]
        assert c("RL.MRESERVE", "in=1", *many).startswith("ERR at most 16 limits")
        assert remaining(c, "k", u) == 970  # only the reservation's estimate
        s = c("RL.MSETTLE", rid, "in=10,out=5", "k", u)
        assert s[5][0][1] == 985, s
    finally:
        c.close()
        d.stop()


@both
def partial_settles_charge_chunks_and_the_final_one_releases_the_rest(tmp):
    d, = daemons(tmp)
    c = Conn(d.port)
    try:
        m = MODEL % 1000
        r = c("RL.MRESERVE", "in=0,out=400", "m", m, "out")
        assert r.startswith("ERR a policy cannot settle (leaky bucket, concurrency), or the "
                            "estimate names a count no limit weighs"), r  # no limit weighs in
        r = c("RL.MRESERVE", "out=400", "m", m, "out")
        rid = r[5]
        s = c("RL.MSETTLE", rid, "out=100", "m", m, "PARTIAL")
        assert s[5][0][1] == 600 and s[5][0][3] == 0, s  # within the reservation
        s = c("RL.MSETTLE", rid, "out=350", "m", m, "PARTIAL")  # 450 of 400: 50 over
        assert s[5][0][1] == 550 and s[5][0][3] == 50, s
        s = c("RL.MSETTLE", rid, "out=0", "m", m)
        assert s[5][0][1] == 550, s
    finally:
        c.close()
        d.stop()


def redis_test(fn):
    """A test of the Redis mode alone (run with --redis)."""
    REDIS_TESTS.append(fn)
    return fn


@redis_test
def without_redis_a_reserve_takes_the_fail_mode_and_a_settle_is_an_error(tmp):
    # A closed port: every call fails at once.  Closed by default, open when configured.
    cfg = ("redis:\n  address: \"127.0.0.1:1\"\n  timeout: 200ms\n"
           "policies:\n  toks: fixed_window:1000/1000d\n"
           "  open: {policy: fixed_window:1000/1000d, fail: open}\n")
    d = it.Daemon(tmp, "--no-snapshot", config=cfg)
    c = Conn(d.port)
    try:
        r = c("RL.MRESERVE", "in=10,out=20", "u", "toks", "in+out", "m", "open", "out")
        assert r[0] == 0 and r[5] is None, r  # closed: denied, no reservation
        r = c("RL.MRESERVE", "in=10,out=20", "u", "open", "in+out", "m", "open", "out")
        assert r[0] == 1 and r[5] is None, r  # open: allowed, nothing to settle
        s = c("RL.MSETTLE", "00000000000000aa", "out=1", "u", "toks")
        assert s.startswith("ERR Redis could not answer"), s
        code, _, b = post(d, "/v1/msettle", {"reservation": "00000000000000aa", "usage": "out=1",
                                             "limits": [{"key": "u", "policy": "toks"}]})
        assert code == 503 and "Redis could not answer" in b["error"], (code, b)
    finally:
        c.close()
        d.stop()


def post(d, path, obj):
    r = d.curl(path, "-X", "POST", "-H", "Content-Type: application/json", "-d", json.dumps(obj))
    head, _, body = r.partition("\n\n")
    return int(head.split(" ", 2)[1]), head, (json.loads(body) if body.startswith("{") else body)


@both
def http_mreserve_and_msettle_answer_json_with_a_ratelimit_field_per_limit(tmp):
    d, = daemons(tmp, config="policies:\n  user-tokens: fixed_window:10000/1d\n"
                               "  org-usd: fixed_window:1000000/1mo,tz=America/New_York\n")
    try:
        lim = [{"key": "user:1", "policy": "user-tokens", "cost": "in+cached+out"},
               {"key": "org:a", "policy": "org-usd", "cost": "in*3+out*15+cached*1"}]
        code, head, b = post(d, "/v1/mreserve", {"estimate": {"in": 1000, "out": 2000},
                                                 "limits": lim, "timeout_ms": 60000})
        assert code == 200 and b["allowed"] and len(b["reservation"]) == 16, (code, b)
        assert [x["remaining"] for x in b["limits"]] == [7000, 1000000 - 33000], b
        assert head.count("RateLimit-Policy:") == 2 and '"org-usd"' in head, head
        month = b["limits"][1]["reset_after_ms"]
        assert 0 < month <= 31 * 86400 * 1000 and month >= b["limits"][0]["reset_after_ms"], b
        keys = [{"key": x["key"], "policy": x["policy"]} for x in lim]
        code, _, s = post(d, "/v1/msettle", {"reservation": b["reservation"], "partial": True,
                                             "usage": {"in": 800, "cached": 200, "out": 100},
                                             "limits": keys})
        assert code == 200 and s["settled"] and [x["charged"] for x in s["limits"]] == [0, 0], s
        code, _, s = post(d, "/v1/msettle", {"reservation": b["reservation"],
                                             "usage": "out=50", "limits": keys})
        assert [x["remaining"] for x in s["limits"]] == [10000 - 1150,
                                                        1000000 - (2400 + 2250 + 200)], s
        code, _, s = post(d, "/v1/msettle", {"reservation": b["reservation"],
                                             "usage": "out=50", "limits": keys})
        assert code == 404 and "unknown reservation" in s["error"], (code, s)
        code, _, b2 = post(d, "/v1/mreserve", {"estimate": {"in": 9000, "out": 2000},
                                               "limits": lim})
        assert code == 429 and b2["reservation"] is None and b2["refused"] == 0, (code, b2)
        assert [x["remaining"] for x in b2["limits"]] == [8850, 1000000 - 4850], b2
        code, _, e = post(d, "/v1/mreserve", {"estimate": {"in": -1}, "limits": lim})
        assert code == 400 and "estimate" in e["error"], (code, e)
        code, _, e = post(d, "/v1/mreserve", {"estimate": {"in": 1}, "limits": []})
        assert code == 400 and "POST /v1/mreserve takes" in e["error"], (code, e)
        assert d.curl("/v1/mreserve").split(" ", 2)[1] == "405"
    finally:
        d.stop()


def streams(ports, pols, reserve_out, n_streams=64, rounds=12, seed=1):
    """n_streams threads, each its own connection, each stream: reserve (in, reserve_out(max)),
    settle chunks of its random real output with PARTIAL, then the final settle.  Returns the
    ledger (real costs per limit key), the intervals with their underestimates, and errors."""
    lock = threading.Lock()
    ledger = {}
    intervals = []
    errors = []

    def run(t):
        rnd = random.Random(seed * 1000 + t)
        c = Conn(ports[t % len(ports)])  # two daemons on one Redis: half the streams on each
        user = "user:%d" % (t % 8)
        lim = [user, pols[0], "in+out", "org", pols[1], "in*3+out*15", "model", pols[2], "out"]
        keys = [user, pols[0], "org", pols[1], "model", pols[2]]
        try:
            for _ in range(rounds):
                tin, max_out = rnd.randint(1, 200), rnd.randint(1, 500)
                out = rnd.randint(0, max_out)
                est_out = reserve_out(max_out)
                start = time.monotonic()
                r = c("RL.MRESERVE", "in=%d,out=%d" % (tin, est_out), *lim)
                if isinstance(r, str):
                    errors.append(r)
                    return
                if r[0] != 1:
                    continue
                sent, first = 0, True
                while True:
                    chunk = rnd.randint(0, 64)
                    last = sent + chunk >= out
                    if last:
                        chunk = out - sent
                    sent += chunk
                    usage = ("in=%d," % tin if first else "") + "out=%d" % chunk
                    args = ["RL.MSETTLE", r[5], usage] + keys + ([] if last else ["PARTIAL"])
                    s = c(*args)
                    if isinstance(s, str):
                        errors.append(s)
                        return
                    first = False
                    if last:
                        break
                end = time.monotonic()
                under = [max(0, tin + out - (tin + est_out)),
                         max(0, 15 * (out - est_out)), max(0, out - est_out)]
                with lock:
                    for k, v in ((user, tin + out), ("org", 3 * tin + 15 * out),
                                 ("model", out)):
                        ledger[k] = ledger.get(k, 0) + v
                    intervals.append((start, end, under, user))
        finally:
            c.close()

    th = [threading.Thread(target=run, args=(t,)) for t in range(n_streams)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    return ledger, intervals, errors


def max_inflight(intervals, idx, user=None):
    """The largest sum, over any instant, of the underestimates of streams open then."""
    ev = []
    for s, e, under, u in intervals:
        if user is None or u == user:
            ev.append((s, 1, under[idx]))
            ev.append((e, -1, under[idx]))
    ev.sort(key=lambda x: (x[0], -x[1]))
    cur = best = 0
    for _, kind, v in ev:
        cur += v if kind == 1 else -v
        best = max(best, cur)
    return best


def check_ledger(c, pols, budgets, ledger):
    for k, v in ledger.items():
        i = 0 if k.startswith("user:") else 1 if k == "org" else 2
        left = remaining(c, k, pols[i])
        assert left == max(0, budgets[i] - v), (k, left, budgets[i], v)


@both
def sixty_four_streams_reserving_the_maximum_never_pass_any_budget(tmp):
    ds = daemons(tmp, 2 if REDIS else 1, "--threads", "2")
    try:
        budgets = [6000, 300000, 20000]
        pols = [USER % budgets[0], ORG % budgets[1], MODEL % budgets[2]]
        ledger, intervals, errors = streams([d.port for d in ds], pols, lambda mx: mx)
        assert not errors, errors[:3]
        for k, v in ledger.items():
            b = budgets[0] if k.startswith("user:") else budgets[1] if k == "org" else budgets[2]
            assert v <= b, (k, v, b)
        assert ledger["model"] > budgets[2] // 2, ledger  # the budgets were what bound it
        c = Conn(ds[-1].port)
        check_ledger(c, pols, budgets, ledger)  # every limit settled exactly once
        c.close()
    finally:
        for d in ds:
            d.stop()


@both
def sixty_four_streams_reserving_an_estimate_overshoot_at_most_the_inflight_underestimates(tmp):
    ds = daemons(tmp, 2 if REDIS else 1, "--threads", "2")
    try:
        budgets = [6000, 300000, 20000]
        pols = [USER % budgets[0], ORG % budgets[1], MODEL % budgets[2]]
        ledger, intervals, errors = streams([d.port for d in ds], pols, lambda mx: 100, seed=2)
        assert not errors, errors[:3]
        over_model = ledger["model"] - budgets[2]
        assert over_model <= max_inflight(intervals, 2), (over_model, max_inflight(intervals, 2))
        over_org = ledger["org"] - budgets[1]
        assert over_org <= max_inflight(intervals, 1), over_org
        for u in range(8):
            k = "user:%d" % u
            assert ledger.get(k, 0) - budgets[0] <= max_inflight(intervals, 0, k), k
        # An estimate under the real output does overshoot the budget that binds.
        users = max(ledger.get("user:%d" % u, 0) for u in range(8)) - budgets[0]
        assert max(over_model, over_org, users) > 0, ledger
        c = Conn(ds[-1].port)
        check_ledger(c, pols, budgets, ledger)
        c.close()
    finally:
        for d in ds:
            d.stop()


def main():
    if REDIS and not os.environ.get("RLT_REDIS_SERVERS"):
        print("FAIL llm_budget: --redis runs under tests/redis/redis-servers.sh")
        return 1
    return it.run_tests(REDIS_TESTS if REDIS else TESTS, ARGS, prefix="rltd-llm-")


if __name__ == "__main__":
    sys.exit(main())
