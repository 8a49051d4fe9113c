#!/usr/bin/env python3
"""Top offenders end to end (src/server/stats/top.c): the real daemon with two worker threads,
denials sent over several connections (so that both workers' sketches hold some), read back
through INFO's "# Top" section, GET /v1/top and /metrics (checked by promtool), against the
exact counts the test itself keeps.  Usage: top_integration.py PATH_TO_RATELIMITD [--redis]
[TEST...] (--redis: the distributed-mode tests, under tests/redis/redis-servers.sh)."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402  (the Daemon class, raw sockets, resp())

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def send_all(port, cmds, conns=4, auth=None):
    """Sends the RESP commands round-robin over `conns` connections (the daemon spreads
    connections over its workers), pipelined, and reads every reply."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(conns)]
    try:
        if auth:
            for s in socks:
                s.sendall(it.resp("AUTH", auth))
                assert s.recv(64) == b"+OK\r\n"
        parts = [[] for _ in socks]
        for i, c in enumerate(cmds):
            parts[i % conns].append(it.resp(*c))
        for s, p in zip(socks, parts):
            s.sendall(b"".join(p))
        for s, p in zip(socks, parts):
            # Each RL.CHECK reply is an array of 6 integers: count the array headers.
            got = b""
            while got.count(b"*6\r\n") + got.count(b"-ERR") < len(p):
                b = s.recv(65536)
                assert b, "connection closed"
                got += b
            assert b"-ERR" not in got, got[:200]
    finally:
        for s in socks:
            s.close()


def info_top(d, password=None):
    """INFO top as {"top_keys": .., ..., "entries": [(key, policy, denied, error), ...]}."""
    out = d.cli("INFO", "top", password=password)
    res = {"entries": []}
    for line in out.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, v = line.split(":", 1)
        if k.startswith("top") and k[3:].isdigit():
            f = dict(x.split("=", 1) for x in v.split(","))
            assert int(k[3:]) == len(res["entries"]) + 1, out
            res["entries"].append((urllib.parse.unquote_to_bytes(f["key"]),
                                   urllib.parse.unquote(f["policy"]),
                                   int(f["denied"]), int(f["error"])))
        else:
            res[k] = int(v)
    return res


def http_get(d, path, token=None):
    extra = ["-H", "Authorization: Bearer " + token] if token else []
    r = d.curl(path, *extra)
    head, _, body = r.partition("\n\n")
    return int(head.split()[1]), body


@test
def info_top_lists_the_denied_keys_with_exact_counts_across_workers(tmp):
    d = it.Daemon(tmp, config="policies:\n  api: fixed_window:1/1h\n")
    try:
        truth = {}
        cmds = []
        for i in range(400):
            k = "user:%d" % (i % 7 if i % 3 else 0)  # user:0 most
            cmds.append(("RL.CHECK", k, "api"))
            truth[k] = truth.get(k, 0) + 1
        send_all(d.port, cmds)
        # Allowed requests (the first per key) are not denials; peeks count nothing.
        d.cli("RL.PEEK", "user:1", "api")
        want = sorted(((c - 1, k) for k, c in truth.items()), reverse=True)
        t = info_top(d)
        assert t["top_keys"] == 100 and t["top_floor"] == 0 and t["top_dropped"] == 0, t
        assert t["top_denied_total"] == sum(c for c, _ in want), t
        got = [(e[2], e[0].decode()) for e in t["entries"]]
        # Ties are listed by key bytes: sort the same way.
        assert sorted(got, key=lambda x: (-x[0], x[1])) == sorted(want, key=lambda x: (-x[0], x[1])), (got, want)
        assert all(e[1] == "p:api" and e[3] == 0 for e in t["entries"]), t
        # The whole INFO has the section too, after the others.
        full = d.cli("INFO")
        assert "# Top" in full and full.index("# Top") > full.index("# Backend"), full[-500:]
    finally:
        d.stop()


@test
def v1_top_returns_json_bounded_by_n_and_refuses_a_bad_n(tmp):
    d = it.Daemon(tmp, config="policies:\n  api: fixed_window:1/1h\n")
    try:
        cmds = [("RL.CHECK", "k%d" % (i % 5), "api") for i in range(5)]
        cmds += [("RL.CHECK", "k%d" % j, "api") for j in range(5) for _ in range(j + 1)]
        send_all(d.port, cmds, conns=2)
        code, body = http_get(d, "/v1/top")
        assert code == 200, body
        doc = json.loads(body)
        assert doc["k"] == 100 and doc["total"] == 15 and doc["floor"] == 0, doc
        assert [(e["key"], e["denied"], e["error"], e["policy"]) for e in doc["keys"]] == \
            [("k%d" % j, j + 1, 0, "p:api") for j in (4, 3, 2, 1, 0)], doc
        code, body = http_get(d, "/v1/top?n=2")
        assert code == 200 and [e["key"] for e in json.loads(body)["keys"]] == ["k4", "k3"], body
        code, body = http_get(d, "/v1/top?n=100000")
        assert code == 200 and len(json.loads(body)["keys"]) == 5, body
        for bad in ("n=0", "n=-1", "n=x", "m=3", "n=", "n=99999999999999999999999"):
            code, body = http_get(d, "/v1/top?" + bad)
            assert code == 400 and "error" in json.loads(body), (bad, code, body)
        r = d.curl("/v1/top", "-X", "POST")
        assert r.startswith("HTTP/1.1 405"), r
    finally:
        d.stop()


@test
def metrics_show_at_most_10_offenders_escaped_and_pass_promtool(tmp):
    if shutil.which("promtool") is None:
        raise AssertionError("needs promtool (apt-get install prometheus)")
    d = it.Daemon(tmp, config="policies:\n  api: fixed_window:1/1h\n")
    try:
        weird = b'q"uo\\te\nnl %\xff\x00end'  # quote, backslash, newline, '%', non-UTF-8, NUL
        cmds = [("RL.CHECK", b"key%d" % i, "api") for i in range(15) for _ in range(i + 2)]
        cmds += [("RL.CHECK", weird, "api")] * 40
        send_all(d.port, cmds)
        code, m = http_get(d, "/metrics")
        assert code == 200
        r = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, (r.stdout, r.stderr)
        top = [l for l in m.splitlines() if l.startswith("ratelimitd_top_denied{")]
        assert len(top) == 10, top
        enc = 'q%22uo%5Cte%0Anl %25%FF%00end'
        assert top[0] == 'ratelimitd_top_denied{rank="1",key="%s",policy="p:api"} 39' % enc, top
        assert top[1] == 'ratelimitd_top_denied{rank="2",key="key14",policy="p:api"} 15', top
        assert 'ratelimitd_top_floor 0' in m
        # INFO's encoding is lossless too.
        t = info_top(d)
        assert t["entries"][0][0] == weird and t["entries"][0][2] == 39, t["entries"][0]
        doc = json.loads(http_get(d, "/v1/top?n=1")[1])
        assert urllib.parse.unquote_to_bytes(doc["keys"][0]["key"]) == weird, doc
    finally:
        d.stop()


@test
def tenants_see_only_their_own_offenders_and_anonymous_clients_none(tmp):
    cfg = ("server:\n  password: admin-pw\ntenants:\n  - {name: acme, password: acme-pw}\n"
           "  - {name: other, password: other-pw}\npolicies:\n  api: fixed_window:1/1h\n")
    d = it.Daemon(tmp, config=cfg)
    try:
        send_all(d.port, [("RL.CHECK", "u1", "api")] * 4, conns=2, auth="acme-pw")
        send_all(d.port, [("RL.CHECK", "u2", "api")] * 6, conns=2, auth="other-pw")
        code, body = http_get(d, "/v1/top", token="acme-pw")
        assert code == 200 and [(e["key"], e["denied"]) for e in json.loads(body)["keys"]] == \
            [("u1", 3)], body
        code, body = http_get(d, "/v1/top", token="admin-pw")
        assert [(e["key"], e["denied"]) for e in json.loads(body)["keys"]] == \
            [("other:u2", 5), ("acme:u1", 3)], body
        t = info_top(d, password="other-pw")
        assert [(e[0], e[2]) for e in t["entries"]] == [(b"u2", 5)], t
        code, m = http_get(d, "/metrics", token="acme-pw")
        assert 'key="u1"' in m and "u2" not in m, m
        for path in ("/v1/top", "/metrics"):
            code, _ = http_get(d, path)
            assert code == 401, (path, code)
            code, _ = http_get(d, path, token="wrong")
            assert code == 401, (path, code)
        assert "NOAUTH" in d.cli("INFO", "top")
    finally:
        d.stop()


@test
def top_keys_0_turns_top_offenders_off_and_the_flag_sets_k(tmp):
    d = it.Daemon(tmp, "--top-keys", "0", config="policies:\n  api: fixed_window:1/1h\n")
    try:
        send_all(d.port, [("RL.CHECK", "a", "api")] * 3, conns=1)
        assert "# Top" not in d.cli("INFO")
        code, body = http_get(d, "/v1/top")
        assert code == 404 and "top_keys" in body, body
        assert "ratelimitd_top" not in http_get(d, "/metrics")[1]
    finally:
        d.stop()
    d = it.Daemon(tmp, config="server:\n  top_keys: 3\npolicies:\n  api: fixed_window:1/1h\n")
    try:
        send_all(d.port, [("RL.CHECK", "k%d" % i, "api") for i in range(10) for _ in range(3)], conns=1)
        t = info_top(d)
        assert t["top_keys"] == 3 and len(t["entries"]) == 3 and t["top_floor"] > 0, t
    finally:
        d.stop()
    for bad in (["--top-keys", "1001"], ["--top-keys", "-1"]):
        d = it.Daemon(tmp, *bad, expect_fail=True)
        assert d.p.wait(10) != 0, bad
        d.stop()
    d = it.Daemon(tmp, config="server:\n  top_keys: 5000\n", expect_fail=True)
    assert d.p.wait(10) != 0 and "top_keys" in d.stderr(), d.stderr()
    d.stop()


@test
def shadow_denials_and_refused_multi_limits_are_counted_allowed_ones_not(tmp):
    cfg = ("policies:\n  api: fixed_window:1/1h\n"
           "  sh: {policy: fixed_window:1/1h, shadow_mode: true}\n  big: fixed_window:100/1h\n")
    d = it.Daemon(tmp, config=cfg)
    try:
        send_all(d.port, [("RL.CHECK", "s", "sh")] * 3 + [("RL.CHECK", "ok", "big")] * 5, conns=1)
        # RL.MULTI: the refused limit (api on m) is the offender, not the other one.
        for _ in range(3):
            d.cli("RL.MULTI", "m", "api", 1, "m2", "big", 1)
        got = {(e[0].decode(), e[1]): e[2] for e in info_top(d)["entries"]}
        assert got == {("s", "p:sh"): 2, ("m", "p:api"): 2}, got
    finally:
        d.stop()


@test
def many_keys_through_a_small_sketch_keep_the_heavy_hitters_and_the_bounds(tmp):
    d = it.Daemon(tmp, "--top-keys", "20", config="policies:\n  api: fixed_window:1/1h\n")
    try:
        rng = random.Random(16)
        truth = {}
        cmds = []
        for _ in range(6000):
            r = rng.random()
            k = "hot%d" % rng.randrange(3) if r < 0.3 else "cold%d" % rng.randrange(2000)
            cmds.append(("RL.CHECK", k, "api"))
            truth[k] = truth.get(k, 0) + 1
        send_all(d.port, cmds)
        denied = {k: c - 1 for k, c in truth.items()}
        doc = json.loads(http_get(d, "/v1/top")[1])
        n = sum(denied.values())
        assert doc["total"] == n, (doc["total"], n)
        assert doc["floor"] * 20 <= 2 * n, doc["floor"]
        keys = [e["key"] for e in doc["keys"]]
        assert sorted(keys[:3]) == ["hot0", "hot1", "hot2"], keys
        for e in doc["keys"]:
            assert e["denied"] - e["error"] <= denied[e["key"]] <= e["denied"], e
        for k, c in denied.items():
            assert k in keys or c <= doc["floor"], (k, c, doc["floor"])
    finally:
        d.stop()


@test
def a_reload_keeps_top_keys_and_the_counts_so_far(tmp):
    cfg = "server:\n  top_keys: 5\npolicies:\n  api: fixed_window:1/1h\n"
    d = it.Daemon(tmp, config=cfg)
    try:
        send_all(d.port, [("RL.CHECK", "a", "api")] * 4, conns=1)
        with open(d.config_path, "w") as f:
            f.write(cfg.replace("top_keys: 5", "top_keys: 50"))
        before = d.stderr().count("reload")
        d.p.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while time.time() < deadline and d.stderr().count("reload") == before:
            time.sleep(0.05)
        assert d.stderr().count("reload") > before, d.stderr()
        send_all(d.port, [("RL.CHECK", "a", "api")] * 2, conns=1)
        t = info_top(d)
        assert t["top_keys"] == 5 and [(e[0], e[2]) for e in t["entries"]] == [(b"a", 5)], t
    finally:
        d.stop()


REDIS_TESTS = []


def redis_test(fn):
    REDIS_TESTS.append(fn)
    return fn


@redis_test
def the_redis_backend_counts_denials_the_same_way(tmp):
    """With the shared store in Redis (tests/redis/redis-servers.sh exports
    RLT_REDIS_SERVERS), the denials Redis decides are the top's too."""
    addr = os.environ.get("RLT_REDIS_SERVERS")
    if not addr:
        raise AssertionError("needs RLT_REDIS_SERVERS (run under tests/redis/redis-servers.sh)")
    # A 1 s timeout: a loaded machine must not turn a decision into its fail mode.
    d = it.Daemon(tmp, "--redis", addr, "--redis-timeout", "1s",
                  config="policies:\n  api: fixed_window:1/1h\n")
    try:
        key = "top-redis-%d" % os.getpid()
        send_all(d.port, [("RL.CHECK", key, "api")] * 6, conns=2)
        doc = json.loads(http_get(d, "/v1/top")[1])
        assert [(e["key"], e["denied"]) for e in doc["keys"]] == [(key, 5)], doc
    finally:
        d.stop()


def main():
    """`--redis` (first after the binary) runs the tests against a Redis instead."""
    if sys.argv[2:3] == ["--redis"]:
        return it.run_tests(REDIS_TESTS, sys.argv[3:], prefix="rltt-")
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltt-")


if __name__ == "__main__":
    sys.exit(main())
