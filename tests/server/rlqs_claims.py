#!/usr/bin/env python3
"""RLQS Redis-mode claims under partial failure, end to end: two real ratelimitd on one private
redis-server (tests/redis/redis-servers.sh), each reaching it through its own small TCP proxy
that the test can cut, and grpcio streams acting as Envoys (rlqs_integration.py's Envoy and
Fleet).  One bucket, Q = 100/s, B = 20, `fail: local`, assignment TTL 1 s; two Envoys on each
daemon, each asking 100/s.  Each scenario is repeated 20 times on one pair of daemons:

  - one daemon's link cut (its proxy closes every connection and refuses new ones) for 0.3 to
    4.6 s while the other keeps Redis;
  - both daemons' links cut at once;
  - Redis restarted empty (stopped; an empty redis-server, no persistence, back behind the
    same address: the proxies');
  - junk written with redis-cli into the bucket's hash: over each daemon's field and as new
    fields (not numbers, negative, huge, too few), and the key replaced by a string.

The assertion is docs/envoy.md's bound for Redis mode: at every instant (sampled every 10 ms)
the sum of the rates of the token buckets the four Envoys hold is <= Q per second and the sum
of their bursts <= B, an answer being given 50 ms to land (it is sent as the ledger lowers a
share; the Envoy applies it when it arrives).  After the repetitions the fleet must be served
again (the sums back above Q / 2): safety by denying everything forever would pass the bound.

Usage: redis-servers.sh run standalone -- rlqs_claims.py PATH_TO_RATELIMITD [TEST_NAME...]"""
import bisect
import os
import random
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import integration as it  # noqa: E402
import rlqs_integration as rq  # noqa: E402  (Envoy, Fleet, B)
from rlqs_redis import SERVERS, BASE, SH  # noqa: E402  (redis-servers.sh's variables)

TESTS = []
REPS = int(os.environ.get("RLT_CLAIMS_REPS", "20"))
Q, BURST = 100.0, 20.0
KEY = rq.B(name="local")
LANDING = 0.05  # an answer's time from the daemon's write to the Envoy applying it


def test(fn):
    TESTS.append(fn)
    return fn


class Proxy:
    """A TCP proxy from a loopback port to Redis that can be cut: cut() closes every
    connection and refuses new ones (accepted and closed at once) until restore()."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.lock = threading.Lock()
        self.socks = []
        self.is_cut = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                if self.is_cut or self.closed:
                    c.close()
                    continue
                try:
                    u = socket.create_connection(self.upstream, timeout=2)
                except OSError:  # Redis itself down: the daemon sees a refused link
                    c.close()
                    continue
                u.settimeout(None)
                self.socks += [c, u]
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def _pump(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.is_cut = True
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self):
        with self.lock:
            self.is_cut = False

    def close(self):
        self.closed = True
        self.cut()
        self.ls.close()


REDIS = {}  # the Redis in use: "addr" (host, port) and "dir" (redis-servers.sh's)


def redis_addr():
    if not REDIS:
        host, port = SERVERS.split(",")[0].rsplit(":", 1)
        REDIS.update(addr=(host, int(port)), dir=os.path.join(BASE, "s0"))
    return REDIS["addr"]


def cli(*args):
    host, port = redis_addr()
    return subprocess.run(["redis-cli", "-h", host, "-p", str(port)] + list(args),
                          capture_output=True, text=True, timeout=10).stdout


CONFIG = """domain: q
quota_buckets:
  - match: {name: local}
    policy: token_bucket:100/1s,burst=20
    fail: local
    assignment_ttl: 1s
redis:
  address: "127.0.0.1:%d"
  timeout: 100ms
  backoff_min: 50ms
  backoff_max: 200ms
"""


class Rig:
    """Two daemons, each through its own proxy, two Envoys on each driven at 100/s, a thread
    driving them for as long as the rig runs."""

    def __init__(self, tmp):
        # the previous test's daemons' claims stay reserved for a claim's life: start empty
        cli("FLUSHALL")
        self.proxies = [Proxy(redis_addr()) for _ in range(2)]
        self.ds = []
        for i, p in enumerate(self.proxies):
            d = os.path.join(tmp, "d%d" % i)
            os.mkdir(d)
            self.ds.append(it.Daemon(d, "--no-snapshot", config=CONFIG % p.port))
        self.envoys = [rq.Envoy(d.grpc) for d in self.ds for _ in range(2)]
        self.fleet = rq.Fleet([], KEY)
        for e in self.envoys:
            self.fleet.add(e, 100.0)
        self.ids = []  # each daemon's field in the bucket's hash
        for d in self.ds:
            text = it.raw(d.port, it.resp("INFO"), wait=0.3).decode(errors="replace")
            self.ids += [line.split(":", 1)[1] for line in text.split("\r\n")
                         if line.startswith("rlqs_redis_server:")]
        assert len(self.ids) == 2, self.ids
        self.running = True
        self.th = threading.Thread(target=self._drive, daemon=True)
        self.th.start()

    def _drive(self):
        while self.running:
            self.fleet.run(0.2)

    def stop(self):
        self.running = False
        self.th.join(5)
        for e in self.envoys:
            e.close()
        for p in self.proxies:
            p.close()
        for d in self.ds:
            assert d.stop() == 0, d.stderr()


def sums_at(envoys, t):
    """The sums of the rates (tokens/s) and bursts of the token buckets in force at t."""
    rate = burst = 0.0
    for e in envoys:
        times, acts = e._claims_index
        i = bisect.bisect_right(times, t) - 1
        if i < 0:
            continue
        d = acts[i]
        if isinstance(d, dict) and d["kind"] == "tb" and t < d["at"] + d["ttl"]:
            rate += d["tpf"] / d["fill"]
            burst += d["max"]
    return rate, burst


def worst(envoys, t0, t1):
    """The largest sums over [t0, t1) every 10 ms, an answer given LANDING to land: (rate,
    burst, the instant of the worst rate)."""
    for e in envoys:
        with e.lock:
            log = [(at, d) for (at, k, d) in e.log if k == KEY]
        e._claims_index = ([at for at, _ in log], [d for _, d in log])
    wr = wb = 0.0
    when = t0
    t = t0
    while t < t1:
        r1, b1 = sums_at(envoys, t)
        r2, b2 = sums_at(envoys, t + LANDING)
        if min(r1, r2) > wr:
            wr, when = min(r1, r2), t
        wb = max(wb, min(b1, b2))
        t += 0.01
    return wr, wb, when


def served_again(rig, seconds=6.0):
    """Waits up to `seconds` for the sums to be back above Q / 2; returns the rate reached."""
    end = time.monotonic() + seconds
    best = 0.0
    while time.monotonic() < end:
        time.sleep(0.5)
        r, _ = sums_at_now(rig.envoys)
        best = max(best, r)
        if r >= Q / 2:
            return r
    return best


def sums_at_now(envoys):
    now = time.monotonic()
    for e in envoys:
        with e.lock:
            log = [(at, d) for (at, k, d) in e.log if k == KEY]
        e._claims_index = ([at for at, _ in log], [d for _, d in log])
    return sums_at(envoys, now)


def scenario(tmp, name, rep):
    """Runs rep(rig, i, rng) REPS times on one rig, then checks the bound over the whole run
    and that the fleet is served again."""
    rig = Rig(tmp)
    rng = random.Random(42)
    try:
        # both daemons claim and their Envoys get token buckets
        rq.wait_for(lambda: sums_at_now(rig.envoys)[0] >= Q / 2, timeout=10.0,
                    what="the fleet's token buckets before the scenario")
        t0 = time.monotonic()
        for i in range(REPS):
            rep(rig, i, rng)
        t_end = time.monotonic()
        again = served_again(rig)
        t1 = time.monotonic()
        wr, wb, when = worst(rig.envoys, t0, t1)
        print("    %s x %d (%.0f s): max sums %.1f/s at t0 + %.2f s, burst %d (Q %d, B %d); "
              "served again at %.0f/s" % (name, REPS, t_end - t0, wr, when - t0, wb, Q, BURST,
                                          again))
        assert wr <= Q + 1e-6 and wb <= BURST, (wr, wb, when - t0)
        assert again >= Q / 2, again
        for e in rig.envoys:
            assert e.error is None, e.error
    finally:
        rig.stop()


def cut_for(rng, i):
    """The i-th cut's length: mostly within a claim's life (4 s: the 1 s TTL + 1 s + fail:
    local's hold of 2 TTLs), every fifth past it (its field then expired when it is back)."""
    return rng.uniform(4.1, 4.6) if i % 5 == 4 else rng.uniform(0.3, 2.0)


@test
def one_daemons_link_cut_keeps_the_fleets_sums_within_the_budget(tmp):
    def rep(rig, i, rng):
        p = rig.proxies[i % 2]
        p.cut()
        time.sleep(cut_for(rng, i))
        p.restore()
        time.sleep(rng.uniform(0.2, 0.6))
    scenario(tmp, "one link cut", rep)


@test
def both_daemons_links_cut_keep_the_fleets_sums_within_the_budget(tmp):
    def rep(rig, i, rng):
        for p in rig.proxies:
            p.cut()
        time.sleep(cut_for(rng, i))
        order = rig.proxies if i % 2 else rig.proxies[::-1]
        order[0].restore()
        time.sleep(rng.uniform(0.0, 0.6))
        order[1].restore()
        time.sleep(rng.uniform(0.2, 0.6))
    scenario(tmp, "both links cut", rep)


@test
def redis_restarted_empty_keeps_the_fleets_sums_within_the_budget(tmp):
    def rep(rig, i, rng):
        # Redis stops; an empty one comes back behind the same address (the proxies'): a new
        # redis-server on a port of its own, as restarting on the old port can fail when
        # another test's server took it meanwhile.  The proxies refuse the daemons' links
        # while none answers, as a closed port would.
        redis_addr()
        for p in rig.proxies:
            p.cut()
        subprocess.run(["sh", SH, "stop", REDIS["dir"]], check=True, timeout=30)
        time.sleep(rng.uniform(0.0, 1.0))
        REDIS["dir"] = os.path.join(BASE, "s%d" % (i + 1))  # stopped at exit as s0 is
        subprocess.run(["sh", SH, "start", REDIS["dir"]], check=True, timeout=30)
        with open(os.path.join(REDIS["dir"], "port")) as f:
            REDIS["addr"] = ("127.0.0.1", int(f.read()))
        for p in rig.proxies:
            p.upstream = REDIS["addr"]
            p.restore()
        time.sleep(rng.uniform(0.2, 0.6))
    scenario(tmp, "Redis restarted empty", rep)


JUNK = ["garbage", "-1 50 10 99999999999", "1 99999999999999999999 20 99999999999",
        "5 5 5", "", "1 100 20 1e30", "0x10 0 0 0"]


@test
def junk_in_the_quota_hash_keeps_the_fleets_sums_within_the_budget(tmp):
    def rep(rig, i, rng):
        keys = [k for k in cli("--scan", "--pattern", "*rlqs:*").split() if k]
        if i % 5 == 4:  # the whole key replaced by a string, then deleted
            for k in keys:
                cli("SET", k, "junk")
            time.sleep(rng.uniform(0.2, 1.0))
            for k in keys:
                cli("DEL", k)
        else:
            ids = rig.ids
            fields = [ids[i % 2], ids[(i + 1) % 2], "junk%d" % i]
            for k in keys:
                cli("HSET", k, fields[i % 3], JUNK[i % len(JUNK)])
        time.sleep(rng.uniform(0.3, 1.2))
    scenario(tmp, "junk written", rep)


def main():
    it.BIN = os.path.abspath(sys.argv[1])
    if not SERVERS:
        print("FAIL rlqs_claims: run under tests/redis/redis-servers.sh (RLT_REDIS_SERVERS unset)")
        return 1
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltqc-")


if __name__ == "__main__":
    sys.exit(main())
