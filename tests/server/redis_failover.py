#!/usr/bin/env python3
"""ratelimitd through Redis's own failures, end to end: two daemons following a Cluster
failover (a killed master's replica promoted; the other masters' keys exact throughout) and a
Sentinel failover (the sentinels promote the replica of a killed master; the daemons decide there again
within about one breaker interval of the switch, without a restart), and a daemon started while
Redis is unreachable (it serves its fail mode at once, no crash loop, then decides in Redis
once Redis appears).

Runs under tests/redis/redis-servers.sh (which starts the servers and always stops them):

    redis-servers.sh run sentinel -- redis_failover.py PATH_TO_RATELIMITD sentinel
    redis-servers.sh run cluster6 -- redis_failover.py PATH_TO_RATELIMITD cluster6
    redis-servers.sh run standalone -- redis_failover.py PATH_TO_RATELIMITD standalone

Prints "ok NAME" / "FAIL NAME" per test, the measured windows, and "N passed, N failed"."""
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_integration as ri  # noqa: E402  (reads BIN and KIND from sys.argv)

KIND = ri.KIND
TESTS = []


def test(kind):
    def deco(fn):
        if kind == KIND:
            TESTS.append(fn)
        return fn
    return deco


def port_of(i):
    with open(os.path.join(ri.BASE, "s%d" % i, "port")) as f:
        return int(f.read())


def pid_of(i):
    with open(os.path.join(ri.BASE, "s%d" % i, "pid")) as f:
        return int(f.read())


def sentinel_master_port():
    out = ri.redis_cli(2, "SENTINEL", "get-master-addr-by-name", "mymaster").split()
    return int(out[1]) if len(out) == 2 else -1


@test("sentinel")
def two_daemons_follow_a_sentinel_failover_without_restart(tmp):
    cfg = ("policies:\n  api: {policy: fixed_window:100000000/1h}\n"
           "redis:\n  sentinel: \"%s\"\n  master_name: mymaster\n  timeout: 300ms\n"
           "  breaker_failures: 2\n  backoff_min: 100ms\n  backoff_max: 400ms\n"
           % os.environ["RLT_REDIS_SENTINELS"])
    with ri.Fleet(tmp, 2, config=cfg, args=["--threads", "1"]) as ds:
        keys = ["k%d" % i for i in range(8)]
        for d in ds:
            for k in keys:
                r = d.c.ok("RL.CHECK", k, "api")
                assert r[0] == 1, r
            i = d.info()
            assert i["redis_sentinel_master"] == "mymaster", i
            assert i["redis_node0"].startswith("addr=127.0.0.1:%d," % port_of(0)), i
        os.kill(pid_of(0), signal.SIGKILL)
        t_kill = time.monotonic()
        t_switch = None
        back = [None, None]
        n = 0
        while None in back:
            now = time.monotonic()
            assert now - t_kill < 30, "the daemons never decided in the new master"
            if t_switch is None and n % 10 == 0 and sentinel_master_port() == port_of(1):
                t_switch = now
            for j, d in enumerate(ds):
                before = int(d.info()["redis_decisions"])
                rs = [d.c.ok("RL.CHECK", k, "api") for k in keys]
                # fail-closed meanwhile: denied, never an error
                if back[j] is None and int(d.info()["redis_decisions"]) >= before + len(keys):
                    back[j] = time.monotonic()
                    assert all(r[0] == 1 for r in rs), rs
            n += 1
            time.sleep(0.01)
        t_all = max(back)
        if t_switch is None:
            t_switch = t_all
        for d in ds:
            i = d.info()
            assert int(i["redis_master_switches"]) >= 1, i
            assert i["redis_node0"].startswith("addr=127.0.0.1:%d," % port_of(1)), i
            assert int(i["redis_fail_closed_denied"]) >= 1, i
            _, metrics = d.http_get("/metrics")  # the same counters for a scraper
            m = re.search(r"ratelimitd_redis_master_switches_total (\d+)", metrics)
            assert m and int(m.group(1)) >= 1, metrics
            m = re.search(r"ratelimitd_redis_topology_reads_total (\d+)", metrics)
            assert m and int(m.group(1)) >= 1, metrics
            r = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
        print("  sentinel failover through 2 daemons: sentinels switched %.0f ms after the "
              "kill; both daemons decided in the new master %.0f ms after the kill (%.0f ms "
              "after the switch)" % ((t_switch - t_kill) * 1000, (t_all - t_kill) * 1000,
                                     (t_all - t_switch) * 1000))
        # One breaker interval (backoff_max 400 ms) plus the polling here and a loaded machine.
        assert t_all - t_switch <= 0.4 + 1.5, (t_all - t_switch)


@test("cluster6")  # (runs before the failover below: TESTS keep this order)
def two_daemons_stay_exact_while_redis_cli_reshards_under_their_load(tmp):
    n_limit = 1000000
    cfg = ("policies:\n  api: {policy: fixed_window:%d/1h}\n"
           "redis:\n  address: \"%s\"\n  cluster: true\n  timeout: 500ms\n" % (n_limit, ri.SERVERS))
    ids = [ri.redis_cli(i, "CLUSTER", "MYID").strip() for i in (1, 2)]
    lo = min(l for l, h, node, *_ in cluster_slots(1) if node[1] == port_of(1))
    keys, moving = [], 0
    for c in range(100000):  # half the keys in the 200 slots that move (s1's lowest)
        k = "rs%d" % c
        slot = int(ri.redis_cli(1, "CLUSTER", "KEYSLOT", k).strip())
        inside = lo <= slot < lo + 200
        if inside and moving < 12 or not inside and len(keys) - moving < 12:
            keys.append(k)
            moving += inside
        if len(keys) == 24:
            break
    used = {k: 0 for k in keys}
    with ri.Fleet(tmp, 2, config=cfg, args=["--threads", "1"]) as ds:
        p = subprocess.Popen(["redis-cli", "--cluster", "reshard", "127.0.0.1:%d" % port_of(0),
                              "--cluster-from", ids[0], "--cluster-to", ids[1],
                              "--cluster-slots", "200", "--cluster-yes"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rounds = after = 0
        t0 = time.monotonic()
        while p.poll() is None or after < 20:
            assert time.monotonic() - t0 < 60, "the reshard did not end"
            after += p.poll() is not None
            for d in ds:
                for k in keys:
                    r = d.c.ok("RL.CHECK", k, "api")
                    assert r[0] == 1 and r[2] == n_limit - used[k] - 1, (k, r, used[k])
                    used[k] += 1
            rounds += 1
        assert p.returncode == 0
        slots2 = [(l, h) for l, h, node, *_ in cluster_slots(2) if node[1] == port_of(2)]
        moved = 0
        for k in keys:
            slot = int(ri.redis_cli(2, "CLUSTER", "KEYSLOT", k).strip())
            if lo <= slot < lo + 200 and any(l <= slot <= h for l, h in slots2):
                moved += 1
        redirects = sum(int(d.info()["redis_redirects"]) for d in ds)
        assert redirects > 0
        print("  reshard of 200 slots under 2 daemons' load: %d rounds of %d checks, %d keys "
              "moved, every reply exact, %d redirects" % (rounds, 2 * len(keys), moved, redirects))
        assert moved == moving == 12, (moved, moving)


def cluster_slots(i):
    import json
    out = subprocess.run(["redis-cli", "-p", str(port_of(i)), "--json", "CLUSTER", "SLOTS"],
                         capture_output=True, text=True, timeout=5).stdout
    return json.loads(out)


@test("cluster6")
def two_daemons_follow_a_cluster_failover_and_the_other_keys_stay_exact(tmp):
    n_limit = 1000000
    cfg = ("policies:\n  api: {policy: fixed_window:%d/1h}\n"
           "redis:\n  address: \"%s\"\n  cluster: true\n  timeout: 500ms\n"
           "  breaker_failures: 2\n  backoff_min: 100ms\n  backoff_max: 400ms\n"
           % (n_limit, ri.SERVERS))
    keys = ["u%d" % i for i in range(48)]
    # The daemon's Redis key has the client key as its hash tag: the key's own slot.
    on_s0 = set()
    s0_slot = None
    for k in keys:
        slot = int(ri.redis_cli(1, "CLUSTER", "KEYSLOT", k).strip())
        if is_served_by(0, slot):
            on_s0.add(k)
            s0_slot = slot
    assert 5 <= len(on_s0) <= 30, on_s0
    used = {k: 0 for k in keys}  # units charged in Redis, as the replies show them

    def check(d, k):
        r = d.c.ok("RL.CHECK", k, "api")
        if r[0] == 1 and r[2] == n_limit - used[k] - 1:
            used[k] += 1
            return True
        return r

    with ri.Fleet(tmp, 2, config=cfg, args=["--threads", "1"]) as ds:
        for _ in range(3):
            for d in ds:
                for k in keys:
                    assert check(d, k) is True
        os.kill(pid_of(0), signal.SIGKILL)
        t_kill = time.monotonic()
        before = dict(used)
        back = [None, None]
        t_promoted = None
        n = 0
        lost = 0
        while None in back:
            now = time.monotonic()
            assert now - t_kill < 30, "the daemons never decided on the promoted replica"
            if t_promoted is None and n % 5 == 0 and any(is_served_by(m, s0_slot) for m in (3, 4, 5)):
                t_promoted = now
            for j, d in enumerate(ds):
                ok = True
                for k in keys:
                    r = d.c.ok("RL.CHECK", k, "api")
                    if k not in on_s0:
                        # another master: decided by Redis, exactly, throughout
                        assert r[0] == 1 and r[2] == n_limit - used[k] - 1, (k, r, used[k])
                        used[k] += 1
                    elif r[0] == 1:
                        if used[k] == before[k]:  # the first after the failover
                            got = n_limit - r[2] - 1  # what the new master had kept
                            lost += max(0, before[k] - got)
                            used[k] = got
                        assert r[2] == n_limit - used[k] - 1, (k, r, used[k])
                        used[k] += 1
                    else:
                        ok = False  # fail-closed meanwhile: denied, never an error
                if ok and back[j] is None:
                    back[j] = time.monotonic()
            n += 1
            time.sleep(0.01)
        t_all = max(back)
        if t_promoted is None:
            t_promoted = t_all
        for d in ds:
            i = d.info()
            assert int(i["redis_fail_closed_denied"]) >= 1, i
            assert int(i["redis_topology_reads"]) >= 2, i
        print("  cluster failover through 2 daemons: replica promoted ~%.0f ms after the kill; "
              "both daemons decided on its slots %.0f ms after the kill (%.0f ms after the "
              "promotion); writes lost %d; the other masters' keys exact throughout"
              % ((t_promoted - t_kill) * 1000, (t_all - t_kill) * 1000,
                 (t_all - t_promoted) * 1000, lost))
        assert t_all - t_promoted <= 0.4 + 1.5, (t_all - t_promoted)


def is_served_by(i, slot):
    """Whether server i is a master serving `slot`, in its own CLUSTER SLOTS."""
    try:
        out = subprocess.run(["redis-cli", "-p", str(port_of(i)), "--json", "CLUSTER", "SLOTS"],
                             capture_output=True, text=True, timeout=5).stdout
    except subprocess.TimeoutExpired:
        return False
    import json
    try:
        ranges = json.loads(out)
    except ValueError:
        return False
    return any(lo <= slot <= hi and node[1] == port_of(i) for lo, hi, node, *_ in ranges)


@test("standalone")
def daemon_started_without_redis_serves_its_fail_mode_then_redis(tmp):
    subprocess.run(["sh", ri.SH, "stop", os.path.join(ri.BASE, "s0")], check=True, timeout=30)
    cfg = ("policies:\n  open: {policy: fixed_window:1000/1h, fail: open}\n"
           "  closed: {policy: fixed_window:1000/1h}\n"
           "redis:\n  address: \"%s\"\n  timeout: 100ms\n  backoff_min: 100ms\n"
           "  backoff_max: 400ms\n" % ri.SERVERS)
    t0 = time.monotonic()
    with ri.Fleet(tmp, 1, config=cfg) as (d,):
        started = time.monotonic() - t0
        for _ in range(5):
            assert d.c.ok("RL.CHECK", "k", "open")[0] == 1
            assert d.c.ok("RL.CHECK", "k", "closed")[0] == 0
        i = d.info()
        assert int(i["redis_decisions"]) == 0, i
        assert int(i["redis_fail_open_allowed"]) >= 5 and int(i["redis_fail_closed_denied"]) >= 5, i
        time.sleep(0.5)  # the daemon stays up and keeps answering while Redis is absent
        assert d.p.poll() is None
        assert d.c.ok("RL.CHECK", "k", "closed")[0] == 0
        subprocess.run(["sh", ri.SH, "restart", os.path.join(ri.BASE, "s0")], check=True,
                       timeout=30)
        t_up = time.monotonic()
        while True:
            r = d.c.ok("RL.CHECK", "k", "closed")
            if r[0] == 1:
                break
            assert time.monotonic() - t_up < 10, "Redis never decided"
            time.sleep(0.01)
        t_redis = time.monotonic() - t_up
        assert int(d.info()["redis_decisions"]) >= 1
        # From now on Redis holds the count: exactly 999 more fit in the window.
        admitted = sum(d.c.ok("RL.CHECK", "k", "closed")[0] for _ in range(1005))
        assert admitted == 999, admitted
        print("  started without Redis: serving (fail mode) %.0f ms after exec; first "
              "decision in Redis %.0f ms after Redis answered" % (started * 1000, t_redis * 1000))


def main():
    if not ri.BASE:
        print("redis_failover.py must run under tests/redis/redis-servers.sh")
        return 1
    return ri.run_all(TESTS, "rltd-failover-")

if __name__ == "__main__":
    sys.exit(main())
