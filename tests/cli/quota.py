#!/usr/bin/env python3
"""`ratelimit quota` against a real ratelimitd: three streams acting as three Envoys share a
bucket's budget, and the fleet's admissions per interval stay within docs/envoy.md's bound
R x T + B + B x (1 + T / G); every stream gets an assignment; a deny_all bucket admits
nothing.  Servers that do not speak RLQS (a RESP port, an HTTP port, a closed port, a gRPC
server answering UNIMPLEMENTED) are refused with a message and exit status 1; bad options
with exit status 2.

Usage: quota.py PATH_TO_RATELIMIT PATH_TO_RATELIMITD [TEST_NAME...]   (with /usr/bin/python3)"""
import os
import re
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.abspath(sys.argv[1])
sys.argv = [sys.argv[0]] + sys.argv[2:]  # integration.py reads the daemon's path as argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
import integration as it  # noqa: E402  (Daemon, run_tests)

TESTS = []
CFG = """domain: q
quota_buckets:
  - match: {name: web}
    policy: token_bucket:200/1s,burst=40
  - match: {name: closed}
    blanket: deny_all
"""
ROW = re.compile(r"^\s*(\S+)\s+(name=\S+)\s+(\d+)\s+(.*?)\s+(\d+)\s+(\d+)\s+(\d+)$")
FLEET = re.compile(r"^\s*(\S+)\s+(name=\S+)\s+fleet\s+sum (\d+)/s max (\d+)\s+(\d+)\s+(\d+)"
                   r"(?:\s+budget (\d+)(?: bound (\d+))?(?: OVER)?)?$")


def test(fn):
    TESTS.append(fn)
    return fn


def quota(*args, timeout=120):
    return subprocess.run([CLI, "quota"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout)


def refused(addr, expect):
    r = quota("--connect", addr, "--domain", "q", "--bucket", "name=web", "--seconds", "1")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert expect in r.stderr, r.stderr
    assert r.stdout == "", r.stdout  # nothing printed before the server is known to be RLQS
    print("    " + r.stderr.strip())


@test
def three_streams_stay_within_the_bound_and_each_gets_an_assignment(tmp):
    d = it.Daemon(tmp, config=CFG)
    try:
        r = quota("--connect", "127.0.0.1:%d" % d.grpc, "--domain", "q", "--bucket", "name=web",
                  "--bucket", "name=closed", "--streams", 3, "--demand", 200, "--seconds", 4,
                  "--budget", "token_bucket:200/1s,burst=40", "--no-assignment", "deny")
        print(r.stdout, end="")
        assert r.returncode == 0, (r.returncode, r.stderr)
    finally:
        assert d.stop() == 0
    fleet = {"name=web": [], "name=closed": []}
    answers = {}
    for line in r.stdout.splitlines():
        m = FLEET.match(line)
        if m:
            fleet[m.group(2)].append((int(m.group(5)), m.group(7), m.group(8)))
            continue
        m = ROW.match(line)
        if m:
            key = (m.group(2), m.group(3))
            answers[key] = answers.get(key, 0) + int(m.group(7))
    assert len(fleet["name=web"]) == 4 and len(fleet["name=closed"]) == 4, fleet
    # --budget: the budget is printed, and the bound once a TTL is known (G = TTL / 3): from
    # the first answer on, which comes at the first report.
    assert all(budget is not None for _, budget, _ in fleet["name=web"]), fleet
    bounded = [(a, int(bound)) for a, _, bound in fleet["name=web"] if bound is not None]
    assert len(bounded) >= 3, fleet
    for admitted, bound in bounded:
        assert admitted <= bound, (admitted, bound)
    # The demand, 600/s, is above every interval's bound (about 340): a stream that did not
    # enforce its assignments would break it.  And not trivially within: in some interval the
    # fleet admitted at least half of R x T.  (How much of R it uses afterwards is the
    # daemon's division, tested in tests/server/rlqs_integration.py, not this command's.)
    assert max(a for a, _, _ in fleet["name=web"]) >= 100, fleet["name=web"]
    # One --budget, for the first bucket only; deny_all admits nothing (no-assignment deny).
    assert all(a == 0 and b is None for a, b, _ in fleet["name=closed"]), fleet["name=closed"]
    for b in ("name=web", "name=closed"):
        for s in ("1", "2", "3"):
            assert answers.get((b, s), 0) >= 1, (b, s, answers)
    assert "3 streams, 3 with an assignment" in r.stdout and "within the bound" in r.stdout
    assert "OVER" not in r.stdout


@test
def a_resp_port_an_http_port_and_a_closed_port_are_refused(tmp):
    d = it.Daemon(tmp, config=CFG)
    try:
        refused("127.0.0.1:%d" % d.port, "not an HTTP/2 (gRPC) server: it answered '-ERR")
        refused("127.0.0.1:%d" % d.http, "not an HTTP/2 (gRPC) server: it answered 'HTTP/1.1")
    finally:
        assert d.stop() == 0
    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # bound, never listening: the connection is refused
    try:
        refused("127.0.0.1:%d" % s.getsockname()[1], "cannot connect to")
    finally:
        s.close()


@test
def a_grpc_server_answering_unimplemented_is_refused(tmp):
    try:
        import grpc
        from concurrent import futures
    except ImportError as e:
        raise AssertionError("%s (install python3-grpcio; run with /usr/bin/python3)" % e)
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        refused("127.0.0.1:%d" % port, "does not serve RLQS (grpc-status 12 UNIMPLEMENTED")
    finally:
        srv.stop(0)


@test
def a_daemon_with_a_password_needs_the_token(tmp):
    d = it.Daemon(tmp, "--password", "s3cret", config=CFG)
    try:
        addr = "127.0.0.1:%d" % d.grpc
        refused(addr, "the server ended the stream (grpc-status 16 UNAUTHENTICATED")
        r = quota("--connect", addr, "--domain", "q", "--bucket", "name=web", "--streams", 1,
                  "--seconds", 1, "--token", "s3cret")
        assert r.returncode == 0, (r.returncode, r.stderr)
        assert "1 streams, 1 with an assignment" in r.stdout, r.stdout
    finally:
        assert d.stop() == 0


@test
def bad_options_exit_2_with_a_message(tmp):
    cases = [
        ([], "--domain is required"),
        (["--domain", "q"], "--bucket is required"),
        (["--domain", "q", "--bucket", "web"], "--bucket 'web': expected KEY=VALUE"),
        (["--domain", "q", "--bucket", "a=1,a=2"], "a key is repeated"),
        (["--domain", "q", "--bucket", "a=1", "--streams", "0"], "--streams"),
        (["--domain", "q", "--bucket", "a=1", "--demand", "1,2"], "one value, or one per"),
        (["--domain", "q", "--bucket", "a=1", "--interval", "1x"], "--interval '1x'"),
        (["--domain", "q", "--bucket", "a=1", "--seconds", "1.5"], "whole number of --interval"),
        (["--domain", "q", "--bucket", "a=1", "--budget", "sliding_log:1/1s"], "token_bucket"),
        (["--domain", "q", "--bucket", "a=1", "--no-assignment", "maybe"], "allow or deny"),
        (["--domain", "q", "--bucket", "a=1", "--frobnicate"], "unknown option"),
    ]
    for args, expect in cases:
        r = quota(*args)
        assert r.returncode == 2 and expect in r.stderr, (args, r.returncode, r.stderr)
    r = quota("--help")
    assert r.returncode == 0 and "--bucket" in r.stdout


if __name__ == "__main__":
    sys.exit(it.run_tests(TESTS, sys.argv[2:], prefix="rlt-quota-"))
