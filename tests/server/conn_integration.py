#!/usr/bin/env python3
"""The connection layer and HTTP/1.1 of ratelimitd, end to end over loopback sockets: strict
framing (every vector answered 400/405/413/431/501/505 and the connection closed, nothing after
it read as a request), keep-alive and pipelining, HEAD without charging, deadlines for slow
clients, one max_connections across RESP and HTTP, and descriptor exhaustion without spinning.
Usage: conn_integration.py PATH_TO_RATELIMITD [TEST_NAME...]; prints "N passed, N failed"."""
import os
import re
import socket
import subprocess
import sys
import shutil
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402  (the Daemon class, raw sockets, resp())

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def http_raw(d, data, wait=1.0, chunks=None):
    return it.raw(d.http, data, wait=wait, chunks=chunks)


def statuses(reply):
    return [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", reply)]


GET_HEALTH = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

# (name, request bytes, expected status).  Each is followed by a well-formed request that must
# never be answered: after a framing error the connection is closed.
FRAMING = [
    ("two equal Content-Length",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nkey=a",
     400),
    ("two different Content-Length",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nkey=a",
     400),
    ("Content-Length list", b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nkey=a", 400),
    ("Content-Length with a sign",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nkey=a", 400),
    ("negative Content-Length", b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    ("Content-Length with Transfer-Encoding",
     b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", 400),
    ("unknown transfer coding", b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ("obs-fold", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
    ("space before the colon", b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("no Host in HTTP/1.1", b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    ("two Hosts", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("HTTP/2.0 in a request line", b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    ("header section too large", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 +
     b"\r\n\r\n", 431),
    ("body too large", b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n\r\n", 413),
    ("bad chunk size", b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"zz\r\n", 400),
]


@test
def every_framing_error_is_answered_and_closes_the_connection(tmp):
    d = it.Daemon(tmp)
    try:
        for name, req, want in FRAMING:
            got = http_raw(d, req + GET_HEALTH, wait=2.0)
            st = statuses(got)
            assert st == [want], (name, got[:300])
            assert b"Connection: close" in got, (name, got[:300])
            assert got.endswith(b"<closed>"), (name, got[-100:])
        # The daemon is still healthy, and counted the errors.
        assert d.curl("/healthz").startswith("HTTP/1.1 200")
    finally:
        d.stop()


@test
def a_body_after_a_refused_request_is_never_parsed_as_a_request(tmp):
    d = it.Daemon(tmp)
    try:
        # evhttp answered this one twice: the rest of the body as a second request.
        smuggled = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nContent-Length: 60\r\n"
                    b"\r\nkey=abGET /v1/check?key=victim&policy=gcra:1/1h HTTP/1.1\r\nHost: x\r\n\r\n")
        got = http_raw(d, smuggled, wait=2.0)
        assert statuses(got) == [400], got
        # Nothing was charged to "victim": its first check is allowed with everything left.
        r = d.curl("/v1/check?key=victim&policy=gcra:1/1h")
        assert r.startswith("HTTP/1.1 200"), r
    finally:
        d.stop()


@test
def keep_alive_and_pipelined_requests_are_answered_in_order(tmp):
    d = it.Daemon(tmp)
    try:
        reqs = b"".join(b"GET /v1/check?key=p%d&policy=fixed_window:2/1h HTTP/1.1\r\nHost: x\r\n\r\n" % (i % 2)
                        for i in range(6))
        got = http_raw(d, reqs + GET_HEALTH, wait=1.0)
        # p0, p1, p0, p1, p0, p1: the third request of each key is the first refused.
        assert statuses(got) == [200, 200, 200, 200, 429, 429, 200], got
        assert not got.endswith(b"<closed>")  # kept alive
        # One byte at a time: the same answers.
        got = http_raw(d, None, wait=1.0, chunks=[bytes([b]) for b in
                                                  b"GET /v1/check?key=q HTTP/1.1\r\nHost: x\r\n\r\n"])
        assert statuses(got) == [200], got
        # HTTP/1.0 closes unless it asks; "Connection: close" closes.
        got = http_raw(d, b"GET /healthz HTTP/1.0\r\n\r\n" + GET_HEALTH, wait=1.0)
        assert statuses(got) == [200] and got.endswith(b"<closed>"), got
        got = http_raw(d, b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", wait=0.5)
        assert b"Connection: keep-alive" in got and not got.endswith(b"<closed>"), got
        got = http_raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + GET_HEALTH)
        assert statuses(got) == [200] and got.endswith(b"<closed>"), got
    finally:
        d.stop()


@test
def head_answers_the_headers_without_charging(tmp):
    d = it.Daemon(tmp)
    try:
        url = b"/v1/check?key=h&policy=fixed_window:1/1h"
        for _ in range(3):
            got = http_raw(d, b"HEAD " + url + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert statuses(got) == [200], got
            assert b"RateLimit: \"inline\";r=1;" in got, got
            assert got.split(b"\r\n\r\n", 1)[1] == b"<closed>", got  # no body
        assert d.curl(url.decode()).startswith("HTTP/1.1 200")
        assert d.curl(url.decode()).startswith("HTTP/1.1 429")
    finally:
        d.stop()


@test
def wrong_methods_get_405_and_unknown_paths_404(tmp):
    d = it.Daemon(tmp)
    try:
        got = http_raw(d, b"PUT /v1/check?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" + GET_HEALTH)
        assert statuses(got) == [405, 200], got
        assert b"Allow: GET, HEAD, POST" in got
        got = http_raw(d, b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        assert statuses(got) == [405] and b"Allow: POST" in got, got
        got = http_raw(d, b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert statuses(got) == [405], got
        got = http_raw(d, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        assert statuses(got) == [404], got
    finally:
        d.stop()


@test
def chunked_json_bodies_are_decoded(tmp):
    cfg = ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
    d = it.Daemon(tmp, config=cfg)
    try:
        body = b'{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}'
        chunked = b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (
            10, body[:10], len(body) - 10, body[10:])
        req = b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
        got = http_raw(d, req + req)
        assert statuses(got) == [200, 429], got
        assert b'"overallCode":"OVER_LIMIT"' in got
    finally:
        d.stop()


def slow_client(port, first, rest, every):
    """Sends `first`, then one byte of `rest` every `every` s; returns (reply, seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.time()
    s.sendall(first)
    s.settimeout(every)
    got = b""
    try:
        for b in rest:
            try:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
                if got:
                    break
            except socket.timeout:
                pass
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
        s.settimeout(5)
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    finally:
        s.close()
    return got, time.time() - t0


@test
def a_slow_header_is_closed_at_its_deadline_while_others_are_served(tmp):
    d = it.Daemon(tmp, config="server:\n  client_timeout: 2s\n")
    try:
        import threading
        results = {}

        def run(name, port, first, rest):
            results[name] = slow_client(port, first, rest, 0.4)

        slow = [threading.Thread(target=run, args=("http%d" % i, d.http, b"GET /healthz HTTP/1.1\r\nHo",
                                                        b"st: x" + b"a" * 40))
                for i in range(20)]
        slow += [threading.Thread(target=run, args=("resp%d" % i, d.port, b"*2\r\n$4\r\nECHO\r\n$",
                                                        b"40\r\n" + b"a" * 40))
                 for i in range(5)]
        for t in slow:
            t.start()
        time.sleep(0.5)
        # Meanwhile everyone else is served at once.
        for _ in range(5):
            t0 = time.time()
            assert d.curl("/healthz").startswith("HTTP/1.1 200")
            assert d.cli("PING") == "PONG"
            assert time.time() - t0 < 1.0
            time.sleep(0.2)
        for t in slow:
            t.join(15)
        for name, (got, secs) in results.items():
            # Closed at the deadline (2 s after the first byte), not 2 s after the last one.
            assert 1.5 <= secs <= 3.5, (name, secs, got)
            if name.startswith("http"):
                assert statuses(got) == [408], (name, got)
            else:
                assert got.startswith(b"-ERR client timeout"), (name, got)
    finally:
        d.stop()


@test
def max_connections_counts_resp_and_http_together(tmp):
    d = it.Daemon(tmp, "--max-connections", "3")
    try:
        held = [socket.create_connection(("127.0.0.1", d.port)),
                socket.create_connection(("127.0.0.1", d.http)),
                socket.create_connection(("127.0.0.1", d.http))]
        time.sleep(0.3)
        got = it.raw(d.port, it.resp("PING"))
        assert got.startswith(b"-ERR max number of clients reached"), got
        got = http_raw(d, GET_HEALTH)
        assert statuses(got) == [503] and got.endswith(b"<closed>"), got
        held.pop().close()
        time.sleep(0.3)
        assert it.raw(d.port, it.resp("PING")).startswith(b"+PONG")
        for s in held:
            s.close()
        time.sleep(0.3)
        assert statuses(http_raw(d, GET_HEALTH)) == [200]
    finally:
        d.stop()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@test
def running_out_of_descriptors_pauses_accepting_without_spinning(tmp):
    if shutil.which("prlimit") is None:
        raise AssertionError("needs prlimit (util-linux)")
    d = it.Daemon(tmp, "--threads", "1")
    try:
        # Lower the running daemon's limit below what it already holds plus the clients.
        # (the soft limit only: a process may lower it and raise it again)
        subprocess.run(["prlimit", "--pid", str(d.p.pid), "--nofile=40:"], check=True)
        clients = []
        for _ in range(60):
            try:
                clients.append(socket.create_connection(("127.0.0.1", d.port), timeout=2))
            except OSError:
                break
        c0 = cpu_seconds(d.p.pid)
        time.sleep(3)
        used = cpu_seconds(d.p.pid) - c0
        assert used < 0.5, "the daemon spent %.2f s of CPU in 3 s" % used
        lines = [ln for ln in d.stderr().splitlines() if "not accepting" in ln]
        assert 1 <= len(lines) <= 3 / 0.25 + 4, len(lines)
        # Recovery: once the clients leave, their descriptors are free and accepting resumes.
        for c in clients:
            c.close()
        time.sleep(0.6)
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def metrics_pass_promtool_after_traffic_on_every_endpoint(tmp):
    if shutil.which("promtool") is None:
        raise AssertionError("needs promtool (apt-get install prometheus)")
    import json
    value = 'v "q" \\ z'  # a label value with a quote, a backslash and spaces
    cfg = ("policies:\n  api: gcra:2/1s\n  shadowed: {policy: fixed_window:1/1h, shadow_mode: true}\n"
           "domain: d\ndescriptors:\n  - key: k\n    value: '%s'\n"
           "    rate_limit: {unit: hour, requests_per_unit: 1}\n" % value)
    d = it.Daemon(tmp, config=cfg)
    try:
        body = json.dumps({"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": value}]}]})
        for _ in range(3):
            d.cli("RL.CHECK", "a", "api")
            d.cli("RL.CHECK", "a", "shadowed")
            d.cli("CL.THROTTLE", "b", 1, 1, 60)
            d.curl("/v1/check?key=c&policy=gcra:1/1m")
            assert d.curl("/json", "-X", "POST", "--data", body).startswith("HTTP/1.1 "), body
        d.cli("NOSUCH")
        d.curl("/nope")
        m = d.curl("/metrics").split("\n\n", 1)[1]
        r = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, (r.stdout, r.stderr, m[:2000])
        assert 'shadow_denied"} 2' in m, m
        assert '\\"q\\" \\\\ z' in m, m  # the label escaped as Prometheus says
    finally:
        d.stop()


@test
def idle_connections_close_after_idle_timeout_and_busy_ones_stay(tmp):
    d = it.Daemon(tmp, config="server:\n  idle_timeout: 1s\n")
    try:
        quiet = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        busy = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        t0 = time.time()
        while time.time() - t0 < 2.5:  # a whole command every 0.3 s: never idle for 1 s
            busy.sendall(it.resp("PING"))
            assert busy.recv(64) == b"+PONG\r\n"
            time.sleep(0.3)
        quiet.settimeout(0.5)
        assert quiet.recv(64) == b"", "the quiet connection was not closed"
        busy.sendall(it.resp("PING"))
        assert busy.recv(64) == b"+PONG\r\n"
        quiet.close()
        busy.close()
    finally:
        d.stop()


def main():
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltc-")


if __name__ == "__main__":
    sys.exit(main())
