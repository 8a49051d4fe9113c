#!/usr/bin/env python3
"""ratelimitd in distributed mode: several real daemons pointed at one private Redis (or a
3-node Redis Cluster) must enforce one limit, and a stopped, killed or restarted Redis must be
answered with each policy's fail mode, counted, without an error reaching a client.

Runs under tests/redis/redis-servers.sh, which starts the servers on loopback ephemeral ports,
exports RLT_REDIS_SERVERS / RLT_REDIS_BASE / RLT_REDIS_SH and always stops them:

    redis-servers.sh run standalone -- redis_integration.py PATH_TO_RATELIMITD standalone
    redis-servers.sh run cluster -- redis_integration.py PATH_TO_RATELIMITD cluster

Prints "ok NAME" / "FAIL NAME" per test and "N passed, N failed"."""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

BIN = os.path.abspath(sys.argv[1])
KIND = sys.argv[2] if len(sys.argv) > 2 else "standalone"
SERVERS = os.environ.get("RLT_REDIS_SERVERS", "")
BASE = os.environ.get("RLT_REDIS_BASE", "")
SH = os.environ.get("RLT_REDIS_SH", "")
TESTS = []
# Under ASan the daemon is slower; a call is still bounded by the Redis timeout plus this.
MARGIN = 0.5


def test(kind):
    def deco(fn):
        if kind in ("both", KIND):
            TESTS.append(fn)
        return fn
    return deco


class Resp:
    """A minimal RESP2 client on one connection (replies: int, bytes, str, list, Err)."""

    class Err(str):
        pass

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def close(self):
        self.s.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            b = self.s.recv(65536)
            if not b:
                raise AssertionError("connection closed by the daemon")
            self.buf += b
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b":":
            return int(rest)
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Resp.Err(rest.decode())
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                b = self.s.recv(65536)
                if not b:
                    raise AssertionError("connection closed by the daemon")
                self.buf += b
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if t == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise AssertionError("bad reply %r" % line)

    def __call__(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        r = self._reply()
        return r

    def ok(self, *args):
        """A command whose reply must not be an error."""
        r = self(*args)
        assert not isinstance(r, Resp.Err), "%r -> error %s" % (args, r)
        return r


def _die_with_parent():
    # PR_SET_PDEATHSIG: a daemon never outlives this script (e.g. killed by a CTest timeout).
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


class Daemon:
    def __init__(self, tmp, name, config=None, args=()):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        cmd = [BIN, "--port", "0", "--http-port", "0", "--grpc-port", "0", "--bind", "127.0.0.1", "--threads", "2",
               "--no-snapshot"]
        if config is not None:
            path = os.path.join(self.dir, "ratelimitd.yaml")
            with open(path, "w") as f:
                f.write(config)
            cmd += ["--config", path]
        cmd += list(args)
        self.out = open(os.path.join(self.dir, "stdout"), "w+")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.p = subprocess.Popen(cmd, cwd=self.dir, stdout=self.out, stderr=self.err,
                                  preexec_fn=_die_with_parent)
        self.port = self.http = None
        deadline = time.time() + 15
        while time.time() < deadline:
            self.out.seek(0)
            m = re.search(r"resp [^ ]+:(\d+) http [^ ]+:(\d+)", self.out.read())
            if m:
                self.port, self.http = int(m.group(1)), int(m.group(2))
                g = re.search(r"grpc [^ ]+:(\d+)", m.string)
                self.grpc = int(g.group(1)) if g else None
                self.c = Resp(self.port)
                return
            if self.p.poll() is not None:
                raise AssertionError("daemon exited: " + self.stderr())
            time.sleep(0.02)
        self.stop()
        raise AssertionError("daemon did not print its ports")

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode

    def info(self):
        text = self.c.ok("INFO").decode()
        return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l and
                    not l.startswith("#"))

    def http_get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http, path),
                                        timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


class Fleet:
    """n daemons on the test's Redis; always stopped by the `with`."""

    def __init__(self, tmp, n=2, config=None, args=()):
        self.tmp, self.n, self.config, self.args = tmp, n, config, args
        self.ds = []

    def __enter__(self):
        try:
            for i in range(self.n):
                self.ds.append(Daemon(self.tmp, "d%d" % i, self.config, self.args))
        except BaseException:
            self.__exit__()
            raise
        return self.ds

    def __exit__(self, *exc):
        for d in self.ds:
            rc = d.stop()
            assert rc == 0 or exc and exc[0] is not None, \
                "daemon exited with %s: %s" % (rc, d.stderr())


# Tests that are not about timeouts give Redis 1 s (the default 50 ms fails closed when a
# loaded CI machine stalls a reply); those about timeouts set theirs.
def redis_args():
    a = ["--redis", SERVERS, "--redis-timeout", "1s"]
    if KIND == "cluster":
        a.append("--redis-cluster")
    return a


def redis_section(extra=""):
    if "timeout:" not in extra:
        extra = "  timeout: 1s\n" + extra
    return ("redis:\n  address: \"%s\"\n  cluster: %s\n%s" %
            (SERVERS, "true" if KIND == "cluster" else "false", extra))


def redis_pid(i=0):
    with open(os.path.join(BASE, "s%d" % i, "pid")) as f:
        return int(f.read().strip())


def redis_cli(i, *args):
    with open(os.path.join(BASE, "s%d" % i, "port")) as f:
        port = f.read().strip()
    return subprocess.run(["redis-cli", "-p", port] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10).stdout


def hammer(ds, make_cmd, total, threads=4):
    """Sends `total` commands spread over the daemons from `threads` concurrent clients;
    returns every reply."""
    replies = []
    lock = threading.Lock()
    errors = []

    def worker(k):
        try:
            conns = [Resp(d.port) for d in ds]
            mine = []
            for j in range(k, total, threads):
                mine.append(conns[j % len(conns)].ok(*make_cmd(j)))
            for c in conns:
                c.close()
            with lock:
                replies.extend(mine)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert len(replies) == total
    return replies


# ---------------------------------------------------------------------------------------------


@test("both")
def two_daemons_share_one_cl_throttle_limit(tmp):
    # GCRA 1 per hour with burst 10 (redis-cell's max_burst 9): exactly 10 pass in total.
    with Fleet(tmp, 2, args=redis_args()) as ds:
        keys = ["user:%d" % i for i in range(8)]  # on a cluster, spread over the nodes
        for key in keys:
            rs = hammer(ds, lambda j: ("CL.THROTTLE", key, 9, 1, 3600), 30)
            admitted = sum(1 for r in rs if r[0] == 0)
            assert admitted == 10, (key, admitted, rs)
        if KIND == "cluster":  # the keys really live on every node
            for n in range(3):
                assert int(redis_cli(n, "DBSIZE").strip()) > 0, n
        for d in ds:
            i = d.info()
            assert i["backend"] == "redis", i
            assert int(i["redis_decisions"]) > 0, i
            assert int(i["redis_decisions_without_redis"]) == 0, i


@test("both")
def pipelined_commands_share_the_limit_and_keep_their_order(tmp):
    with Fleet(tmp, 2, args=redis_args()) as ds:
        socks = [socket.create_connection(("127.0.0.1", d.port), timeout=10) for d in ds]
        try:
            one = b"*5\r\n$11\r\nCL.THROTTLE\r\n$4\r\npipe\r\n$1\r\n9\r\n$1\r\n1\r\n" \
                  b"$4\r\n3600\r\n"
            for s in socks:
                s.sendall(one * 15)
            admitted = []
            for s in socks:
                c = Resp.__new__(Resp)
                c.s, c.buf = s, b""
                rs = [c._reply() for _ in range(15)]
                flags = [r[0] for r in rs]
                # In order: once a request of this connection is limited, the next are too
                # (nothing refills within the test).
                assert flags == sorted(flags), flags
                admitted.append(flags.count(0))
            assert sum(admitted) == 10, admitted
        finally:
            for s in socks:
                s.close()


@test("both")
def a_pipelined_read_costs_about_one_round_trip_per_node(tmp):
    # 100 decisions in one write: decided as one pipelined batch (rlt_redis_decide_batch), not
    # one round trip each.  TCP may split the write into a few reads, each one batch.
    with Fleet(tmp, 1, args=redis_args() + ["--threads", "1"]) as ds:
        d = ds[0]
        d.c.ok("CL.THROTTLE", "rt:warm", 4, 1, 3600)  # the worker's handle and scripts
        before = int(d.info()["redis_round_trips"])
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        try:
            data = b"".join(b"*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$1\r\n4\r\n"
                            b"$1\r\n1\r\n$4\r\n3600\r\n" % (len(k), k)
                            for k in (b"rt:%d" % i for i in range(100)))
            s.sendall(data)
            c = Resp.__new__(Resp)
            c.s, c.buf = s, b""
            rs = [c._reply() for _ in range(100)]
            assert all(r[:3] == [0, 5, 4] for r in rs), rs[:3]
        finally:
            s.close()
        trips = int(d.info()["redis_round_trips"]) - before
        assert 1 <= trips <= 25, trips


@test("both")
def two_daemons_share_one_rl_check_limit_for_every_algorithm(tmp):
    policies = ["fixed_window:7/1h", "sliding_log:7/1h", "sliding_window:7/1h",
                "token_bucket:7/1h", "gcra:7/1h"]
    with Fleet(tmp, 2, args=redis_args()) as ds:
        for p in policies:
            rs = hammer(ds, lambda j: ("RL.CHECK", "k:" + p, p), 20)
            admitted = sum(1 for r in rs if r[0] == 1)
            assert admitted == 7, (p, admitted)
            # Both daemons see the same state: a peek on either says nothing is left.
            for d in ds:
                assert d.c.ok("RL.PEEK", "k:" + p, p)[2] == 0, p


@test("both")
def two_daemons_share_one_calendar_month_that_ends_at_the_real_local_midnight(tmp):
    # Decided by the scripts (also where the module is loaded) with Redis's clock.
    from datetime import datetime
    from zoneinfo import ZoneInfo
    zone = "Australia/Lord_Howe"
    p = "fixed_window:5/1mo,tz=" + zone

    def month_end():
        now = datetime.now(ZoneInfo(zone))
        m = now.year * 12 + now.month  # the next month, 0-based
        return datetime(m // 12, m % 12 + 1, 1, tzinfo=ZoneInfo(zone)).timestamp()

    if month_end() - time.time() < 10:
        time.sleep(11)
    with Fleet(tmp, 2, args=redis_args()) as ds:
        rs = hammer(ds, lambda j: ("RL.CHECK", "cal", p), 12)
        assert sum(1 for r in rs if r[0] == 1) == 5, rs
        r = ds[0].c.ok("RL.CHECK", "cal", p)
        left_ms = (month_end() - time.time()) * 1000
        assert r[0] == 0 and abs(r[3] - left_ms) <= 1500 and r[4] == r[3], (r, left_ms)


@test("both")
def named_policies_http_and_resp_share_the_limit(tmp):
    cfg = "policies:\n  api: fixed_window:5/1h\n" + redis_section()
    with Fleet(tmp, 2, config=cfg) as (a, b):
        allowed = 0
        for j in range(6):
            if j % 2:
                allowed += a.c.ok("RL.CHECK", "acct", "api")[0]
            else:
                st, body = b.http_get("/v1/check?key=acct&policy=api")
                assert st in (200, 429), (st, body)
                allowed += st == 200
        assert allowed == 5, allowed
        st, body = a.http_get("/v1/check?key=acct&policy=api")
        assert st == 429, (st, body)
        _, metrics = a.http_get("/metrics")
        assert 'ratelimitd_backend{backend="redis"} 1' in metrics, metrics
        assert 'ratelimitd_redis_decisions_total{by="redis"}' in metrics, metrics
        # Every family, the Redis ones included, passes Prometheus's own checker.
        r = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, (r.stdout, r.stderr)


@test("both")
def a_penalty_box_in_redis_blocks_on_both_daemons_on_resp_and_http(tmp):
    # The block lives in Redis (a companion key in the limit's slot): a breach on one daemon
    # blocks the key on the other, on RESP and HTTP, with Retry-After to the block's end
    # whatever the window says; a breach soon after the block escalates; RL.RESET lifts it.
    cfg = "policies:\n  login: fixed_window:2/1s,block=10m*2..1h\n" + redis_section()
    with Fleet(tmp, 2, config=cfg) as (a, b):
        time.sleep(1.02 - time.time() % 1)  # windows are Redis's UTC seconds: start of one
        for _ in range(2):
            assert a.c.ok("RL.CHECK", "u1", "login")[0] == 1
        r = a.c.ok("RL.CHECK", "u1", "login")
        assert r[0] == 0 and r[2] == 0 and 599000 <= r[3] <= 600000, r
        time.sleep(1.1)  # a new window: without the box this would pass
        r = b.c.ok("RL.CHECK", "u1", "login")
        assert r[0] == 0 and 597000 <= r[3] < 599000, r
        assert b.c.ok("RL.PEEK", "u1", "login")[0] == 0
        st, body = b.http_get("/v1/check?key=u1&policy=login")
        assert st == 429, (st, body)
        time.sleep(1.02 - time.time() % 1)
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/check?key=u2&policy=login" % b.http,
                                    timeout=10) as h:
            assert h.status == 200
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", a.http, timeout=10)
        for want in (200, 429, 429):
            conn.request("GET", "/v1/check?key=u2&policy=login")
            h = conn.getresponse()
            h.read()
            assert h.status == want, (h.status, want)
        assert re.match(r"^(59[89]|600)$", h.getheader("Retry-After")), h.getheaders()
        conn.close()
        # RESP's RL.RESET on one daemon lifts the block for both.
        assert a.c.ok("RL.RESET", "u1", "login") == 1
        assert b.c.ok("RL.CHECK", "u1", "login")[0] == 1
        # Inline policies too; and a new block at once after a reset starts at the first length.
        pol = "gcra:1/1s,block=2s*3..1m"
        assert a.c.ok("RL.CHECK", "g", pol)[0] == 1
        r = b.c.ok("RL.CHECK", "g", pol)
        assert r[0] == 0 and 1900 <= r[3] <= 2000, r
        time.sleep(2.1)  # the block ended; the bucket has room again
        assert a.c.ok("RL.CHECK", "g", pol)[0] == 1
        r = b.c.ok("RL.CHECK", "g", pol)  # within W of the end: 3 x 2 s
        assert r[0] == 0 and 5900 <= r[3] <= 6000, r


@test("both")
def a_policy_with_lease_mode_answers_hot_keys_from_local_leases(tmp):
    # lease: true with 50-unit leases: most of 400 checks on one hot key are answered without
    # a Redis call, and the fleet admits at most N + S x (k - 1) (docs/distributed.md).
    cfg = ("policies:\n  hot: {policy: fixed_window:300/1h, lease: true}\n  cold: fixed_window:300/1h\n"
           + redis_section("  lease_units: 50\n  lease_ttl: 10s\n"))
    with Fleet(tmp, 2, config=cfg) as (a, b):
        allowed = 0
        for j in range(400):
            d = a if j % 2 else b
            allowed += d.c.ok("RL.CHECK", "hot-key", "hot")[0]
        assert 300 - 2 * 50 <= allowed <= 300 + 2 * 49, allowed
        local = sum(int(d.info()["redis_lease_local"]) for d in (a, b))
        assert local >= 300, local
        # The policy without lease mode asks Redis every time.
        before = sum(int(d.info()["redis_lease_local"]) for d in (a, b))
        for _ in range(20):
            a.c.ok("RL.CHECK", "cold-key", "cold")
        assert sum(int(d.info()["redis_lease_local"]) for d in (a, b)) == before


@test("standalone")
def the_local_lease_units_held_show_in_metrics_and_v1_stats(tmp):
    # One connection (one worker handle): the first check takes a 50-unit lease and spends 1,
    # 9 more spend 9 of it; a cold (lease-less) policy holds none.  Keys of their own: the Redis
    # servers are shared by the tests.
    cfg = ("policies:\n  hot: {policy: fixed_window:300/1h, lease: true}\n  cold: fixed_window:300/1h\n"
           + redis_section("  lease_units: 50\n  lease_ttl: 10s\n"))
    with Fleet(tmp, 1, config=cfg) as (a,):
        def held():
            m = re.search(r'^ratelimitd_leases\{kind="redis_units"\} (\d+)$', a.http_get("/metrics")[1], re.M)
            return int(m.group(1)), json.loads(a.http_get("/v1/stats")[1])["leases"]
        assert held() == (0, {"concurrency": 0, "redis_units": 0}), held()
        assert a.c.ok("RL.CHECK", "units-cold", "cold")[0] == 1
        assert held()[0] == 0
        assert a.c.ok("RL.CHECK", "units-key", "hot")[0] == 1
        assert held() == (49, {"concurrency": 0, "redis_units": 49}), held()
        for _ in range(9):
            assert a.c.ok("RL.CHECK", "units-key", "hot")[0] == 1
        assert held() == (40, {"concurrency": 0, "redis_units": 40}), held()


@test("standalone")
def a_reused_inline_slot_is_decided_under_its_new_policy(tmp):
    # One inline slot: gcra:1000/1s idle past its horizon (3 s), then another text takes the
    # slot (the same store id): Redis must decide under the new policy, not a cached old one.
    cfg = "server:\n  max_inline_policies: 1\n  threads: 1\n" + redis_section()
    with Fleet(tmp, 1, config=cfg) as (a,):
        assert a.c.ok("RL.CHECK", "a", "gcra:1000/1s")[0] == 1
        time.sleep(3.5)
        r1 = a.c.ok("RL.CHECK", "b", "fixed_window:1/1h")
        r2 = a.c.ok("RL.CHECK", "b", "fixed_window:1/1h")
        assert r1[:2] == [1, 1] and r2[:2] == [0, 1], (r1, r2)


@test("both")
def info_names_the_path_each_node_takes(tmp):
    # With the module loaded into the test's servers (RLT_REDIS_EXTRA_ARGS --loadmodule, the
    # server_redis_module test), the daemon's decisions take it; else the Lua scripts.
    want = "module" if "loadmodule" in os.environ.get("RLT_REDIS_EXTRA_ARGS", "") else "scripts"
    with Fleet(tmp, 1, args=redis_args()) as (a,):
        for i in range(20):
            assert a.c.ok("RL.CHECK", "k%d" % i, "gcra:5/1s")[0] == 1
        lines = [v for k, v in a.info().items() if re.match(r"redis_node\d+$", k)]
        assert lines and all("engine=%s" % want in v for v in lines), lines
        if KIND == "cluster":
            assert len(lines) == 3, lines


@test("standalone")
def the_scripts_can_be_forced_where_the_module_is_loaded(tmp):
    cfg = "policies:\n  p: gcra:5/1s\n" + redis_section("  engine: scripts\n")
    with Fleet(tmp, 1, config=cfg) as (a,):
        assert a.c.ok("RL.CHECK", "k", "p")[0] == 1
        lines = [v for k, v in a.info().items() if re.match(r"redis_node\d+$", k)]
        assert lines and all("engine=scripts" in v for v in lines), lines


@test("both")
def multi_limit_and_concurrency_go_through_redis(tmp):
    with Fleet(tmp, 2, args=redis_args()) as (a, b):
        # One hash tag: on a cluster both keys live in one slot, so the check is one script.
        pa, pb = "fixed_window:3/1h", "fixed_window:100/1h"
        outs = []
        for j in range(5):
            d = a if j % 2 else b
            outs.append(d.c.ok("RL.MULTI", "{u7}:api", pa, 1, "{u7}:all", pb, 1))
        assert [o[0] for o in outs] == [1, 1, 1, 0, 0], outs
        assert outs[3][6] == 0, outs  # the first limit refused
        # The refused checks charged nothing on the other limit: 3 used of 100.
        assert a.c.ok("RL.PEEK", "{u7}:all", pb)[2] == 97
        # Concurrency: slots are shared, and a lease taken on one daemon is released on the
        # other.
        conc = "concurrency:2/30s"
        r1 = a.c.ok("RL.ACQUIRE", "job", conc)
        r2 = b.c.ok("RL.ACQUIRE", "job", conc)
        r3 = a.c.ok("RL.ACQUIRE", "job", conc)
        assert r1[0] == 1 and r2[0] == 1 and r3[0] == 0, (r1, r2, r3)
        assert b.c.ok("RL.RELEASE", "job", conc, r1[4]) == 1
        assert a.c.ok("RL.RELEASE", "job", conc, r1[4]) == 0  # already released
        assert a.c.ok("RL.ACQUIRE", "job", conc)[0] == 1
        # RL.RESET on one daemon frees the key for both.
        assert b.c.ok("RL.RESET", "{u7}:api", pa) == 1
        assert a.c.ok("RL.CHECK", "{u7}:api", pa)[0] == 1


@test("both")
def tier_decisions_share_the_tier_policys_limit(tmp):
    # Tier assignments are configuration local to each daemon (RL.TIER on each); the limits
    # they select are decided in Redis.
    cfg = ("policies:\n  free: fixed_window:2/1h\n  pro: fixed_window:6/1h\n"
           "tiers:\n  free: free\n  pro: pro\ndefault_tier: free\n" + redis_section())
    with Fleet(tmp, 2, config=cfg) as ds:
        for d in ds:
            assert d.c.ok("RL.TIER", "acct9", "pro") == "OK"
        rs = hammer(ds, lambda j: ("RL.CHECK", "acct9", "@free"), 10)
        assert sum(r[0] for r in rs) == 6, rs
        rs = hammer(ds, lambda j: ("RL.CHECK", "acct1", "@free"), 10)
        assert sum(r[0] for r in rs) == 2, rs
        # Every one of the 20 decisions was made in Redis (the tier names the policy).
        assert sum(int(d.info()["redis_decisions"]) for d in ds) >= 20


@test("cluster")
def envoy_descriptors_on_different_slots_are_decided_on_a_cluster(tmp):
    cfg = ("domain: web\ndescriptors:\n"
           "  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"
           "  - key: path\n    rate_limit: {unit: hour, requests_per_unit: 100}\n" +
           redis_section())
    body = ('{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"u1"}]},'
            '{"entries":[{"key":"path","value":"/x"}]}]}')
    with Fleet(tmp, 2, config=cfg) as ds:
        codes = []
        for j in range(5):
            req = urllib.request.Request("http://127.0.0.1:%d/json" % ds[j % 2].http,
                                         data=body.encode(), method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    codes.append(r.status)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
        assert codes == [200, 200, 200, 429, 429], codes
        splits = sum(int(d.info()["redis_multi_split"]) for d in ds)
        assert splits == 5, splits


def timed(c, *args):
    t0 = time.monotonic()
    r = c.ok(*args)
    return r, time.monotonic() - t0


@test("standalone")
def stopped_redis_is_answered_with_each_policys_fail_mode_within_the_timeout(tmp):
    cfg = ("policies:\n"
           "  strict: {policy: fixed_window:100/1h, fail: closed}\n"
           "  lenient: {policy: fixed_window:100/1h, fail: open}\n"
           "  default_mode: fixed_window:100/1h\n" +
           redis_section("  timeout: 100ms\n  fail: closed\n  backoff_min: 200ms\n"))
    pid = redis_pid()
    with Fleet(tmp, 1, config=cfg) as (d,):
        assert d.c.ok("RL.CHECK", "k", "strict")[0] == 1
        assert d.c.ok("RL.CHECK", "k", "lenient")[0] == 1
        os.kill(pid, signal.SIGSTOP)
        try:
            for _ in range(3):  # before the breaker opens, each call waits for the timeout
                r, dt = timed(d.c, "RL.CHECK", "k", "strict")
                assert r[0] == 0 and r[3] >= 1, r  # denied, with a retry_after
                assert dt < 0.1 + MARGIN, dt
                r, dt = timed(d.c, "RL.CHECK", "k", "lenient")
                assert r[0] == 1, r
                assert dt < 0.1 + MARGIN, dt
                r, dt = timed(d.c, "CL.THROTTLE", "k", 9, 1, 60)
                assert r[0] == 1, r  # the default, closed: limited
                assert dt < 0.1 + MARGIN, dt
            i = d.info()
            assert int(i["redis_fail_closed_denied"]) >= 6, i
            assert int(i["redis_fail_open_allowed"]) >= 3, i
            assert int(i["redis_timeouts"]) >= 1, i
            assert i["redis_breaker"] == "open", i
            st, body = d.http_get("/v1/check?key=k&policy=lenient")
            assert st == 200, (st, body)
            st, body = d.http_get("/v1/check?key=k&policy=strict")
            assert st == 429, (st, body)
            _, metrics = d.http_get("/metrics")
            m = re.search(r'ratelimitd_redis_decisions_total\{by="fail_closed"\} (\d+)', metrics)
            assert m and int(m.group(1)) >= 7, metrics
            assert re.search(r"ratelimitd_redis_breaker_open [1-9]", metrics), metrics
        finally:
            os.kill(pid, signal.SIGCONT)
        # Recovery: once the breaker's trial succeeds, Redis decides again.
        deadline = time.monotonic() + 10
        while True:
            before = int(d.info()["redis_decisions"])
            r = d.c.ok("RL.CHECK", "k", "strict")
            if int(d.info()["redis_decisions"]) > before:
                break
            assert time.monotonic() < deadline, "Redis never decided again"
            time.sleep(0.05)
        assert r[0] == 1 and r[2] < 99, r  # Redis state: the allowance used before counts
        assert d.info()["redis_breaker"] == "closed"


@test("standalone")
def killed_and_restarted_redis_recovers_without_errors_reaching_clients(tmp):
    cfg = ("policies:\n  api: {policy: sliding_window:1000/1h, fail: open}\n" +
           redis_section("  timeout: 100ms\n  backoff_min: 50ms\n  backoff_max: 200ms\n"))
    with Fleet(tmp, 2, config=cfg) as ds:
        for d in ds:
            assert d.c.ok("RL.CHECK", "k", "api")[0] == 1
        os.kill(redis_pid(), signal.SIGKILL)
        time.sleep(0.1)
        for j in range(20):  # every reply is a decision (fail open), never an error
            r = ds[j % 2].c.ok("RL.CHECK", "k", "api")
            assert r[0] == 1, r
            assert ds[j % 2].c.ok("CL.THROTTLE", "t", 5, 1, 60)[0] == 1  # default: closed
        subprocess.run(["sh", SH, "restart", os.path.join(BASE, "s0")], check=True,
                       timeout=30)
        # A restart without persistence starts fresh; NOSCRIPT is handled by a reload.
        deadline = time.monotonic() + 10
        for d in ds:
            while True:
                before = int(d.info()["redis_decisions"])
                r = d.c.ok("RL.CHECK", "k", "api")
                if int(d.info()["redis_decisions"]) > before:
                    break
                assert time.monotonic() < deadline, "Redis never decided again"
                time.sleep(0.05)
            assert r[0] == 1
        # Both daemons share the restarted Redis' state again.
        rs = hammer(ds, lambda j: ("RL.CHECK", "after", "fixed_window:5/1h"), 12)
        assert sum(r[0] for r in rs) == 5
        for d in ds:
            i = d.info()
            assert int(i["redis_fail_open_allowed"]) >= 1, i
            assert int(i["redis_fail_closed_denied"]) >= 1, i
            assert int(i["redis_errors"]) >= 1 and int(i["redis_breaker_opened"]) >= 1, i
            assert i["redis_breaker"] == "closed", i


def wait_for_redis(d, key, policy):
    """Checks until Redis decides again (its decision count grows); returns that reply."""
    deadline = time.monotonic() + 10
    while True:
        before = int(d.info()["redis_decisions"])
        r = d.c.ok("RL.CHECK", key, policy)
        if int(d.info()["redis_decisions"]) > before:
            return r
        assert time.monotonic() < deadline, "Redis never decided again"
        time.sleep(0.05)


@test("standalone")
def fail_local_decides_at_the_nodes_share_while_redis_is_stopped_and_in_redis_again_after(tmp):
    cfg = ("policies:\n  api: {policy: fixed_window:10/1h, fail: local}\n" +
           redis_section("  timeout: 100ms\n  backoff_min: 100ms\n  backoff_max: 200ms\n"
                         "  fleet_size: 2\n"))
    pid = redis_pid()
    with Fleet(tmp, 1, config=cfg) as (d,):
        for _ in range(4):  # Redis decides under the whole limit
            r = d.c.ok("RL.CHECK", "acct", "api")
            assert r[0] == 1 and r[1] == 10, r
        assert r[2] == 6, r
        os.kill(pid, signal.SIGSTOP)
        try:
            rs = [timed(d.c, "RL.CHECK", "acct", "api") for _ in range(12)]
            # The node's own store at 10 / 2: exactly 5 admitted, every reply in time.
            assert [r[0] for r, _ in rs] == [1] * 5 + [0] * 7, rs
            assert all(r[1] == 5 for r, _ in rs), rs
            assert all(dt < 0.1 + MARGIN for _, dt in rs), rs
            assert all(r[3] >= 1 for r, _ in rs[5:]), rs  # denials say when to retry
            st, body = d.http_get("/v1/check?key=acct&policy=api")  # the same key over HTTP
            assert st == 429, (st, body)
            i = d.info()
            assert i["redis_fail_local"] == "13", i
            assert i["redis_local_fallback"] == "1", i
            assert i["redis_local_fallback_entered"] == "1", i
            assert i["redis_fail_closed_denied"] == "0", i
            assert i["redis_fleet_size"] == "2", i
            _, metrics = d.http_get("/metrics")
            assert 'ratelimitd_redis_decisions_total{by="fail_local"} 13\n' in metrics, metrics
            assert "ratelimitd_redis_local_fallback 1\n" in metrics, metrics
            r = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, (r.stdout, r.stderr)
            assert d.stderr().count("redis unreachable") == 1, d.stderr()
        finally:
            os.kill(pid, signal.SIGCONT)
        # Back in Redis: its count resumes from what it held, the 4 before and this one, plus
        # those of the calls that timed out and that Redis ran when it woke up (a timed-out
        # call may have been applied; it is never resent); the local 5 are not carried.
        r = wait_for_redis(d, "acct", "api")
        timeouts = int(d.info()["redis_timeouts"])
        assert timeouts >= 1
        assert r[0] == 1 and r[1] == 10 and 5 - timeouts <= r[2] <= 5, (r, timeouts)
        rs = [d.c.ok("RL.CHECK", "acct", "api") for _ in range(r[2] + 1)]
        assert [x[0] for x in rs] == [1] * r[2] + [0], rs
        i = d.info()
        assert i["redis_local_fallback"] == "0" and i["redis_breaker"] == "closed", i
        assert d.stderr().count("redis answers again") == 1, d.stderr()
        assert d.stderr().count("redis unreachable") == 1, d.stderr()


@test("standalone")
def a_fleet_falling_back_locally_admits_no_more_than_the_shared_limit(tmp):
    # Two daemons, fleet_size 2, Redis killed: each admits its 5 of 10, the fleet 10; after a
    # restart (without persistence: fresh) they share Redis's 10 again.
    cfg = ("policies:\n  api: {policy: gcra:10/1h, fail: local}\n" +
           redis_section("  timeout: 100ms\n  backoff_min: 50ms\n  backoff_max: 200ms\n"
                         "  fleet_size: 2\n"))
    with Fleet(tmp, 2, config=cfg) as ds:
        for d in ds:
            assert d.c.ok("RL.CHECK", "warm", "api")[0] == 1
        os.kill(redis_pid(), signal.SIGKILL)
        time.sleep(0.1)
        rs = hammer(ds, lambda j: ("RL.CHECK", "k", "api"), 40)
        assert sum(r[0] for r in rs) == 10, rs
        for d in ds:
            i = d.info()
            assert i["redis_fail_local"] == "20", i
            assert i["redis_local_fallback"] == "1", i
        subprocess.run(["sh", SH, "restart", os.path.join(BASE, "s0")], check=True,
                       timeout=30)
        time.sleep(0.5)  # past every handle's backoff: each one's next call is a trial
        for d in ds:
            wait_for_redis(d, "warm", "api")
        rs = hammer(ds, lambda j: ("RL.CHECK", "k", "api"), 40)
        assert sum(r[0] for r in rs) == 10, rs
        for d in ds:
            i = d.info()
            assert i["redis_local_fallback"] == "0", i
            assert i["redis_local_fallback_entered"] == "1", i
            assert d.stderr().count("redis unreachable") == 1, d.stderr()
            assert d.stderr().count("redis answers again") == 1, d.stderr()


@test("standalone")
def config_refuses_policies_redis_cannot_run_and_bad_settings(tmp):
    cases = [
        ("policies:\n  tiny: fixed_window:10/1500ns\n" + redis_section(), "cannot run in Redis"),
        ("policies:\n  boxed: gcra:10/1s,block=1500ns\n" + redis_section(),
         "block= durations must be whole microseconds"),
        (redis_section("  colour: blue\n"), "unknown redis setting"),
        (redis_section("  fail: maybe\n"), "fail must be open, closed or local"),
        (redis_section("  timeout: 50\n"), "redis timeout must be a duration"),
        ("policies:\n  p: {policy: gcra:1/1s, fail: sometimes}\n", "fail must be open, closed or local"),
        ("redis: {cluster: true}\n", "redis needs an address"),
        (redis_section("  fleet_size: 0\n"), "redis fleet_size"),
        ("policies:\n  p: {policy: fixed_window:1/1m, fail: local}\n" +
         redis_section("  fleet_size: 2\n"), "leaves 0 per node"),
    ]
    for text, want in cases:
        path = os.path.join(tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([BIN, "--config", path, "--check-config"], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 2 and want in r.stderr, (text, r.returncode, r.stderr)
    r = subprocess.run([BIN, "--redis", "127.0.0.1:1", "--redis-fail", "sideways",
                        "--check-config"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "--redis-fail" in r.stderr, r.stderr
    r = subprocess.run([BIN, "--redis", "127.0.0.1:1", "--redis-fail", "local",
                        "--redis-fleet-size", "2000", "--check-config"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 2 and "policy 'default' (fail: local)" in r.stderr, r.stderr
    r = subprocess.run([BIN, "--redis", "127.0.0.1:1", "--redis-fleet-size", "0",
                        "--check-config"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "--redis-fleet-size" in r.stderr, r.stderr
    path = os.path.join(tmp, "good.yaml")
    with open(path, "w") as f:
        f.write("policies:\n  p: {policy: gcra:1/1s, fail: open}\n" +
                redis_section("  timeout_ms: 30\n  prefix: \"app1:\"\n"))
    r = subprocess.run([BIN, "--config", path, "--check-config"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr


@test("standalone")
def key_prefix_and_redis_time_are_used(tmp):
    cfg = redis_section("  prefix: \"fleet1:\"\n")
    with Fleet(tmp, 1, config=cfg) as (d,):
        assert d.c.ok("RL.CHECK", "pfx", "fixed_window:3/1h")[0] == 1
        keys = redis_cli(0, "--scan", "--pattern", "fleet1:*")
        assert "fleet1:{pfx}pfx:" in keys, keys


@test("both")
def reservations_work_on_redis_and_any_daemon_of_the_fleet_settles_them(tmp):
    # Charge after the response on Redis: the reservation is a Redis key beside the limit's
    # (same hash tag, so the same Cluster slot), so one daemon reserves and another settles;
    # a settle happens at most once, a debt past the limit is charged, and HTTP's reserve=1
    # and /v1/settle work the same.
    with Fleet(tmp, 2, args=redis_args()) as (a, b):
        pol = "gcra:10/1h"
        r = a.c.ok("RL.RESERVE", "llm", pol, 8)
        assert r[0] == 1 and r[2] == 2 and len(r[5]) == 16, r
        rid = r[5].decode()
        assert b.c.ok("RL.PEEK", "llm", pol)[2] == 2  # charged in Redis, seen by b
        s = b.c.ok("RL.SETTLE", "llm", pol, rid, 3)  # settled by the other daemon
        assert s[0] == 1 and s[2] == 7, s
        again = a.c("RL.SETTLE", "llm", pol, rid, 0)
        assert isinstance(again, Resp.Err) and "unknown reservation" in again, again
        assert a.c.ok("RL.PEEK", "llm", pol)[2] == 7
        # A real cost past the limit is a debt: the next request waits.
        r = a.c.ok("RL.RESERVE", "llm", pol, 1)
        s = b.c.ok("RL.SETTLE", "llm", pol, r[5].decode(), 20)
        assert s[0] == 0 and s[2] == 0, s
        assert a.c.ok("RL.CHECK", "llm", pol, 1)[0] == 0
        # Denied: no reservation, nothing charged.
        r = a.c.ok("RL.RESERVE", "other", pol, 11)
        assert r[0] == 0 and r[5] is None, r
        assert a.c.ok("RL.PEEK", "other", pol)[2] == 10
        # leaky_bucket cannot settle: said so.
        r = a.c("RL.RESERVE", "x", "leaky_bucket:3/1s,queue=2", 1)
        assert isinstance(r, Resp.Err) and "reservations need" in r, r
        # HTTP: reserve=1 on one daemon, POST /v1/settle on the other.
        st, body = a.http_get("/v1/check?key=h1&policy=fixed_window:100/1h&cost=30&reserve=1")
        assert st == 200, (st, body)
        j = json.loads(body)
        assert j["allowed"] and j["remaining"] == 70 and len(j["reservation"]) == 16, j
        form = ("key=h1&policy=fixed_window:100/1h&reservation=%s&cost=12" %
                j["reservation"]).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/settle" % b.http, data=form,
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            sj = json.loads(resp.read().decode())
        assert sj["settled"] and sj["remaining"] == 88, sj
        try:
            urllib.request.urlopen(urllib.request.Request(
                "http://127.0.0.1:%d/v1/settle" % a.http, data=form, method="POST"), timeout=10)
            assert False, "a second settle must fail"
        except urllib.error.HTTPError as e:
            assert e.code == 404 and "unknown reservation" in e.read().decode()
        if KIND == "standalone":  # a settled reservation's key is gone
            keys = redis_cli(0, "--scan", "--pattern", "rlt:{h1}*")
            assert "rlt:{h1}h1:" in keys and ":r:" not in keys, keys


@test("standalone")
def without_redis_a_reservation_takes_the_fail_mode_and_a_settle_is_an_error(tmp):
    cfg = ("policies:\n"
           "  strict: {policy: fixed_window:100/1h, fail: closed}\n"
           "  lenient: {policy: fixed_window:100/1h, fail: open}\n" +
           redis_section("  timeout: 100ms\n  backoff_min: 200ms\n"))
    pid = redis_pid()
    with Fleet(tmp, 1, config=cfg) as (d,):
        r = d.c.ok("RL.RESERVE", "k", "strict", 5)
        assert r[0] == 1 and r[5], r
        rid = r[5].decode()
        os.kill(pid, signal.SIGSTOP)
        try:
            r = d.c.ok("RL.RESERVE", "k", "strict", 5)
            assert r[0] == 0 and r[5] is None, r  # fail-closed: denied, nothing to settle
            r = d.c.ok("RL.RESERVE", "k", "lenient", 5)
            assert r[0] == 1 and r[5] is None, r  # fail-open: allowed, nothing to settle
            e = d.c("RL.SETTLE", "k", "strict", rid, 1)
            assert isinstance(e, Resp.Err) and "Redis could not answer" in e, e
            st, body = d.http_get("/v1/settle?key=k&policy=strict&reservation=%s&cost=1" % rid)
            assert st in (405, 503), (st, body)
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.3)  # the breaker's trial call
        for _ in range(20):  # the reservation was left as it was: settled now
            s = d.c("RL.SETTLE", "k", "strict", rid, 1)
            if not isinstance(s, Resp.Err) or "Redis could not answer" not in s:
                break
            time.sleep(0.1)
        # 100 - 5 + 4 refunded; less 5 more when the timed-out reserve, already sent, ran once
        # Redis woke up (it may: never resent, it stays charged until its timeout, no id)
        assert not isinstance(s, Resp.Err) and s[2] in (94, 99), s


@test("standalone")
def an_unsettled_redis_reservation_expires_charged_as_estimated(tmp):
    with Fleet(tmp, 1, args=redis_args()) as (d,):
        r = d.c.ok("RL.RESERVE", "exp", "fixed_window:10/1h", 6, "TIMEOUT", 300)
        assert r[0] == 1 and r[5], r
        keys = redis_cli(0, "--scan", "--pattern", "rlt:{exp}*")
        assert ":r:%s" % r[5].decode() in keys, keys
        time.sleep(0.5)
        keys = redis_cli(0, "--scan", "--pattern", "rlt:{exp}*")
        assert ":r:" not in keys, keys
        e = d.c("RL.SETTLE", "exp", "fixed_window:10/1h", r[5].decode(), 0)
        assert isinstance(e, Resp.Err) and "unknown reservation" in e, e
        assert d.c.ok("RL.PEEK", "exp", "fixed_window:10/1h")[2] == 4


def run_all(tests, prefix, wanted=()):
    """Runs each test (all, or those named in `wanted`) in its own temporary folder, printing
    ok/FAIL with the daemons' stderr on failure.  Returns the exit status: 1 when any failed
    or none ran.  redis_failover.py runs its tests through this too."""
    passed = failed = 0
    for t in tests:
        if wanted and t.__name__ not in wanted:
            continue
        tmp = tempfile.mkdtemp(prefix=prefix)
        t0 = time.monotonic()
        try:
            t(tmp)
            print("ok   %s (%s, %.1fs)" % (t.__name__, KIND, time.monotonic() - t0))
            passed += 1
        except Exception:
            print("FAIL %s (%s)" % (t.__name__, KIND))
            traceback.print_exc()
            for d in sorted(os.listdir(tmp)):
                p = os.path.join(tmp, d, "stderr")
                if os.path.exists(p):
                    print("--- %s stderr:\n%s" % (d, open(p).read()[-3000:]))
            failed += 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or passed == 0 else 0


def main():
    if not SERVERS:
        print("redis_integration.py must run under tests/redis/redis-servers.sh")
        return 1
    return run_all(TESTS, "rltd-redis-", sys.argv[3:])

if __name__ == "__main__":
    sys.exit(main())
