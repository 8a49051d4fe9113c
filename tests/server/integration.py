#!/usr/bin/env python3
"""Integration tests of ratelimitd: start the real daemon on ephemeral loopback ports (port 0,
parsing the printed ports) in a temp dir, drive it with redis-cli, a raw RESP socket client and
curl, and always clean up.  Usage: integration.py PATH_TO_RATELIMITD [TEST_NAME...].
Prints "ok NAME" / "FAIL NAME" per test and "N passed, N failed"."""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

BIN = os.path.abspath(sys.argv[1])
TESTS = []
# Under ThreadSanitizer (RLT_SANITIZE=thread, set by CTest) the daemon runs 5-15x slower: the
# heaviest loads are scaled down, and a race report stops the daemon (halt_on_error) so that
# the test that caused it fails.  Every daemon's stderr is checked for sanitizer reports.
TSAN = "thread" in os.environ.get("RLT_SANITIZE", "")
if TSAN:
    os.environ["TSAN_OPTIONS"] = os.environ.get("TSAN_OPTIONS", "") + \
        " halt_on_error=1 exitcode=66 second_deadlock_stack=1"
SCALE = 10 if TSAN else 1
SANITIZER_REPORT = re.compile(r"WARNING: ThreadSanitizer|ERROR: AddressSanitizer|"
                              r"runtime error:|ERROR: LeakSanitizer")


def test(fn):
    TESTS.append(fn)
    return fn


class Daemon:
    def __init__(self, tmp, *args, config=None, expect_fail=False):
        self.tmp = tmp
        cmd = [BIN, "--port", "0", "--http-port", "0", "--grpc-port", "0", "--bind", "127.0.0.1", "--threads", "2"]
        if config is not None:
            path = os.path.join(tmp, "ratelimitd.yaml")
            with open(path, "w") as f:
                f.write(config)
            cmd += ["--config", path]
            self.config_path = path
        cmd += list(args)
        self.out = open(os.path.join(tmp, "stdout"), "w+")
        self.err = open(os.path.join(tmp, "stderr"), "w+")
        self.p = subprocess.Popen(cmd, cwd=tmp, stdout=self.out, stderr=self.err)
        self.port = self.http = self.grpc = None
        deadline = time.time() + 10
        while time.time() < deadline:
            self.out.seek(0)
            m = re.search(r"resp [^ ]+:(\d+) http [^ ]+:(\d+)", self.out.read())
            if m:
                self.port, self.http = int(m.group(1)), int(m.group(2))
                g = re.search(r"grpc [^ ]+:(\d+)", m.string)
                self.grpc = int(g.group(1)) if g else None
                return
            if self.p.poll() is not None:
                if expect_fail:
                    return
                raise AssertionError("daemon exited: " + self.stderr())
            time.sleep(0.02)
        raise AssertionError("daemon did not print its ports")

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        m = SANITIZER_REPORT.search(self.stderr())
        if m:
            raise AssertionError("sanitizer report from the daemon:\n" + self.stderr()[-4000:])
        return self.p.returncode

    def cli(self, *args, password=None):
        cmd = ["redis-cli", "-p", str(self.port)]
        if password:
            cmd += ["--no-auth-warning", "-a", password]
        r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                           timeout=10)
        return r.stdout.strip()

    def curl(self, path, *extra):
        r = subprocess.run(["curl", "-s", "-i", "--max-time", "5"] + list(extra) +
                           ["http://127.0.0.1:%d%s" % (self.http, path)], capture_output=True,
                           text=True, timeout=10)
        return r.stdout


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def raw(port, data, wait=1.0, chunks=None):
    """Sends data (or each chunk), returns everything read until close or `wait` of silence."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        for c in (chunks or [data]):
            s.sendall(c)
        s.settimeout(wait)
        got = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                got += b"<closed>"
                break
            got += b
        return got
    finally:
        s.close()


def ints(text):
    return [int(x) for x in text.split()]


def start_of_a_second():
    """Sleep to 20 ms past the next UTC second: fixed windows of 1 s are UTC seconds, and
    requests meant to share one must not straddle its edge (slow under TSan)."""
    time.sleep(1.02 - time.time() % 1)


# ---------------------------------------------------------------------------------------------

@test
def cl_throttle_via_redis_cli_replies_five_integers(tmp):
    d = Daemon(tmp)
    try:
        assert d.cli("PING") == "PONG"
        r = ints(d.cli("CL.THROTTLE", "user123", 15, 30, 60, 1))
        assert r == [0, 16, 15, -1, 2], r
        for _ in range(15):
            d.cli("CL.THROTTLE", "user123", 15, 30, 60, 1)
        r = ints(d.cli("CL.THROTTLE", "user123", 15, 30, 60, 1))
        assert r[0] == 1 and r[2] == 0 and r[3] >= 1, r
    finally:
        d.stop()


@test
def pipelined_commands_all_get_replies_in_order(tmp):
    d = Daemon(tmp)
    try:
        n = 500
        data = b"".join(resp("CL.THROTTLE", "p%d" % i, 0, 1, 60) for i in range(n))
        data += resp("PING")
        got = raw(d.port, data, wait=0.5)
        assert got.count(b"*5\r\n:0\r\n:1\r\n") == n, got[:200]
        assert got.endswith(b"+PONG\r\n"), got[-50:]
    finally:
        d.stop()


class Replies:
    """Reads RESP2 replies (simple, error, integer, bulk, array) from a socket."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            b = self.s.recv(65536)
            if not b:
                raise AssertionError("connection closed")
            self.buf += b
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def one(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"*":
            return [self.one() for _ in range(int(rest))]
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        return line  # b"+OK" or b"-ERR ..."


def random_commands(rng, n):
    """Commands on 8 overlapping keys: decisions, resets, peeks, errors, pings."""
    pol = "gcra:1/1h,burst=4"
    out = []
    for _ in range(n):
        k = "k%d" % rng.randrange(8)
        r = rng.random()
        if r < 0.45:
            out.append(["CL.THROTTLE", k, 3, 1, 3600] + ([rng.randrange(3)] if rng.random() < .5
                                                         else []))
        elif r < 0.70:
            out.append(["RL.CHECK", k, pol, rng.randrange(3)])
        elif r < 0.75:
            out.append(["RL.PEEK", k, pol])
        elif r < 0.80:
            out.append(["RL.RESET", k, pol])
        elif r < 0.85:
            out.append(["CL.THROTTLE", k, 3, 0, 3600])  # count 0: an error reply
        elif r < 0.90:
            out.append(["RL.CHECK", k, "nosuchpolicy"])  # an error reply
        else:
            out.append(["PING"])
    return out


def same_decision(a, b, cmd):
    """Equal replies, allowing the time fields to differ by the test's own duration."""
    if not isinstance(a, list) or not isinstance(b, list):
        return a == b
    if len(a) != len(b) or a[:3] != b[:3]:
        return False
    slack = 60 if cmd == "CL.THROTTLE" else 60000  # seconds / milliseconds
    return all(abs(x - y) <= slack for x, y in zip(a[3:], b[3:]))


@test
def a_pipeline_gets_the_replies_of_the_same_commands_sent_one_by_one(tmp):
    # One daemon, two key spaces: the pipeline (one write of 3000 commands, split by TCP into
    # many reads, commands cut at read boundaries) on p:*, the serial run on s:*.
    d = Daemon(tmp)
    try:
        cmds = random_commands(random.Random(5), 3000 // SCALE)

        def keyed(c, prefix):
            return c if len(c) == 1 else [c[0], prefix + c[1]] + c[2:]

        piped = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        piped.sendall(b"".join(resp(*keyed(c, "p:")) for c in cmds))
        rp = Replies(piped)
        got_p = [rp.one() for _ in cmds]
        piped.close()
        serial = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        rs = Replies(serial)
        got_s = []
        for c in cmds:
            serial.sendall(resp(*keyed(c, "s:")))
            got_s.append(rs.one())
        serial.close()
        kinds = set()
        for i, (a, b) in enumerate(zip(got_p, got_s)):
            assert same_decision(a, b, cmds[i][0]), (i, cmds[i], a, b)
            if isinstance(a, list):
                kinds.add(a[0])
            elif isinstance(a, bytes):
                kinds.add(a[:4])
        # Both outcomes and the error replies occurred (the comparison was not vacuous).
        assert {0, 1, b"-ERR", b"+PON"} <= kinds, kinds
    finally:
        d.stop()


@test
def a_protocol_error_in_a_pipeline_comes_after_the_earlier_replies(tmp):
    d = Daemon(tmp, "--threads", "1")
    try:
        data = b"".join(resp("CL.THROTTLE", "e%d" % (i % 3), 1, 1, 60) for i in range(40))
        got = raw(d.port, data + b"*1\r\n$x\r\n", wait=2.0)
        assert got.count(b"*5\r\n") == 40, got[:200]
        assert got.endswith(b"-ERR Protocol error: invalid bulk length\r\n<closed>"), got[-80:]
        assert got.index(b"-ERR") > got.rindex(b"*5\r\n")
    finally:
        d.stop()


@test
def redis_benchmark_pipelined_works(tmp):
    d = Daemon(tmp)
    try:
        n = 20000 // SCALE
        r = subprocess.run(["redis-benchmark", "-p", str(d.port), "-c", "10", "-n", str(n),
                            "-P", "16", "-r", "1000", "-q", "CL.THROTTLE", "k:__rand_int__",
                            "10", "10", "1"], capture_output=True, text=True, timeout=60)
        assert "requests per second" in r.stdout, r.stdout + r.stderr
        info = d.cli("INFO")
        m = re.search(r"total_commands_processed:(\d+)", info)
        assert m and int(m.group(1)) >= n, info
    finally:
        d.stop()


@test
def bad_input_gets_an_error_and_the_connection_closes(tmp):
    d = Daemon(tmp)
    try:
        vectors = [
            (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length"),
            (b"*1\r\n$99999999999\r\n", b"-ERR Protocol error: invalid bulk length"),
            (b"*-7\r\n", b"-ERR Protocol error: invalid multibulk length"),
            (b"*99999999\r\n", b"-ERR Protocol error: too many arguments"),
            (b"*1\r\n$4\r\nPINGxx\r\n", b"-ERR Protocol error: expected CRLF"),
            (b"*1\r\n:4\r\n", b"-ERR Protocol error: expected '$'"),
            (b"PING \"unbalanced\r\n", b"-ERR Protocol error: unbalanced quotes"),
            (b"*2\r\n$1\r\nx" + b"\r\n" + b"A" * 70000, b"-ERR Protocol error"),
            (b"A" * 70000, b"-ERR Protocol error: too big inline request"),
        ]
        for data, want in vectors:
            got = raw(d.port, data)
            assert got.startswith(want), (data[:40], got[:200])
            assert got.endswith(b"<closed>"), (data[:40], got[-40:])
        # the daemon survived all of that
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def bad_numbers_get_clear_errors_and_the_connection_stays(tmp):
    d = Daemon(tmp)
    try:
        cmds = [("CL.THROTTLE", "k", "9223372036854775807", 1, 1),
                ("CL.THROTTLE", "k", "1e309", 1, 1), ("CL.THROTTLE", "k", "-0", 1, 1),
                ("CL.THROTTLE", "k", "0x10", 1, 1), ("CL.THROTTLE", "k", 1, 0, 1),
                ("CL.THROTTLE", "k", 1, -1, 1), ("CL.THROTTLE", "k", 1, 1, 0),
                ("CL.THROTTLE", "k"), ("RL.CHECK", "k", "gcra:0/1s"),
                ("RL.CHECK", "k", "gcra:-5/1s"), ("RL.CHECK", "k", "default", "-1"),
                ("RL.CHECK", "", "default"), ("RL.CHECK", "k" * 600, "default")]
        data = b"".join(resp(*c) for c in cmds) + resp("PING")
        got = raw(d.port, data, wait=0.5)
        lines = got.split(b"\r\n")
        errs = [l for l in lines if l.startswith(b"-ERR")]
        assert len(errs) == len(cmds), got
        assert got.endswith(b"+PONG\r\n"), got
        assert b"unknown command 'NOPE'" in raw(d.port, b"NOPE\r\n", wait=0.3)
    finally:
        d.stop()


@test
def slow_clients_are_closed_after_the_deadline(tmp):
    d = Daemon(tmp, config="server:\n  client_timeout: 1s\n")
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        start = time.time()
        closed = False
        try:
            for b in b"*1\r\n$4\r\nPI":
                s.sendall(bytes([b]))
                time.sleep(0.25)
            s.settimeout(3)
            closed = s.recv(100) in (b"",) or True
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        s.close()
        assert closed and time.time() - start < 8
        # a client that sends part of a command and goes silent is closed too
        got = raw(d.port, b"*1\r\n$4\r\nPI", wait=3)
        assert got.endswith(b"<closed>"), got
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def connections_beyond_the_cap_are_refused(tmp):
    d = Daemon(tmp, "--max-connections", "3")
    try:
        socks = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(3)]
        time.sleep(0.2)
        got = raw(d.port, b"PING\r\n", wait=1)
        assert got.startswith(b"-ERR max number of clients reached"), got
        for s in socks:
            s.close()
        time.sleep(0.3)
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def clients_that_never_read_are_dropped_at_the_output_cap(tmp):
    d = Daemon(tmp, config="server:\n  max_output_buffer: 65536\n")
    try:
        s = socket.create_connection(("127.0.0.1", d.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        payload = resp("PING", "x" * 4000) * 64
        dropped = False
        try:
            for _ in range(400):
                s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
        s.close()
        assert dropped
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def http_check_answers_429_with_retry_after_and_ietf_fields(tmp):
    d = Daemon(tmp)
    try:
        r1 = d.curl("/v1/check?key=u1&policy=gcra:1/1m")
        assert r1.startswith("HTTP/1.1 200"), r1
        assert 'RateLimit-Policy: "inline";q=1;w=60' in r1, r1
        r2 = d.curl("/v1/check?key=u1&policy=gcra:1/1m")
        assert r2.startswith("HTTP/1.1 429"), r2
        assert re.search(r"Retry-After: (5\d|60)\s", r2), r2
        assert '"allowed":false' in r2
        r3 = d.curl("/v1/check", "-X", "POST", "--data", "key=u2&policy=default&cost=2")
        assert r3.startswith("HTTP/1.1 200"), r3
        assert d.curl("/v1/check?policy=default").startswith("HTTP/1.1 400")
        assert d.curl("/healthz").startswith("HTTP/1.1 200")
        m = d.curl("/metrics")
        assert "ratelimitd_decisions_total{outcome=\"denied\"} 1" in m, m
        assert "ratelimitd_command_seconds_bucket" in m
        assert d.curl("/nope").startswith("HTTP/1.1 404")
    finally:
        d.stop()


@test
def priority_classes_keep_the_reserve_for_critical_on_resp_and_http(tmp):
    d = Daemon(tmp)
    try:
        conc = "concurrency:10/5m"
        shed = [d.cli("RL.ACQUIRE", "svc", conc, "CLASS", "sheddable", "RESERVE", 20).split()[0]
                for _ in range(8)]
        assert shed == ["1"] * 6 + ["0"] * 2, shed
        crit = [d.cli("RL.ACQUIRE", "svc", conc, "CLASS", "critical", "RESERVE", 20).split()[0]
                for _ in range(5)]
        assert crit == ["1"] * 4 + ["0"], crit
        assert "unknown class" in d.cli("RL.ACQUIRE", "svc", conc, "CLASS", "urgent")
        q = "/v1/check?key=u&policy=fixed_window:10/1h&class_reserve=20&class="
        codes = [d.curl(q + "sheddable").split(" ")[1] for _ in range(8)]
        assert codes == ["200"] * 6 + ["429"] * 2, codes
        r = d.curl(q + "critical")
        assert r.startswith("HTTP/1.1 200") and '"remaining":3' in r, r
        assert d.curl(q + "urgent").startswith("HTTP/1.1 400")
    finally:
        d.stop()


@test
def penalty_box_denies_every_request_until_its_end_on_resp_and_http(tmp):
    d = Daemon(tmp, config="policies:\n  login: fixed_window:2/1s,block=10m\n")
    try:
        # RESP: the third request in a second breaches; the key is then blocked for 10 minutes
        # whatever the window says, with retry_after to the block's end; RL.RESET lifts it.
        pol = "fixed_window:1/1s,block=10m"
        start_of_a_second()
        assert ints(d.cli("RL.CHECK", "r1", pol))[0] == 1
        a = ints(d.cli("RL.CHECK", "r1", pol))
        assert a[0] == 0 and 599000 <= a[3] <= 600000 and a[2] == 0, a
        time.sleep(1.1)  # a new window: without the box this would pass
        b = ints(d.cli("RL.CHECK", "r1", pol))
        assert b[0] == 0 and 597000 <= b[3] < a[3], (a, b)
        assert ints(d.cli("RL.PEEK", "r1", pol))[0] == 0
        assert d.cli("RL.RESET", "r1", pol) == "1"
        assert ints(d.cli("RL.CHECK", "r1", pol))[0] == 1
        # HTTP, a named policy: 429 with Retry-After to the block's end.
        start_of_a_second()
        for _ in range(2):
            assert d.curl("/v1/check?key=h1&policy=login").startswith("HTTP/1.1 200")
        r = d.curl("/v1/check?key=h1&policy=login")
        assert r.startswith("HTTP/1.1 429"), r
        assert re.search(r"Retry-After: (599|600)\s", r), r
        time.sleep(1.1)
        r = d.curl("/v1/check?key=h1&policy=login")
        assert r.startswith("HTTP/1.1 429") and re.search(r"Retry-After: 59\d\s", r), r
    finally:
        d.stop()


@test
def jitter_spreads_retry_after_per_key_never_below_the_exact_wait(tmp):
    d = Daemon(tmp)
    try:
        # 40 clients told to retry a 42 s limit: with jitter=10% their waits spread over
        # [exact, exact + 4.2 s] (exact a little under 42 s), per key.
        waits, headers = [], set()
        for k in range(40):
            key = "j%d" % k
            pol = "gcra:1/42s,jitter=10%"
            assert ints(d.cli("RL.CHECK", key, pol))[0] == 1
            a = ints(d.cli("RL.CHECK", key, pol))
            assert a[0] == 0 and 41000 <= a[3] <= 46200, a
            waits.append(a[3])
            assert d.curl("/v1/check?key=h%d&policy=gcra:1/42s,jitter=10%%25" % k) \
                .startswith("HTTP/1.1 200")
            r = d.curl("/v1/check?key=h%d&policy=gcra:1/42s,jitter=10%%25" % k)
            m = re.search(r"Retry-After: (\d+)\s", r)
            assert r.startswith("HTTP/1.1 429") and m and 42 <= int(m.group(1)) <= 47, r
            headers.add(int(m.group(1)))
        assert max(waits) - min(waits) > 2000, waits  # spread, not one instant
        assert len(headers) >= 3, headers
    finally:
        d.stop()


@test
def http_check_policy_fields_give_the_rate_not_the_burst(tmp):
    d = Daemon(tmp)
    try:
        r = d.curl("/v1/check?key=b1&policy=gcra:100/1m,burst=20")
        assert 'RateLimit-Policy: "inline";q=100;w=60\n' in r, r
        assert 'RateLimit: "inline";r=19;t=1\n' in r, r
    finally:
        d.stop()


ENVOY = """domain: messaging
descriptors:
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 2
"""


@test
def envoy_json_endpoint_and_config_file_work(tmp):
    d = Daemon(tmp, config=ENVOY)
    try:
        body = '{"domain":"messaging","descriptors":[{"entries":[{"key":"to_number","value":"1"}]}]}'
        outs = [d.curl("/json", "-X", "POST", "--data", body) for _ in range(3)]
        assert outs[0].startswith("HTTP/1.1 200") and '"overallCode":"OK"' in outs[0], outs[0]
        assert outs[2].startswith("HTTP/1.1 429"), outs[2]
        assert '"overallCode":"OVER_LIMIT"' in outs[2]
        assert '"requestsPerUnit":2,"unit":"DAY"' in outs[2]
        assert d.curl("/json", "-X", "POST", "--data", "{").startswith("HTTP/1.1 400")
    finally:
        d.stop()


SPACE_UTF8 = """domain: edge
descriptors:
  - key: path
    value: "/api v1"
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: city
    value: "Z\u00fcrich"
    rate_limit:
      unit: minute
      requests_per_unit: 2
"""


@test
def descriptor_values_with_spaces_and_non_ascii_bytes_work_end_to_end(tmp):
    path = os.path.join(tmp, "edge.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(SPACE_UTF8)
    r = run_bin(tmp, "--config", path, "--check-config")
    assert r.returncode == 0 and "is valid" in r.stdout, r
    d = Daemon(tmp, "--no-snapshot", config=SPACE_UTF8)
    try:
        for value in ("/api v1", "Z\u00fcrich"):
            key = "path" if value.startswith("/") else "city"
            body = json.dumps({"domain": "edge", "descriptors": [
                {"entries": [{"key": key, "value": value}]}]}, ensure_ascii=False)
            outs = [d.curl("/json", "-X", "POST", "--data-binary", body) for _ in range(3)]
            assert outs[0].startswith("HTTP/1.1 200"), outs[0]
            assert '"overallCode":"OK"' in outs[0], outs[0]
            assert outs[2].startswith("HTTP/1.1 429"), outs[2]
            assert '"requestsPerUnit":2,"unit":"MINUTE"' in outs[2], outs[2]
        m = d.curl("/metrics")
        for label in ("edge.path_/api v1", "edge.city_Z\u00fcrich"):
            line = 'ratelimitd_policy_decisions_total{policy="%s",outcome="denied"} 1' % label
            assert line in m, m
    finally:
        d.stop()


@test
def shadow_mode_logs_what_it_would_have_denied_rate_limited(tmp):
    cfg = ("policies:\n  soft:\n    policy: fixed_window:1/1h\n    shadow_mode: true\n"
           "domain: edge\ndescriptors:\n  - key: ip\n    rate_limit: {unit: hour, "
           "requests_per_unit: 1}\n    shadow_mode: true\n")
    d = Daemon(tmp, "--threads", "1", config=cfg)
    try:
        key = b'u"1\x01' + b"x" * 100
        got = raw(d.port, resp("RL.CHECK", key, "soft") * 2, wait=0.3)
        assert got.count(b"*6\r\n:1\r\n") == 2, got  # both allowed (shadow)
        body = '{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"9"}]}]}'
        for _ in range(2):
            assert d.curl("/json", "-X", "POST", "--data", body).startswith("HTTP/1.1 200")
        time.sleep(0.2)
        err = d.stderr()
        m = re.search(r'ratelimitd: shadow: would deny policy=p:soft key="u\\"1\\x01(x+)\.\.\." '
                      r'cost=1 retry_after_ms=(\d+)', err)
        assert m, err
        assert len(m.group(1)) == 60 and int(m.group(2)) > 0, err  # 64 key bytes, then ...
        assert re.search(r"shadow: would deny policy=edge\.ip key=\S+ cost=1 retry_after_ms="
                         r"\d+", err), err
        # A flood is rate-limited: at most 10 lines a second, then a summary line.
        time.sleep(1.1)
        raw(d.port, resp("RL.CHECK", "flood", "soft") * 60, wait=0.5)
        time.sleep(1.1)
        raw(d.port, resp("RL.CHECK", "flood", "soft"), wait=0.3)
        time.sleep(0.2)
        err = d.stderr()
        flood = err.count('key="flood"')
        assert 10 <= flood <= 21, (flood, err)
        m = re.search(r"shadow: suppressed (\d+) lines", err)
        assert m and int(m.group(1)) + flood == 60, (flood, err)
        assert "shadow_denied\"} 62" in d.curl("/metrics"), d.curl("/metrics")
    finally:
        d.stop()


@test
def config_errors_are_refused_at_start_with_file_and_line(tmp):
    path = os.path.join(tmp, "bad.yaml")
    with open(path, "w") as f:
        f.write("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n"
                "      requests_per_unit: 1\n")
    r = subprocess.run([BIN, "--config", path, "--port", "0", "--http-port", "0", "--grpc-port", "0"],
                       capture_output=True, text=True, timeout=10, cwd=tmp)
    assert r.returncode == 2, r
    assert path + ":5: unit must be second" in r.stderr, r.stderr


@test
def non_loopback_bind_needs_a_password(tmp):
    r = subprocess.run([BIN, "--bind", "0.0.0.0", "--port", "0", "--http-port", "0", "--grpc-port", "0"],
                       capture_output=True, text=True, timeout=10, cwd=tmp)
    assert r.returncode == 2 and "refusing" in r.stderr, r


def run_bin(tmp, *args):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=10, cwd=tmp)


@test
def an_unknown_option_is_named_and_exits_2(tmp):
    r = run_bin(tmp, "--bogus")
    assert r.returncode == 2 and "unknown option '--bogus'" in r.stderr, r
    r = run_bin(tmp, "--port")
    assert r.returncode == 2 and "--port needs a value" in r.stderr, r
    r = run_bin(tmp, "--port", "99999")
    assert r.returncode == 2 and "--port needs a valid value, got 99999" in r.stderr, r


@test
def an_invalid_bind_address_is_named_and_exits_2(tmp):
    for addr in ["999.1.1.1", "1.2.3", "::zz"]:
        r = run_bin(tmp, "--bind", addr, "--port", "0", "--http-port", "0", "--grpc-port", "0")
        assert r.returncode == 2 and "invalid address '%s'" % addr in r.stderr, r
        assert "password" not in r.stderr, r


@test
def auth_and_bearer_token_guard_both_protocols(tmp):
    d = Daemon(tmp, "--password", "s3cret")
    try:
        assert "NOAUTH" in d.cli("CL.THROTTLE", "k", 1, 1, 1)
        assert d.cli("CL.THROTTLE", "k", 1, 1, 1, password="s3cret").split()[0] == "0"
        assert d.curl("/v1/check?key=a").startswith("HTTP/1.1 401")
        assert d.curl("/v1/check?key=a", "-H", "Authorization: Bearer s3cret").startswith(
            "HTTP/1.1 200")
        assert d.curl("/healthz").startswith("HTTP/1.1 200")
        assert d.curl("/metrics").startswith("HTTP/1.1 401")
        # HTTP Basic with the same password (any user name), what a browser sends; the 401
        # challenges Basic so a browser prompts.  Bearer above still works.
        assert d.curl("/v1/check?key=a", "-u", "ops:s3cret").startswith("HTTP/1.1 200")
        assert d.curl("/v1/check?key=a", "-u", "ops:wrong").startswith("HTTP/1.1 401")
        assert 'WWW-Authenticate: Basic realm="ratelimitd", charset="UTF-8"' in d.curl("/metrics")
        assert "ratelimitd_decisions_total" in d.curl(
            "/metrics", "-H", "Authorization: Bearer s3cret")
    finally:
        d.stop()


@test
def http_check_names_bad_escapes_and_unknown_parameters(tmp):
    d = Daemon(tmp)
    try:
        r = d.curl("/v1/check?key=%ZZ")
        assert r.startswith("HTTP/1.1 400") and "bad percent-encoding" in r, r
        r = d.curl("/v1/check?key=a&polcy=gcra:1/1s")
        assert r.startswith("HTTP/1.1 400") and "unknown parameter 'polcy'" in r, r
    finally:
        d.stop()


@test
def sighup_reloads_a_good_config_and_keeps_the_old_one_on_error(tmp):
    d = Daemon(tmp, config="policies:\n  api: fixed_window:1/1h\n")
    try:
        assert ints(d.cli("RL.CHECK", "a", "api"))[1] == 1
        with open(d.config_path, "w") as f:
            f.write("policies:\n  api: fixed_window:5/1h\n")
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert ints(d.cli("RL.CHECK", "b", "api"))[1] == 5, d.stderr()
        with open(d.config_path, "w") as f:
            f.write("policies:\n  api: fixed_window:0/1h\n")
        d.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert "reload failed" in d.stderr() and ":2:" in d.stderr(), d.stderr()
        assert ints(d.cli("RL.CHECK", "c", "api"))[1] == 5
    finally:
        d.stop()


@test
def snapshot_round_trip_across_a_restart(tmp):
    d = Daemon(tmp)
    try:
        for _ in range(3):
            d.cli("CL.THROTTLE", "snap", 2, 1, 3600)
        assert ints(d.cli("CL.THROTTLE", "snap", 2, 1, 3600))[0] == 1
    finally:
        assert d.stop() == 0
    snap = os.path.join(tmp, "ratelimitd.snap")
    assert os.path.exists(snap)
    os.utime(snap, (time.time() - 90, time.time() - 90))
    d = Daemon(tmp)
    try:
        r = ints(d.cli("CL.THROTTLE", "snap", 2, 1, 3600))
        assert r[0] == 1, r  # still limited after the restart
        # The restore is logged: how many keys, from which file, how old.
        m = re.search(r"ratelimitd: restored (\d+) keys from snapshot (\S+), written (\d+)s ago",
                      d.stderr())
        assert m and m.group(1) == "1" and m.group(2) == "ratelimitd.snap", d.stderr()
        assert 90 <= int(m.group(3)) < 120, m.group(0)
    finally:
        d.stop()


def away_from_edge(unit, margin=3):
    """Waits until the current UTC `unit`-second window has at least `margin` s left and has
    run for `margin` s, so that a test's requests fall in one window."""
    while True:
        into = time.time() % unit
        if margin <= into <= unit - margin:
            return
        time.sleep(0.2)


@test
def fixed_windows_keep_their_utc_hour_across_a_restart(tmp):
    # Windows are UTC hours, before and after a restart: a client blocked for the rest of the
    # hour stays blocked for exactly that, not for up to two windows.
    away_from_edge(3600, margin=5)
    d = Daemon(tmp)
    try:
        for _ in range(3):
            assert ints(d.cli("RL.CHECK", "fw", "fixed_window:3/1h"))[0] == 1
        r = ints(d.cli("RL.CHECK", "fw", "fixed_window:3/1h"))
        left_ms = (3600 - time.time() % 3600) * 1000
        assert r[0] == 0 and abs(r[3] - left_ms) <= 1500, (r, left_ms)
    finally:
        assert d.stop() == 0
    d = Daemon(tmp)
    try:
        r = ints(d.cli("RL.CHECK", "fw", "fixed_window:3/1h"))
        left_ms = (3600 - time.time() % 3600) * 1000
        assert r[0] == 0, r  # still limited
        assert r[3] <= left_ms + 1500 and abs(r[3] - left_ms) <= 1500, (r, left_ms)
    finally:
        d.stop()


@test
def envoy_minute_windows_end_on_the_utc_minute(tmp):
    away_from_edge(60, margin=2)
    d = Daemon(tmp, config=ENVOY.replace("unit: day", "unit: minute"))
    try:
        body = '{"domain":"messaging","descriptors":[{"entries":[{"key":"to_number","value":"7"}]}]}'
        out = d.curl("/json", "-X", "POST", "--data", body)
        left = 60 - time.time() % 60
        m = re.search(r'"durationUntilReset":"(\d+)s"', out)
        assert m, out
        assert abs(int(m.group(1)) - left) <= 1.0, (out, left)
    finally:
        d.stop()


CALENDAR = """policies:
  monthly: {policy: "fixed_window:2/1mo,tz=Europe/Paris"}
domain: billing
descriptors:
  - key: account
    rate_limit:
      policy: "fixed_window:1/1y,tz=Australia/Lord_Howe"
"""


def local_period_end(zone, months):
    """Unix seconds at which the current local month (months=1) or year (12) of `zone` ends,
    from Python's own tz database reader (zoneinfo), independent of the daemon's."""
    from datetime import datetime
    from zoneinfo import ZoneInfo
    z = ZoneInfo(zone)
    now = datetime.now(z)
    m = (now.year * 12 + now.month - 1) // months * months + months
    return datetime(m // 12, m % 12 + 1, 1, tzinfo=z).timestamp()


@test
def calendar_windows_end_at_the_real_local_month_and_year_on_resp_http_and_envoy(tmp):
    for zone, months in (("America/New_York", 1), ("Europe/Paris", 1),
                         ("Australia/Lord_Howe", 12)):
        if local_period_end(zone, months) - time.time() < 10:
            time.sleep(11)  # a test right at a month's end: let it pass
    d = Daemon(tmp, config=CALENDAR)
    try:
        # RESP, an inline policy
        pol = "fixed_window:2/1mo,tz=America/New_York"
        for _ in range(2):
            assert ints(d.cli("RL.CHECK", "cal", pol))[0] == 1
        r = ints(d.cli("RL.CHECK", "cal", pol))
        left_ms = (local_period_end("America/New_York", 1) - time.time()) * 1000
        assert r[0] == 0 and abs(r[3] - left_ms) <= 1500 and r[4] == r[3], (r, left_ms)
        assert d.cli("RL.POLICY", "fixed_window:5/12mo,tz=Europe/Paris") == \
            "fixed_window:5/1y,tz=Europe/Paris"
        # HTTP, a named policy from the config
        for _ in range(2):
            assert d.curl("/v1/check?key=h&policy=monthly").startswith("HTTP/1.1 200")
        out = d.curl("/v1/check?key=h&policy=monthly")
        left_ms = (local_period_end("Europe/Paris", 1) - time.time()) * 1000
        m = re.search(r'"retry_after_ms":(\d+)', out)
        assert out.startswith("HTTP/1.1 429") and m, out
        assert abs(int(m.group(1)) - left_ms) <= 1500, (out, left_ms)
        ra = re.search(r"Retry-After: (\d+)", out)
        assert ra and abs(int(ra.group(1)) - left_ms / 1000) <= 2, out
        # Envoy's /json (the same decision as gRPC ShouldRateLimit), a descriptor's policy
        body = '{"domain":"billing","descriptors":[{"entries":[{"key":"account","value":"a"}]}]}'
        outs = [d.curl("/json", "-X", "POST", "--data", body) for _ in range(2)]
        assert '"overallCode":"OK"' in outs[0] and '"overallCode":"OVER_LIMIT"' in outs[1], outs
        left = local_period_end("Australia/Lord_Howe", 12) - time.time()
        m = re.search(r'"durationUntilReset":"(\d+)s"', outs[1])
        assert m and abs(int(m.group(1)) - left) <= 2, (outs[1], left)
        # a fresh descriptor, only looked at: still the time to the window's end, as envoy's
        fresh = body.replace('"a"}]', '"b"}],"hits_addend":0')
        out = d.curl("/json", "-X", "POST", "--data", fresh)
        m = re.search(r'"durationUntilReset":"(\d+)s"', out)
        assert '"overallCode":"OK"' in out and m and abs(int(m.group(1)) - left) <= 2, (out, left)
        # errors name the part that is wrong
        e = d.cli("RL.CHECK", "x", "fixed_window:1/1mo,tz=Mars/Olympus_Mons")
        assert "unknown time zone" in e, e
        e = d.cli("RL.CHECK", "x", "gcra:1/1mo")
        assert "fixed_window only" in e, e
    finally:
        assert d.stop() == 0
    # the count survives a restart (snapshot), in the same month
    d = Daemon(tmp, config=CALENDAR)
    try:
        r = ints(d.cli("RL.CHECK", "cal", "fixed_window:2/1mo,tz=America/New_York"))
        assert r[0] == 0, r
        assert d.curl("/v1/check?key=h&policy=monthly").startswith("HTTP/1.1 429")
    finally:
        d.stop()


@test
def calendar_policies_pass_the_config_check_in_redis_mode(tmp):
    path = os.path.join(tmp, "redis.yaml")
    with open(path, "w") as f:
        f.write("redis: {address: '127.0.0.1:1'}\n" + CALENDAR)
    r = run_bin(tmp, "--config", path, "--check-config")
    assert r.returncode == 0 and "is valid" in r.stdout, r


@test
def kill_9_loses_at_most_what_came_after_the_last_snapshot(tmp):
    d = Daemon(tmp, "--snapshot-interval", "200ms")
    try:
        for _ in range(3):
            d.cli("CL.THROTTLE", "k9", 2, 1, 3600)
        time.sleep(0.8)  # a periodic snapshot has happened
        d.stop(signal.SIGKILL)
    finally:
        d.stop()
    d = Daemon(tmp)
    try:
        r = ints(d.cli("CL.THROTTLE", "k9", 2, 1, 3600))
        assert r[0] == 1, r
    finally:
        d.stop()


def run_tests(tests, argv, prefix="rltd-"):
    """Runs the tests named in argv (all when none), each in its own temp dir; prints
    "ok NAME" / "FAIL NAME" and the closing "N passed, N failed"; returns the exit status."""
    wanted = argv
    passed = failed = 0
    for t in tests:
        if wanted and t.__name__ not in wanted:
            continue
        tmp = tempfile.mkdtemp(prefix=prefix)
        try:
            t(tmp)
            print("ok   " + t.__name__)
            passed += 1
        except Exception:
            print("FAIL " + t.__name__)
            traceback.print_exc()
            failed += 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def main():
    return run_tests(TESTS, sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
