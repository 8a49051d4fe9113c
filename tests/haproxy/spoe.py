#!/usr/bin/env python3
"""ratelimitd as HAProxy's SPOE agent, against the real HAProxy (Debian's 2.6): the daemon and
the HAProxy processes start on free loopback ports in a temp dir, from examples/haproxy's
files with only the ports, paths and policies changed, and are always stopped.
Usage: spoe.py RATELIMITD REPO_ROOT [TEST_NAME...].  Prints ok/FAIL per test and
"N passed, N failed"."""
import concurrent.futures
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

BIN = os.path.abspath(sys.argv[1])
ROOT = os.path.abspath(sys.argv[2])
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
TESTS = []
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
                              r"WARNING: ThreadSanitizer")


def test(fn):
    TESTS.append(fn)
    return fn


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, tmp, spop_port=0, args=()):
        self.out = open(os.path.join(tmp, "d.out"), "w+")
        self.err = open(os.path.join(tmp, "d.err"), "a+")
        self.p = subprocess.Popen([BIN, "--port", "-1", "--http-port", "0", "--grpc-port", "-1",
                                   "--spop-port", str(spop_port), "--no-snapshot",
                                   "--threads", "2", *args],
                                  cwd=tmp, stdout=self.out, stderr=self.err)
        deadline = time.time() + 10
        while time.time() < deadline:
            self.out.seek(0)
            m = re.search(r"http [^ ]+:(\d+) .*spop [^ ]+:(\d+)", self.out.read())
            if m:
                self.http, self.spop = int(m.group(1)), int(m.group(2))
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("ratelimitd did not start")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        # Under the sanitizer builds (ctest --preset asan) a report fails the test.
        self.err.seek(0)
        report = SANITIZER_REPORT.search(self.err.read())
        assert report is None, "ratelimitd's stderr has a sanitizer report"


def haproxy(tmp, name, spop_port, policy, args, extra=""):
    """One HAProxy from examples/haproxy, its site on a free port; returns (Popen, port)."""
    site, app = free_port(), free_port()
    cfg = open(os.path.join(ROOT, "examples/haproxy/haproxy.cfg")).read()
    spoe = open(os.path.join(ROOT, "examples/haproxy/spoe-ratelimit.conf")).read()
    spoe_path = os.path.join(tmp, name + "-spoe.conf")
    cfg = cfg.replace("/etc/haproxy/spoe-ratelimit.conf", spoe_path)
    cfg = cfg.replace("127.0.0.1:8000", "127.0.0.1:%d" % site)
    cfg = cfg.replace("127.0.0.1:9000", "127.0.0.1:%d" % app)
    cfg = cfg.replace("127.0.0.1:12345", "127.0.0.1:%d" % spop_port)
    cfg = cfg.replace("check inter 2s", "check inter 200ms fall 1 rise 1")
    # On a busy test machine 50 ms can pass: the request would go through unchecked (fail
    # open, as documented), and the exact counts below would not hold.
    spoe = spoe.replace("timeout processing 50ms", "timeout processing 5s")
    cfg = cfg.replace("    default_backend app\n", extra + "    default_backend app\n")
    # The application: a frontend of the same HAProxy answering 200.
    cfg += ("\nfrontend app\n    bind 127.0.0.1:%d\n"
            "    http-request return status 200 content-type text/plain string ok\n" % app)
    if "policy=" not in args:
        args += " policy=str(%s)" % policy
    spoe = spoe.replace("args addr=src policy=str(gcra:100/1m) cost=int(1)",
                        "args " + args + " cost=int(1)")
    assert "args " + args in spoe, "examples/haproxy/spoe-ratelimit.conf changed"
    path = os.path.join(tmp, name + ".cfg")
    open(path, "w").write(cfg)
    open(spoe_path, "w").write(spoe)
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = subprocess.Popen([HAPROXY, "-db", "-f", path], stdout=log, stderr=log)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", site), 0.2).close()
            return p, site
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("haproxy exited: " + open(log.name).read())
            time.sleep(0.05)
    raise RuntimeError("haproxy did not listen")


def get(port, headers=None):
    """(status, lowercased headers) of GET / on the HAProxy at port."""
    req = urllib.request.Request("http://127.0.0.1:%d/" % port, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}


def wait_agent(port, headers=None):
    """Until HAProxy's requests carry the agent's answer (its check passed)."""
    deadline = time.time() + 15
    while time.time() < deadline:
        st, h = get(port, headers)
        if "ratelimit" in h:
            return
        time.sleep(0.1)
    raise AssertionError("the agent never answered through HAProxy")


class Setup:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="rlt-haproxy-")
        self.procs = []
        self.d = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.d:
            self.d.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


@test
def two_haproxies_share_one_exact_budget_with_headers_set():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        ports = []
        for name in ("a", "b"):
            p, port = haproxy(s.tmp, name, s.d.spop, "gcra:50/1d", "key=req.hdr(X-Key)")
            s.procs.append(p)
            ports.append(port)
        # Until each HAProxy reaches the agent, requests pass unchecked (fail open): wait on a
        # key of its own, so that the shared budget below is whole.
        for port in ports:
            wait_agent(port, {"X-Key": "probe-%d" % port})
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            res = list(ex.map(lambda i: get(ports[i % 2], {"X-Key": "site"}), range(1600)))
        allowed = [r for r in res if r[0] == 200]
        denied = [r for r in res if r[0] == 429]
        assert len(allowed) + len(denied) == 1600, set(r[0] for r in res)
        assert len(allowed) == 50, len(allowed)
        # Both served: each HAProxy answered 800, the 50 allowed among them.
        assert {r[0] for r in res[0::2]} | {r[0] for r in res[1::2]} == {200, 429}
        h = allowed[0][1]
        assert re.fullmatch(r'"inline";r=\d+;t=\d+', h["ratelimit"]), h
        assert h["ratelimit-policy"] == '"inline";q=50;w=86400', h
        h = denied[-1][1]
        assert h["ratelimit"].startswith('"inline";r=0;t='), h
        assert int(h["retry-after"]) > 0, h
        # Every NOTIFY's service time is in /metrics' histogram: 1,600 and the probes.
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % s.d.http, timeout=10) as r:
            m = r.read().decode()
        count = int(re.search(r"^ratelimitd_spop_notify_seconds_count (\d+)$", m, re.M)[1])
        inf = int(re.search(r'^ratelimitd_spop_notify_seconds_bucket\{le="\+Inf"\} (\d+)$', m,
                            re.M)[1])
        assert 1600 < count < 1700 and inf == count, (count, inf)
        total = float(re.search(r"^ratelimitd_spop_notify_seconds_sum (\S+)$", m, re.M)[1])
        assert 0 < total < count, total  # each under a second


@test
def agent_down_lets_requests_through_with_the_error_set_and_limits_return_after_restart():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        spop = s.d.spop
        extra = ("    http-response set-header X-RL-Error %[var(txn.rl.error)] "
                 "if { var(txn.rl.error) -m found }\n")
        p, port = haproxy(s.tmp, "a", spop, "gcra:5/1d", "key=str(site)", extra)
        s.procs.append(p)
        wait_agent(port)
        codes = [get(port)[0] for _ in range(10)]
        assert codes.count(200) == 4 and codes.count(429) == 6, codes  # wait_agent took one
        s.d.stop()
        # Down: every request passes (fail open), marked with the SPOE error.
        down = [get(port) for _ in range(30)]
        assert all(st == 200 for st, _ in down), [st for st, _ in down]
        assert all("x-rl-error" in h and "ratelimit" not in h for _, h in down[5:]), down[-1]
        s.d = Daemon(s.tmp, spop_port=spop)  # the same port, fresh state
        wait_agent(port)
        codes = [get(port)[0] for _ in range(10)]
        assert codes.count(200) == 4 and codes.count(429) == 6, codes


@test
def addresses_rotating_inside_one_48_get_the_48_limit_through_haproxy():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        p, port = haproxy(s.tmp, "a", s.d.spop, "gcra:20/1d", "addr=req.hdr(X-Client) prefix=int(48)")
        s.procs.append(p)
        wait_agent(port, {"X-Client": "2001:db8:ffff::1"})
        rnd = random.Random(48)
        addrs = set()
        while len(addrs) < 2000:
            addrs.add("2001:db8:77:%x:%x:%x:%x:%x" % tuple(rnd.getrandbits(16) for _ in range(5)))
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            res = list(ex.map(lambda a: get(port, {"X-Client": a})[0], sorted(addrs)))
        assert res.count(200) == 20 and res.count(429) == 1980, (res.count(200), res.count(429))
        # Another /48 has its own budget; an IPv4-mapped address is its IPv4 address.
        assert get(port, {"X-Client": "2001:db8:78::1"})[0] == 200
        rem = [get(port, {"X-Client": a})[1]["ratelimit"].split(";")[1]
               for a in ("192.0.2.1", "::ffff:192.0.2.1", "::ffff:c000:201")]
        assert rem == ["r=19", "r=18", "r=17"], rem
        # A malformed address is refused, never keyed as a string: the error variable is set.
        st, h = get(port, {"X-Client": "2001:db8::1::2"})
        assert "ratelimit" not in h, h


@test
def addresses_rotating_inside_one_48_get_the_48_limit_through_http():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        rnd = random.Random(4848)
        addrs = set()
        while len(addrs) < 2000:
            addrs.add("2001:db8:99:%x:%x:%x:%x:%x" % tuple(rnd.getrandbits(16) for _ in range(5)))

        def check(q):
            url = "http://127.0.0.1:%d/v1/check?%s" % (s.d.http, q)
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()
        q = "addr=%s&prefix=48&policy=gcra:20/1d"
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            res = list(ex.map(lambda a: check(q % urllib.parse.quote(a))[0], sorted(addrs)))
        assert res.count(200) == 20 and res.count(429) == 1980, (res.count(200), res.count(429))
        # The default /56: two addresses of one /56 share a key, the next /56 does not.
        p = "addr=%s&policy=gcra:1/1d"
        assert check(p % "2001:db8:5:100::1")[0] == 200
        assert check(p % "2001:db8:5:1ff:ffff::9")[0] == 429
        assert check(p % "2001:db8:5:200::1")[0] == 200
        # key= and addr= together: the key, ':', the address's key.
        assert check("key=api&addr=%3A%3Affff%3A10.0.0.1&policy=gcra:1/1d")[0] == 200
        assert check("key=api&addr=10.0.0.1&policy=gcra:1/1d")[0] == 429
        st, body = check("addr=2001:db8::1::2&policy=gcra:1/1d")
        assert st == 400 and b"malformed address" in body, (st, body)
        st, body = check("addr=10.0.0.1&prefix=20&policy=gcra:1/1d")
        assert st == 400 and b"prefix" in body, (st, body)


@test
def typed_addresses_from_haproxy_are_keyed_as_their_text():
    """req.hdr_ip sends HAProxy's ipv4/ipv6 types (as src does), not a string."""
    with Setup() as s:
        s.d = Daemon(s.tmp)
        p, port = haproxy(s.tmp, "a", s.d.spop, "gcra:2/1d",
                          "addr=req.hdr_ip(X-Client) prefix=int(48)")
        s.procs.append(p)
        wait_agent(port, {"X-Client": "2001:db8:ffff::1"})
        codes = [get(port, {"X-Client": x})[0]
                 for x in ("2001:db8:5:1::1", "2001:db8:5:ffff:1:2:3:4", "2001:db8:5::9",
                           "2001:db8:6::1", "192.0.2.7", "192.0.2.7", "192.0.2.7")]
        assert codes == [200, 200, 429, 200, 200, 200, 429], codes
        url = "http://127.0.0.1:%d/v1/peek?key=%s&policy=gcra:2/1d" % (
            s.d.http, urllib.parse.quote("2001:db8:6::/48", safe=""))
        with urllib.request.urlopen(url, timeout=10) as r:
            assert b'"remaining":1' in r.read()


@test
def nested_prefixes_are_decided_all_or_nothing_through_haproxy():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        args = "addr=req.hdr(X-Client) policy=str(gcra:5/1d) prefix=int(64) " \
               "policy=str(gcra:8/1d) prefix=int(48)"
        p, port = haproxy(s.tmp, "a", s.d.spop, "gcra:1000/1d", args)
        s.procs.append(p)
        wait_agent(port, {"X-Client": "2001:db8:ffff::1"})
        a = ["2001:db8:1:1::%x" % i for i in range(6)]  # one /64
        b = ["2001:db8:1:2::%x" % i for i in range(6)]  # another /64 of the same /48
        codes = [get(port, {"X-Client": x})[0] for x in a]
        assert codes == [200] * 5 + [429], codes  # the /64's 5
        codes = [get(port, {"X-Client": x})[0] for x in b]
        # The /48 has 3 left (8 - 5): the /64 of b is charged only for what the /48 allowed,
        # so after the /48 refuses, b's /64 still has 2 (a refused request charged nothing).
        assert codes == [200] * 3 + [429] * 3, codes
        st, h = get(port, {"X-Client": b[0]})
        assert st == 429 and h["ratelimit-policy"].startswith('"inline";q=8'), h
        url = "http://127.0.0.1:%d/v1/peek?key=%s&policy=gcra:5/1d" % (
            s.d.http, urllib.parse.quote("2001:db8:1:2::/64", safe=""))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read()
        assert b'"remaining":2' in body, body


@test
def nested_prefixes_are_decided_all_or_nothing_through_http():
    """/v1/check with policy= repeated: a /64, a /48 and a /32, each its own limit, one call."""
    with Setup() as s:
        s.d = Daemon(s.tmp)

        def check(addr, extra=""):
            q = "addr=%s&policy=gcra:5/1d&prefix=64&policy=gcra:8/1d&prefix=48" \
                "&policy=gcra:30/1d&prefix=32%s" % (urllib.parse.quote(addr), extra)
            url = "http://127.0.0.1:%d/v1/check?%s" % (s.d.http, q)
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    return r.status, json.loads(r.read()), r.headers
            except urllib.error.HTTPError as e:
                body = e.read()
                return e.code, json.loads(body) if e.code == 429 else body, e.headers
        a = ["2001:db8:1:1::%x" % i for i in range(6)]  # one /64
        b = ["2001:db8:1:2::%x" % i for i in range(6)]  # another /64 of the same /48
        res = [check(x) for x in a]
        assert [r[0] for r in res] == [200] * 5 + [429], [r[0] for r in res]
        assert res[0][1]["refused_index"] == -1 and res[-1][1]["refused_index"] == 0, res
        assert res[-1][2]["RateLimit-Policy"] == '"inline";q=5;w=86400', res[-1][2]
        res = [check(x) for x in b]
        # The /48 has 3 left (8 - 5); what it refuses charges neither the /64 nor the /32.
        assert [r[0] for r in res] == [200] * 3 + [429] * 3, [r[0] for r in res]
        assert res[-1][1]["refused_index"] == 1, res[-1]
        assert res[-1][2]["RateLimit-Policy"] == '"inline";q=8;w=86400', res[-1][2]
        url = "http://127.0.0.1:%d/v1/peek?key=%s&policy=gcra:5/1d" % (
            s.d.http, urllib.parse.quote("2001:db8:1:2::/64", safe=""))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read()
        assert b'"remaining":2' in body, body
        # HEAD charges nothing: the /64 of b still has 2 after it.
        req = urllib.request.Request("http://127.0.0.1:%d/v1/check?addr=%s&policy=gcra:5/1d"
                                     "&prefix=64&policy=gcra:8/1d&prefix=48" % (
                                         s.d.http, urllib.parse.quote(b[0])), method="HEAD")
        try:
            urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as e:
            assert e.code == 429, e.code
        with urllib.request.urlopen(url, timeout=10) as r:
            assert b'"remaining":2' in r.read()
        # An attacker rotating 2,000 addresses over many /64s of one /48, 8 at a time: the
        # /48's 8, whatever the /64s; two more /48s of the same /32 take 8 and then the /32's
        # last 6 (30 - 5 - 3 - 8 - 8).
        rnd = random.Random(6448)
        allowed = []
        for net in ("2001:db8:2", "2001:db8:3", "2001:db8:4"):
            addrs = ["%s:%x:%x:%x:%x:%x" % ((net,) + tuple(rnd.getrandbits(16) for _ in range(5)))
                     for _ in range(2000)]
            with concurrent.futures.ThreadPoolExecutor(8) as ex:
                res = list(ex.map(check, addrs))
            assert all(r[0] in (200, 429) for r in res), set(r[0] for r in res)
            allowed.append(sum(r[0] == 200 for r in res))
            last = res[-1][1]["refused_index"]
        assert allowed == [8, 8, 6], allowed
        assert last == 2, last  # the /32 refuses at the end
        # Bad forms: a clear 400 each.
        for extra, why in (("&policy=gcra:1/1d" * 6, b"at most 8 policies"),
                           ("&prefix=40", b"prefix must be"),
                           ("&reserve=1", b"reserve=1 takes one policy")):
            st, body, _ = check("2001:db8:9::1", extra)
            assert st == 400 and why in body, (extra, st, body)
        st, body, _ = check("2001:db8:9::1::2")
        assert st == 400 and b"malformed address" in body, (st, body)
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v1/peek?key=k&policy=a&policy=b"
                                   % s.d.http, timeout=10)
            assert False, "peek took two policies"
        except urllib.error.HTTPError as e:
            assert e.code == 400, e.code


@test
def a_password_is_a_message_argument():
    with Setup() as s:
        s.d = Daemon(s.tmp, args=("--password", "s3cret"))
        c = socket.create_connection(("127.0.0.1", s.d.spop), 5)
        c.sendall(HELLO)
        assert read_frame(c)[0] == 101

        def ask(fid, pw):
            msg = sbytes(b"m") + bytes([3 if pw is not None else 2]) + \
                sbytes(b"key") + b"\x08" + sbytes(b"k") + \
                sbytes(b"policy") + b"\x08" + sbytes(b"gcra:5/1d")
            if pw is not None:
                msg += sbytes(b"password") + b"\x08" + sbytes(pw)
            c.sendall(frame(3, msg, 1, fid))
            return read_frame(c)
        for fid, pw in ((1, None), (2, b"wrong")):
            a = ask(fid, pw)
            assert b"NOAUTH missing or wrong password" in a and b"allowed" not in a, a
        assert b"allowed" in ask(3, b"s3cret")
        # The connection is now authenticated, as a RESP connection after AUTH.
        assert b"allowed" in ask(4, None)
        c.close()


# ---- bad frames on a raw connection ----------------------------------------------------------

def varint(v):
    if v < 240:
        return bytes([v])
    out = [(v | 240) & 0xff]
    v = (v - 240) >> 4
    while v >= 128:
        out.append((v | 128) & 0xff)
        v = (v - 128) >> 7
    out.append(v)
    return bytes(out)


def sbytes(b):
    return varint(len(b)) + b


def frame(ftype, payload=b"", sid=0, fid=0, flags=1):
    body = bytes([ftype]) + struct.pack(">I", flags) + varint(sid) + varint(fid) + payload
    return struct.pack(">I", len(body)) + body


def hello(max_frame=16380):
    return frame(1, sbytes(b"supported-versions") + b"\x08" + sbytes(b"2.0") +
                 sbytes(b"max-frame-size") + b"\x03" + varint(max_frame) +
                 sbytes(b"capabilities") + b"\x08" + sbytes(b"pipelining"))


HELLO = hello()


def notify(sid, fid, key=b"raw", policy=b"gcra:3/1d"):
    msg = sbytes(b"m") + bytes([2]) + sbytes(b"key") + b"\x08" + sbytes(key) + \
        sbytes(b"policy") + b"\x08" + sbytes(policy)
    return frame(3, msg, sid, fid)


def read_frame(sock):
    def exact(n):
        b = b""
        while len(b) < n:
            c = sock.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return b
    n = struct.unpack(">I", exact(4))[0]
    return exact(n)


def disconnect_status(sock):
    """The status-code of the AGENT-DISCONNECT read next, then checks the connection closes."""
    f = read_frame(sock)
    assert f[0] == 102, f
    i = f.index(b"status-code") + len(b"status-code") + 1
    assert f[i - 1] == 3  # uint32
    status = f[i]
    assert sock.recv(100) == b""
    return status


@test
def malformed_frames_get_the_right_disconnect_status_and_others_are_served():
    with Setup() as s:
        s.d = Daemon(s.tmp)
        good = socket.create_connection(("127.0.0.1", s.d.spop), 5)
        good.sendall(HELLO)
        assert read_frame(good)[0] == 101
        cases = [
            ("notify before hello", notify(1, 1), 4, False),
            ("unknown type", frame(42), 4, True),
            ("frame over the agreed size", struct.pack(">I", 16381) + b"\x03", 3, True),
            ("length past the data", frame(3, b"", 1, 1)[:-2] + b"", None, True),
            ("huge varint", struct.pack(">I", 16) + b"\x03\x00\x00\x00\x01" + b"\xff" * 11, 4,
             True),
            ("fragmented notify", frame(3, b"", 1, 1, flags=0), 10, True),
            ("payload past its frame", frame(3, sbytes(b"m") + b"\x01" + sbytes(b"key") +
                                          b"\x08\x40ab", 1, 1), 4, True),
            ("unknown data type", frame(3, sbytes(b"m") + b"\x01" + sbytes(b"key") + b"\x0e",
                                        1, 1), 4, True),
            ("hello without version", frame(1, sbytes(b"max-frame-size") + b"\x03" +
                                            varint(16380)), 5, False),
            ("hello with version 1", frame(1, sbytes(b"supported-versions") + b"\x08" +
                                           sbytes(b"1.0") + sbytes(b"max-frame-size") + b"\x03"
                                           + varint(16380) + sbytes(b"capabilities") + b"\x08"
                                           + sbytes(b"")), 8, False),
        ]
        for name, data, want, after_hello in cases:
            c = socket.create_connection(("127.0.0.1", s.d.spop), 5)
            if after_hello:
                c.sendall(HELLO)
                assert read_frame(c)[0] == 101
            c.sendall(data)
            if want is None:  # a partial frame waits: the connection stays, nothing answered
                c.settimeout(0.3)
                try:
                    assert c.recv(10) == b"", name
                except socket.timeout:
                    pass
            else:
                got = disconnect_status(c)
                assert got == want, (name, got, want)
            c.close()
        # Under a 256-byte max-frame-size, answers that cannot fit one ACK: status 3.
        c = socket.create_connection(("127.0.0.1", s.d.spop), 5)
        c.sendall(hello(256))
        assert read_frame(c)[0] == 101
        msg = sbytes(b"m") + b"\x01" + sbytes(b"zz") + b"\x08" + sbytes(b"")
        c.sendall(frame(3, msg * 6, 1, 1))
        assert disconnect_status(c) == 3
        c.close()
        # The good connection, pipelined: three NOTIFYs at once, ACKed by their ids.
        good.sendall(notify(7, 1) + notify(7, 2) + notify(8, 1))
        acks = [read_frame(good) for _ in range(3)]
        assert all(a[0] == 103 for a in acks), acks
        assert [a[5:7] for a in acks] == [b"\x07\x01", b"\x07\x02", b"\x08\x01"], acks
        assert all(b"allowed" in a for a in acks)
        # An unknown policy or a malformed address is answered with the error variable.
        good.sendall(notify(9, 1, policy=b"nosuch"))
        a = read_frame(good)
        assert b"error" in a and b"allowed" not in a, a
        good.sendall(notify(9, 3, policy=b"concurrency:2"))
        a = read_frame(good)
        assert b"a concurrency policy needs a release" in a and b"allowed" not in a, a
        msg = sbytes(b"m") + bytes([2]) + sbytes(b"addr") + b"\x08" + sbytes(b"1.2.3") + \
            sbytes(b"policy") + b"\x08" + sbytes(b"gcra:3/1d")
        good.sendall(frame(3, msg, 9, 2))
        a = read_frame(good)
        assert b'malformed address "1.2.3"' in a and b"allowed" not in a, a
        good.sendall(frame(2, sbytes(b"status-code") + b"\x03\x00" + sbytes(b"message") +
                           b"\x08" + sbytes(b"")))
        assert disconnect_status(good) == 0
        assert s.d.p.poll() is None


@test
def spop_connections_count_in_max_connections():
    with Setup() as s:
        s.d = Daemon(s.tmp, args=("--max-connections", "2"))
        held = []
        for _ in range(2):
            c = socket.create_connection(("127.0.0.1", s.d.spop), 5)
            c.sendall(HELLO)
            assert read_frame(c)[0] == 101
            held.append(c)
        extra = socket.create_connection(("127.0.0.1", s.d.spop), 5)
        assert disconnect_status(extra) == 13  # resource allocation: max number of clients
        held[0].close()
        deadline = time.time() + 5
        while True:  # the slot frees once the daemon has seen the close
            c = socket.create_connection(("127.0.0.1", s.d.spop), 5)
            c.sendall(HELLO)
            f = read_frame(c)
            if f[0] == 101 or time.time() > deadline:
                break
            c.close()
            time.sleep(0.05)
        assert f[0] == 101, f


def main():
    if not os.access(HAPROXY, os.X_OK):
        print("haproxy not found (Debian: apt-get install haproxy; scripts/deps installs it)")
        return 1
    names = sys.argv[3:]
    passed = failed = 0
    for t in TESTS:
        if names and t.__name__ not in names:
            continue
        try:
            t()
            print("ok   " + t.__name__)
            passed += 1
        except Exception:
            traceback.print_exc()
            print("FAIL " + t.__name__)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
