#!/usr/bin/env python3
"""ratelimitd's gRPC front end end to end: Envoy's rate limit service and the health check
over h2c, called by Debian's grpcio (the real gRPC C core) with messages built at test time
from src/server/grpc/proto/*.proto (grpc_tools.protoc writes a descriptor set; the protobuf
runtime makes the classes), and raw HTTP/2 from python3-h2 for what a well-behaved client
cannot send (late bodies, broken frames, hostile protobuf).

Usage: grpc_integration.py PATH_TO_RATELIMITD [--redis] [TEST_NAME...]
  --redis: only the Redis tests, under tests/redis/redis-servers.sh run standalone.
Runs with /usr/bin/python3 (Debian's grpcio and protobuf import only there).  A missing
module is a failure that names the Debian package."""
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import integration as it  # noqa: E402  (Daemon, raw)

try:
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
except ImportError as e:
    print("FAIL grpc_integration: %s (install python3-grpcio python3-protobuf python3-h2 and "
          "python3-grpc-tools; run with /usr/bin/python3)" % e)
    sys.exit(1)

REDIS = "--redis" in sys.argv[2:]
ARGS = [a for a in sys.argv[2:] if a != "--redis"]
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"
TESTS, REDIS_TESTS = [], []
SANITIZED = os.environ.get("RLT_SANITIZE", "") != ""  # RSS bounds hold for release builds


def test(fn):
    TESTS.append(fn)
    return fn


def redis_test(fn):
    REDIS_TESTS.append(fn)
    return fn


# ---- messages from our .proto files -----------------------------------------------------------

def load_messages(protos=("rls.proto", "health.proto")):
    tmp = tempfile.mkdtemp(prefix="rlt-pb-")
    try:
        out = os.path.join(tmp, "set.pb")
        r = subprocess.run(["/usr/bin/python3", "-m", "grpc_tools.protoc",
                            "-I" + os.path.join(ROOT, "src/server/grpc/proto"),
                            "--descriptor_set_out=" + out, "--include_imports",
                            *protos], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("FAIL grpc_integration: grpc_tools.protoc failed (python3-grpc-tools): "
                             + r.stderr)
        fds = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    fac = message_factory.MessageFactory(pool)
    return lambda name: fac.GetPrototype(pool.FindMessageTypeByName(name))


M = load_messages()
Req = M("envoy.service.ratelimit.v3.RateLimitRequest")
Resp = M("envoy.service.ratelimit.v3.RateLimitResponse")
HReq = M("grpc.health.v1.HealthCheckRequest")
HResp = M("grpc.health.v1.HealthCheckResponse")
OK, OVER = 1, 2
UNIT_NUM = {"UNKNOWN": 0, "SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "MONTH": 5, "YEAR": 6,
            "WEEK": 7}
UNITS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400, "WEEK": 7 * 86400,
         "MONTH": 30 * 86400, "YEAR": 365 * 86400}


def req(domain, *descs, hits=0):
    """descs: lists of (key, value) pairs, or dicts {entries, hits_addend, limit}."""
    r = Req(domain=domain, hits_addend=hits)
    for d in descs:
        if not isinstance(d, dict):
            d = {"entries": d}
        x = r.descriptors.add()
        for k, v in d["entries"]:
            x.entries.add(key=k, value=v)
        if "hits_addend" in d:
            x.hits_addend.value = d["hits_addend"]
        if "limit" in d:
            x.limit.requests_per_unit, unit = d["limit"]
            x.limit.unit = UNIT_NUM[unit]
    return r


class Client:
    def __init__(self, port, token=None):
        self.ch = grpc.insecure_channel("127.0.0.1:%d" % port)
        self.rls = self.ch.unary_unary(RLS, request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=Resp.FromString)
        self.raw_rls = self.ch.unary_unary(RLS, request_serializer=lambda b: b,
                                           response_deserializer=Resp.FromString)
        self.health = self.ch.unary_unary(HEALTH, request_serializer=lambda m: m.SerializeToString(),
                                          response_deserializer=HResp.FromString)
        self.md = [("authorization", "Bearer " + token)] if token else None

    def __call__(self, r, timeout=5):
        return self.rls(r, timeout=timeout, metadata=self.md)

    def error(self, r, raw=False, timeout=5):
        try:
            (self.raw_rls if raw else self.rls)(r, timeout=timeout, metadata=self.md)
        except grpc.RpcError as e:
            return e.code(), e.details()
        raise AssertionError("expected a gRPC error")

    def close(self):
        self.ch.close()


class GDaemon(it.Daemon):
    def __init__(self, tmp, *args, config=None, files=(), configs=()):
        """files: (name, text) written under tmp; configs: names given as --config."""
        args = list(args)
        for name, text in files:
            p = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        for name in configs:
            args += ["--config", os.path.join(tmp, name)]
        super().__init__(tmp, *args, config=config)
        assert self.grpc, "no grpc port in the start line"

    def client(self, token=None):
        return Client(self.grpc, token)

    def __enter__(self):
        # Envoy's minute rules are UTC minutes: a test's requests (well under 3 s each, TSan
        # included) must not straddle a minute's edge.
        it.away_from_edge(60)
        return self

    def __exit__(self, *exc):
        rc = self.stop()
        assert rc == 0 or exc[0] is not None, "daemon exited with %s: %s" % (rc, self.stderr())

    def metrics(self, token=None):
        extra = ["-H", "Authorization: Bearer " + token] if token else []
        return self.curl("/metrics", *extra)

    def json(self, body):
        out = self.curl("/json", "-d", json.dumps(body))
        return out[out.index("\n\n") + 2:]


def statuses(resp):
    return [(s.code, s.current_limit.requests_per_unit if s.HasField("current_limit") else None,
             s.limit_remaining) for s in resp.statuses]


def headers(resp):
    return {h.key: h.value for h in resp.response_headers_to_add}


ENVOY_EXAMPLE = open(os.path.join(ROOT, "config/envoy-example.yaml")).read()
RL_CFG = ("domain: rl\ndescriptors:\n  - key: category\n"
          "    rate_limit: {unit: minute, requests_per_unit: 100}\n")

# ---- raw HTTP/2 -------------------------------------------------------------------------------


def h2_conn(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def h2_headers(path, extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", "localhost"), ("content-type", "application/grpc"),
            ("te", "trailers")] + list(extra)


def h2_read(s, c, stream, wait=3.0):
    """Reads until `stream` ends; returns (headers+trailers dict, data bytes) or None if the
    connection closed first."""
    hdrs, data = {}, b""
    s.settimeout(wait)
    end = time.time() + wait
    while time.time() < end:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            return None
        for ev in c.receive_data(b):
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)) \
                    and ev.stream_id == stream:
                hdrs.update(dict(ev.headers))
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == stream:
                data += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == stream:
                s.sendall(c.data_to_send())
                return hdrs, data
            elif isinstance(ev, h2.events.ConnectionTerminated):
                return None
        s.sendall(c.data_to_send())
    raise AssertionError("stream %d did not end in time (%r)" % (stream, hdrs))


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def frame(msg):
    return b"\0" + len(msg).to_bytes(4, "big") + msg


def h2_call(port, body, path=RLS, extra=()):
    s, c = h2_conn(port)
    try:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, h2_headers(path, extra))
        s.sendall(c.data_to_send())
        while True:  # within the flow-control window: wait for WINDOW_UPDATE frames
            n = min(len(body), c.local_flow_control_window(sid), c.max_outbound_frame_size)
            if n == 0 and body:
                s.settimeout(3)
                b = s.recv(65536)
                if not b:
                    return None
                for ev in c.receive_data(b):
                    if isinstance(ev, h2.events.StreamEnded):
                        raise AssertionError("answered before the whole body")
                s.sendall(c.data_to_send())
                continue
            c.send_data(sid, body[:n], end_stream=(n == len(body)))
            s.sendall(c.data_to_send())
            body = body[n:]
            if not body:
                break
        return h2_read(s, c, sid)
    finally:
        s.close()


def alive(d):
    cl = d.client()
    try:
        assert cl.health(HReq(), timeout=5).status == 1
    finally:
        cl.close()


# ---- tests ------------------------------------------------------------------------------------

@test
def should_rate_limit_answers_envoy_statuses_in_order(tmp):
    with GDaemon(tmp, config=ENVOY_EXAMPLE) as d:
        cl = d.client()
        r = req("messaging", [("message_type", "marketing"), ("to_number", "2061111111")],
                [("nothing", "here")], [("key1", "value1"), ("key2", "value2")])
        for i in range(5):
            a = cl(r)
            assert a.overall_code == OK, a
            assert statuses(a)[0] == (OK, 5, 4 - i), a
            assert statuses(a)[1] == (OK, None, 0), a  # no rule: OK, no current_limit
            s0 = a.statuses[0]
            assert s0.current_limit.unit == UNIT_NUM["DAY"], s0
            assert 0 < s0.duration_until_reset.seconds <= 86400, s0
        a = cl(r)
        assert a.overall_code == OVER and a.statuses[0].code == OVER, a
        assert a.statuses[1].code == OK and a.statuses[2].code == OK, a
        cl.close()


CAL_CFG = ("domain: billing\ndescriptors:\n  - key: account\n"
           "    rate_limit: {policy: \"fixed_window:2/1mo,tz=Australia/Lord_Howe\"}\n")


@test
def should_rate_limit_counts_calendar_months_to_the_real_local_month_end(tmp):
    left = it.local_period_end("Australia/Lord_Howe", 1) - time.time()
    if left < 10:
        time.sleep(left + 1)
    with GDaemon(tmp, config=CAL_CFG) as d:
        cl = d.client()
        r = req("billing", [("account", "a")])
        answers = [cl(r) for _ in range(3)]
        assert [a.overall_code for a in answers] == [OK, OK, OVER], answers
        left = it.local_period_end("Australia/Lord_Howe", 1) - time.time()
        for a in answers:
            got = a.statuses[0].duration_until_reset.seconds
            assert abs(got - left) <= 2, (got, left)
        cl.close()


@test
def json_and_grpc_count_one_limit_with_one_decision(tmp):
    with GDaemon(tmp, config=RL_CFG) as d:
        cl = d.client()
        body = {"domain": "rl", "descriptors": [{"entries": [{"key": "category",
                                                               "value": "account"}]}]}
        r = req("rl", [("category", "account")])
        for i in range(10):
            if i % 2:
                assert cl(r).statuses[0].limit_remaining == 100 - i - 1
            else:
                out = json.loads(d.json(body))
                assert out["statuses"][0]["limitRemaining"] == 100 - i - 1, out
        # The two renderings of one status agree field by field.
        a = cl(req("rl", [("category", "account")], hits=0))
        j = json.loads(d.json(body))["statuses"][0]
        assert a.statuses[0].limit_remaining == j["limitRemaining"] + 1
        assert j["currentLimit"] == {"requestsPerUnit": 100, "unit": "MINUTE"} or \
            j["currentLimit"].get("requestsPerUnit") == a.statuses[0].current_limit.requests_per_unit
        cl.close()


@test
def several_domains_load_from_repeated_config_and_a_directory(tmp):
    configs = [("a.yaml", "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
                          "requests_per_unit: 1}\n"),
               ("dir/b.yaml", "domain: two\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, "
                              "requests_per_unit: 2}\n"),
               ("dir/c.yaml", "domain: three\ndescriptors:\n  - key: k\n    rate_limit: {unit: "
                              "day, requests_per_unit: 3}\n"),
               ("dir/ignored.txt", "not yaml: [\n")]
    with GDaemon(tmp, files=configs, configs=["a.yaml", "dir"]) as d:
        cl = d.client()
        for dom, n in (("one", 1), ("two", 2), ("three", 3)):
            a = cl(req(dom, [("k", "v")]))
            assert statuses(a) == [(OK, n, n - 1)], (dom, a)
        a = cl(req("unknown-domain", [("k", "v")]))
        assert a.overall_code == OK and statuses(a) == [(OK, None, 0)], a
        cl.close()
    # The same domain in two files is refused, naming the second file.
    p = os.path.join(tmp, "dup")
    os.makedirs(p)
    for n in ("1.yaml", "2.yaml"):
        with open(os.path.join(p, n), "w") as f:
            f.write("domain: same\n")
    r = subprocess.run([it.BIN, "--config", p, "--check-config"], capture_output=True, text=True)
    assert r.returncode == 2 and "2.yaml" in r.stderr and "duplicate domain" in r.stderr, r.stderr


@test
def hits_addend_counts_per_request_and_per_descriptor(tmp):
    cfg = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10}\n"
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        assert statuses(cl(req("d", [("k", "a")], hits=3))) == [(OK, 10, 7)]
        # hits_addend 0 (unset) counts 1.
        assert statuses(cl(req("d", [("k", "a")], hits=0))) == [(OK, 10, 6)]
        # Per descriptor: 0 checks without counting, and beats the request's value.
        a = cl(req("d", {"entries": [("k", "a")], "hits_addend": 0}, hits=5))
        assert statuses(a) == [(OK, 10, 6)], a
        a = cl(req("d", {"entries": [("k", "a")], "hits_addend": 6}, [("k", "b")], hits=2))
        assert statuses(a) == [(OK, 10, 0), (OK, 10, 8)], a
        a = cl(req("d", {"entries": [("k", "a")], "hits_addend": 0}))
        assert a.overall_code == OK and statuses(a) == [(OK, 10, 0)], a
        a = cl(req("d", [("k", "a")]))
        assert a.overall_code == OVER, a
        cl.close()


@test
def limit_override_replaces_the_rule_as_envoyproxy_ratelimit_applies_it(tmp):
    cfg = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        o = {"entries": [("k", "a")], "limit": (2, "MINUTE")}
        a = cl(req("d", o))
        assert statuses(a) == [(OK, 2, 1)] and a.statuses[0].current_limit.unit == 2, a
        assert cl(req("d", o)).overall_code == OK
        assert cl(req("d", o)).overall_code == OVER
        # A descriptor no rule matches gets the override's limit too.
        u = {"entries": [("nothing", "x")], "limit": (1, "WEEK")}
        assert statuses(cl(req("d", u))) == [(OK, 1, 0)]
        a = cl(req("d", u))
        assert a.overall_code == OVER and a.statuses[0].current_limit.unit == 7, a
        code, _ = cl.error(req("d", {"entries": [("k", "a")], "limit": (5, "UNKNOWN")}))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, code
        cl.close()


@test
def shadow_mode_rules_never_deny_and_are_counted(tmp):
    cfg = ("domain: d\ndescriptors:\n  - key: s\n    shadow_mode: true\n"
           "    rate_limit: {unit: hour, requests_per_unit: 1}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        for i in range(4):
            a = cl(req("d", [("s", "x")]))
            assert a.overall_code == OK and a.statuses[0].code == OK, a
        m = d.metrics()
        assert re.search(r'ratelimitd_envoy_shadow_mode_total\{rule="d.s"\} 3\b', m), m
        assert re.search(r'ratelimitd_envoy_total_hits_total\{rule="d.s"\} 4\b', m), m
        cl.close()


@test
def blocked_values_and_unknown_descriptors_answer_as_envoy(tmp):
    cfg = ("domain: d\ndescriptors:\n  - key: user\n    value: banned\n"
           "    rate_limit: {unit: minute, requests_per_unit: 0}\n"
           "  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
           "  - key: free\n    rate_limit: {unlimited: true}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        a = cl(req("d", [("user", "banned")], [("user", "ok")], [("free", "x")], [("zz", "y")]))
        assert a.overall_code == OVER, a
        st = a.statuses
        assert st[0].code == OVER and st[0].current_limit.requests_per_unit == 0, st[0]
        assert st[0].current_limit.unit == 2 and 0 < st[0].duration_until_reset.seconds <= 60
        # All or nothing: the blocked descriptor charged nothing elsewhere.
        assert st[1].code == OK and st[1].limit_remaining == 5, st[1]
        assert st[2].code == OK and st[2].limit_remaining == 4294967295, st[2]
        assert not st[3].HasField("current_limit") and st[3].code == OK, st[3]
        # The /json rendering of a blocked rule: proto3 JSON, zero fields omitted.
        out = json.loads(d.json({"domain": "d", "descriptors": [
            {"entries": [{"key": "user", "value": "banned"}]}]}))
        assert out["statuses"][0]["currentLimit"] == {"unit": "MINUTE"}, out
        assert "limitRemaining" not in out["statuses"][0], out
        cl.close()


@test
def several_descriptors_are_all_or_nothing(tmp):
    cfg = ("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
           "  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        both = req("d", [("a", "1")], [("b", "1")])
        assert statuses(cl(both)) == [(OK, 5, 4), (OK, 2, 1)]
        assert statuses(cl(both)) == [(OK, 5, 3), (OK, 2, 0)]
        a = cl(both)
        assert a.overall_code == OVER and statuses(a) == [(OK, 5, 3), (OVER, 2, 0)], a
        cl.close()


@test
def long_units_count_in_envoyproxy_ratelimits_epoch_windows(tmp):
    cfg = "domain: d\ndescriptors:\n" + "".join(
        "  - key: %s\n    rate_limit: {unit: %s, requests_per_unit: 7}\n" % (u.lower(), u.lower())
        for u in UNITS)
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        for u, sec in UNITS.items():
            now = time.time()
            a = cl(req("d", [(u.lower(), "x")]))
            st = a.statuses[0]
            assert st.current_limit.unit == UNIT_NUM[u], (u, st)
            want = sec - int(now) % sec  # envoyproxy/ratelimit: divider - unix % divider
            got = st.duration_until_reset.seconds
            assert abs(got - want) <= 2 or (sec == 1 and got == 1), (u, got, want)
        cl.close()


@test
def response_headers_carry_ietf_fields_retry_after_and_the_x_trio(tmp):
    cfg = ("server:\n  x_ratelimit_headers: true\n  x_ratelimit_reset_header: X-Reset-In\n"
           "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: perk, unit: minute, "
           "requests_per_unit: 3}\n  - key: w\n    rate_limit: {unit: hour, requests_per_unit: 100}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        h = headers(cl(req("d", [("k", "1")], [("w", "1")])))
        assert h["ratelimit-policy"] == '"perk";q=3;w=60', h
        assert re.fullmatch(r'"perk";r=2;t=\d+', h["ratelimit"]), h
        assert h["x-ratelimit-limit"] == "3" and h["x-ratelimit-remaining"] == "2", h
        assert 1 <= int(h["x-reset-in"]) <= 60 and "retry-after" not in h, h
        cl(req("d", [("k", "1")]))
        cl(req("d", [("k", "1")]))
        a = cl(req("d", [("k", "1")]))
        h = headers(a)
        assert a.overall_code == OVER, a
        reset = a.statuses[0].duration_until_reset.seconds
        assert h["retry-after"] == str(reset) and int(h["retry-after"]) >= 1, (h, reset)
        cl.close()


@test
def a_penalty_box_rule_stays_over_limit_until_the_block_ends(tmp):
    cfg = ("domain: d\ndescriptors:\n  - key: login\n    rate_limit: "
           "{policy: \"fixed_window:1/1s,block=1h\"}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        time.sleep(1.02 - time.time() % 1)  # windows are UTC seconds: both in one
        assert cl(req("d", [("login", "ip7")])).overall_code != OVER
        a = cl(req("d", [("login", "ip7")]))
        assert a.overall_code == OVER, a
        time.sleep(1.1)  # a new window: without the box this would pass
        a = cl(req("d", [("login", "ip7")]))
        h = headers(a)
        assert a.overall_code == OVER, a
        assert 3590 <= a.statuses[0].duration_until_reset.seconds <= 3600, a
        assert 3590 <= int(h["retry-after"]) <= 3600, h
        assert cl(req("d", [("login", "ip8")])).overall_code != OVER  # per key
        cl.close()


@test
def drain_over_limit_charges_every_hit_past_the_limit_and_says_when_it_did_not_fit(tmp):
    # Envoy's apply_on_stream_done sends the response's real cost and ignores the answer: a
    # drain_over_limit rule charges it all, as a debt past the limit; a request-time check
    # with hits_addend 0 is OVER_LIMIT once the quota is used up.  A plain rule refuses and
    # charges nothing.
    cfg = ("domain: d\ndescriptors:\n"
           "  - key: llm\n    rate_limit: {unit: hour, requests_per_unit: 10, drain_over_limit: true}\n"
           "  - key: plain\n    rate_limit: {unit: hour, requests_per_unit: 10}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        look = {"entries": [("llm", "u1")], "hits_addend": 0}
        assert statuses(cl(req("d", look))) == [(OK, 10, 10)]
        assert statuses(cl(req("d", [("llm", "u1")], hits=8))) == [(OK, 10, 2)]
        a = cl(req("d", [("llm", "u1")], hits=5))  # 5 > 2 left: charged anyway, said so
        assert a.overall_code == OVER and statuses(a) == [(OVER, 10, 0)], a
        a = cl(req("d", look))
        assert a.overall_code == OVER, a  # 13 of 10 used: the next request may not start
        assert 1 <= a.statuses[0].duration_until_reset.seconds <= 3600, a
        a = cl(req("d", [("llm", "u1")], hits=3))  # a stream end on a used-up limit: charged
        assert a.overall_code == OVER and statuses(a) == [(OVER, 10, 0)], a
        m = d.metrics()
        assert re.search(r'ratelimitd_envoy_total_hits_total\{rule="d.llm"\} 16\b', m), m
        # over_limit counts hits, as envoyproxy/ratelimit does: the 5 + 3 that did not fit
        assert re.search(r'ratelimitd_envoy_over_limit_total\{rule="d.llm"\} 8\b', m), m
        assert statuses(cl(req("d", [("plain", "u1")], hits=8))) == [(OK, 10, 2)]
        a = cl(req("d", [("plain", "u1")], hits=5))
        assert statuses(a) == [(OVER, 10, 2)], a  # refused and not charged
        cl.close()
    bad = os.path.join(tmp, "bad.yaml")
    for text, want in [
        ("  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0, drain_over_limit: true}\n",
         "drain_over_limit needs a limit"),
        ("  - key: k\n    rate_limit: {policy: \"leaky_bucket:5/1s\", drain_over_limit: true}\n",
         "cannot carry a debt"),
        ("  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5, drain_over_limit: 2}\n",
         "drain_over_limit"),
    ]:
        with open(bad, "w") as f:
            f.write("domain: d\ndescriptors:\n" + text)
        p = subprocess.run([sys.argv[1], "--check-config", "--config", bad],
                           capture_output=True, text=True, timeout=20)
        assert p.returncode != 0 and want in p.stderr, (text, p.returncode, p.stderr)
    with open(bad, "w") as f:
        f.write("redis: \"127.0.0.1:1\"\ndomain: d\ndescriptors:\n"
                "  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5, drain_over_limit: true}\n")
    p = subprocess.run([sys.argv[1], "--check-config", "--config", bad],
                       capture_output=True, text=True, timeout=20)
    # Redis mode settles in Redis too (rlt_redis_settle): the rule is accepted there.
    assert p.returncode == 0, (p.returncode, p.stderr)


@test
def a_stream_end_charge_of_2_63_minus_1_saturates_and_keeps_answering_over_limit(tmp):
    # One drain_over_limit call with hits_addend 2^63 - 1 used to turn every later cost-1 call
    # into INVALID_ARGUMENT "cost out of range" until the window ended, and Envoy with
    # failure_mode_deny: false then let every request through.  The debt saturates instead.
    cfg = ("domain: d\ndescriptors:\n"
           "  - key: fw\n    rate_limit: {unit: hour, requests_per_unit: 10, drain_over_limit: true}\n"
           "  - key: sw\n    rate_limit: {policy: \"sliding_window:10/1h\", drain_over_limit: true}\n"
           "  - key: tb\n    rate_limit: {policy: \"token_bucket:10/1h\", drain_over_limit: true}\n"
           "  - key: gc\n    rate_limit: {policy: \"gcra:10/1h\", drain_over_limit: true}\n")
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        for k in ("fw", "sw", "tb", "gc"):
            a = cl(req("d", {"entries": [(k, "u")], "hits_addend": 2 ** 63 - 1}))
            assert a.overall_code == OVER, (k, a)
            for hits in (1, 1, 0, 12345678901, 2 ** 63 - 1, 2 ** 64 - 1):
                a = cl(req("d", {"entries": [(k, "u")], "hits_addend": hits}))
                assert a.overall_code == OVER and a.statuses[0].limit_remaining == 0, (k, hits, a)
        cl.close()


@test
def empty_domain_no_descriptors_and_malformed_messages_are_grpc_errors(tmp):
    with GDaemon(tmp, config=RL_CFG) as d:
        cl = d.client()
        code, msg = cl.error(req("", [("k", "v")]))
        assert code == grpc.StatusCode.UNKNOWN and "domain must not be empty" in msg, (code, msg)
        code, msg = cl.error(Req(domain="rl"))
        assert code == grpc.StatusCode.UNKNOWN and "descriptor list must not be empty" in msg
        for bad in (b"\x0a\xff\xff\xff\xff\x0f",          # a length past the end
                    b"\x0a\x02rl\x12\x05\x0a\x03\x0a\x01",  # truncated nested message
                    b"\x08\x01",                            # domain with a varint wire type
                    b"\x0a\x02rl\x1b",                      # a group
                    b"\x0a\x02rl\x18" + b"\xff" * 11,        # an overlong varint
                    b"\x0a\x02rl\x18\x80\x80\x80\x80\x10"): # hits_addend past uint32
            code, msg = cl.error(bad, raw=True)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (bad, code, msg)
        # Deep nesting inside an unknown field is skipped without recursion.
        deep = b""
        for _ in range(5000):  # 5000 levels of field 15 inside field 15 ...
            deep = b"\x7a" + varint(len(deep)) + deep
        ok = req("rl", [("category", "account")]).SerializeToString()
        a = cl.raw_rls(ok + b"\xfa\x01" + varint(len(deep)) + deep, timeout=5)
        assert a.overall_code == OK, a
        cl.close()


@test
def bearer_token_guards_calls_but_not_the_health_check(tmp):
    cfg = ("server:\n  password: s3cret\ntenants:\n  - {name: acme, password: acmepw}\n" +
           "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
    with GDaemon(tmp, config=cfg) as d:
        for tok in (None, "wrong"):
            cl = d.client(tok)
            code, _ = cl.error(req("d", [("k", "v")]))
            assert code == grpc.StatusCode.UNAUTHENTICATED, code
            assert cl.health(HReq(), timeout=5).status == 1
            cl.close()
        admin, tenant = d.client("s3cret"), d.client("acmepw")
        assert statuses(admin(req("d", [("k", "v")]))) == [(OK, 2, 1)]
        # The tenant's keys are its own (prefixed): a fresh count.
        assert statuses(tenant(req("d", [("k", "v")]))) == [(OK, 2, 1)]
        assert statuses(admin(req("d", [("k", "v")]))) == [(OK, 2, 0)]
        m = d.metrics("s3cret")
        assert re.search(r'ratelimitd_grpc_responses_total\{code="UNAUTHENTICATED"\} 2\b', m), m
        admin.close()
        tenant.close()


@test
def a_call_past_its_grpc_timeout_is_deadline_exceeded_not_late(tmp):
    with GDaemon(tmp, config=RL_CFG) as d:
        body = frame(req("rl", [("category", "account")]).SerializeToString())
        s, c = h2_conn(d.grpc)
        try:
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, h2_headers(RLS, [("grpc-timeout", "20m")]))
            s.sendall(c.data_to_send())
            time.sleep(0.1)  # the body arrives after the deadline
            c.send_data(sid, body, end_stream=True)
            s.sendall(c.data_to_send())
            hdrs, data = h2_read(s, c, sid)
            assert hdrs.get("grpc-status") == "4" and data == b"", (hdrs, data)
            # In time: answered.
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, h2_headers(RLS, [("grpc-timeout", "5S")]))
            c.send_data(sid, body, end_stream=True)
            s.sendall(c.data_to_send())
            hdrs, data = h2_read(s, c, sid)
            assert hdrs.get("grpc-status") == "0", hdrs
            assert Resp.FromString(data[5:]).statuses[0].limit_remaining == 99
        finally:
            s.close()
        # The late call charged nothing.
        cl = d.client()
        assert cl(req("rl", [("category", "account")])).statuses[0].limit_remaining == 98
        m = d.metrics()
        assert re.search(r'ratelimitd_grpc_responses_total\{code="DEADLINE_EXCEEDED"\} 1\b', m), m
        cl.close()


@test
def grpc_timeouts_at_every_units_maximum_are_answered_and_never_overflow(tmp):
    # gRPC allows 8 digits: 99999999H is about 3.6e20 ns, past int64.  A deadline int64 cannot
    # hold is no deadline: the call is answered, not DEADLINE_EXCEEDED, and the daemon (under
    # UBSan too) stays up.  2562047H is the last hour count that fits; 2562048H the first not.
    with GDaemon(tmp, config=RL_CFG) as d:
        body = frame(req("rl", [("category", "timeouts")]).SerializeToString())
        for t in ("99999999H", "2562047H", "2562048H", "99999999M", "99999999S", "99999999m",
                  "99999999u", "99999999n", "1n"):
            hdrs, data = h2_call(d.grpc, body, extra=[("grpc-timeout", t)])
            want = "4" if t == "1n" else "0"  # one nanosecond has passed by the decision
            assert hdrs.get("grpc-status") == want, (t, hdrs)
        alive(d)


def raw_frame(ftype, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


def raw_frames(s, wait=3.0):
    """Reads frames until the peer is quiet for `wait` s: [(type, flags, stream, payload)]."""
    buf, out = b"", []
    s.settimeout(wait)
    while True:
        try:
            b = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not b:
            break
        buf += b
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            n = int.from_bytes(buf[:3], "big")
            out.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n]))
            buf = buf[9 + n:]
    return out


@test
def an_hpack_amplified_header_list_is_refused_as_the_http1_parser_refuses_it(tmp):
    # One 4,000-byte HPACK entry referenced 20,000 times: about 24 KB on the wire, 80 MB of
    # decoded headers.  The stream is reset (ENHANCE_YOUR_CALM, 0xb); the connection lives on.
    import hpack
    with GDaemon(tmp, config=RL_CFG) as d:
        enc = hpack.Encoder()
        block = enc.encode(h2_headers(RLS) + [("x-big", "a" * 4000)] * 20000)
        assert len(block) < 30000, len(block)
        s = socket.create_connection(("127.0.0.1", d.grpc), timeout=5)
        try:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + raw_frame(4, 0, 0, b""))
            chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
            out = raw_frame(1, 0x1 | (0x4 if len(chunks) == 1 else 0), 1, chunks[0])  # END_STREAM
            for i, c in enumerate(chunks[1:], 1):
                out += raw_frame(9, 0x4 if i == len(chunks) - 1 else 0, 1, c)
            s.sendall(out)
            frames = raw_frames(s, wait=2.0)
            on1 = [(t, p) for t, _, sid, p in frames if sid == 1]
            assert (3, (11).to_bytes(4, "big")) in on1, frames  # RST_STREAM ENHANCE_YOUR_CALM
            assert not any(t == 1 for t, _ in on1), on1           # and no answer
            # The same connection still answers a normal call (a fresh HPACK context is not
            # needed: the refused block was decoded, the table stays in step).
            small = enc.encode(h2_headers(HEALTH))
            msg = frame(b"")
            s.sendall(raw_frame(1, 0x4, 3, small) + raw_frame(0, 0x1, 3, msg))
            frames = raw_frames(s, wait=2.0)
            assert any(t == 1 and sid == 3 for t, _, sid, _ in frames), frames
        finally:
            s.close()
        alive(d)


@test
def stalled_grpc_bodies_count_against_max_memory(tmp):
    # 16 MB budget: 2 MB for every connection's buffers together.  100 connections x 100
    # streams x 10,400 body bytes never finished took 94 MB when the gRPC layer did not count
    # them.  Now streams past the budget are reset (ENHANCE_YOUR_CALM) and RSS stays bounded.
    files = [("server.yaml", "server:\n  max_memory: 16mb\n")]
    with GDaemon(tmp, "--config", os.path.join(tmp, "server.yaml"), config=RL_CFG,
                 files=files) as d:
        base = rss_from_proc(d.p.pid)
        chunk = frame(b"\x0a\x01x" + b"y" * 10400)[:10400]  # never the whole message
        socks, refused = [], 0
        for _ in range(100):
            s, c = h2_conn(d.grpc)
            socks.append((s, c))
            for _ in range(100):
                sid = c.get_next_available_stream_id()
                c.send_headers(sid, h2_headers(RLS))
                n = min(len(chunk), c.local_flow_control_window(sid))
                if n:
                    c.send_data(sid, chunk[:n])
            try:
                s.sendall(c.data_to_send())
            except OSError:
                pass
        time.sleep(1.0)
        for s, c in socks:  # read what came back: WINDOW_UPDATEs and resets
            s.settimeout(0.05)
            try:
                while True:
                    b = s.recv(1 << 20)
                    if not b:
                        break
                    for ev in c.receive_data(b):
                        if isinstance(ev, h2.events.StreamReset) and ev.error_code == 11:
                            refused += 1
            except (socket.timeout, OSError, h2.exceptions.ProtocolError):
                pass
        grown = rss_from_proc(d.p.pid) - base
        assert refused > 0, "no stream was refused"
        assert SANITIZED or grown < 24 << 20, "RSS grew %d MB" % (grown >> 20)
        for s, _ in socks:
            s.close()
        time.sleep(0.5)
        alive(d)  # served again once they are gone


def rss_from_proc(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@test
def eight_concurrent_clients_on_one_key_get_exactly_the_limit(tmp):
    cfg = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n"
    with GDaemon(tmp, config=cfg) as d:
        ok = [0] * 8
        n = 150 if not it.TSAN else 40

        def run(i):
            cl = d.client()
            r = req("d", [("k", "one")])
            for _ in range(n):
                if cl(r, timeout=20).overall_code == OK:
                    ok[i] += 1
            cl.close()
        ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        want = min(1000, 8 * n)
        assert sum(ok) == want, (ok, sum(ok))
        m = d.metrics()
        assert re.search(r'ratelimitd_grpc_calls_total\{method="ShouldRateLimit"\} %d\b' % (8 * n), m)
        assert re.search(r'ratelimitd_envoy_within_limit_total\{rule="d.k"\} %d\b' % want, m), m


@test
def metrics_have_help_and_type_for_every_grpc_and_rule_family(tmp):
    with GDaemon(tmp, config=ENVOY_EXAMPLE) as d:
        cl = d.client()
        for _ in range(5):  # calls 4 and 5 use 80 % and more of 5 a day
            cl(req("messaging", [("message_type", "marketing"), ("to_number", "1")]))
        cl.health(HReq(), timeout=5)
        m = d.metrics()
        for fam in ("grpc_calls_total", "grpc_responses_total", "envoy_total_hits_total",
                    "envoy_over_limit_total", "envoy_near_limit_total",
                    "envoy_within_limit_total", "envoy_shadow_mode_total"):
            assert "# HELP ratelimitd_%s " % fam in m and \
                "# TYPE ratelimitd_%s counter" % fam in m, fam
        assert re.search(r'ratelimitd_grpc_calls_total\{method="Check"\} 1\b', m), m
        rule = "messaging.message_type_marketing.to_number"
        assert re.search(r'ratelimitd_envoy_near_limit_total\{rule="%s"\} 2\b' % rule, m), m
        cl.close()


@test
def health_check_serves_the_rate_limit_service_and_refuses_others(tmp):
    with GDaemon(tmp) as d:
        cl = d.client()
        assert cl.health(HReq(), timeout=5).status == 1
        assert cl.health(HReq(service="envoy.service.ratelimit.v3.RateLimitService"),
                         timeout=5).status == 1
        try:
            cl.health(HReq(service="other"), timeout=5)
            raise AssertionError("an unknown service was served")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
        cl.close()


@test
def garbage_broken_frames_and_oversized_messages_leave_the_daemon_up(tmp):
    with GDaemon(tmp, config=ENVOY_EXAMPLE) as d:
        # Not the HTTP/2 preface: closed.
        got = it.raw(d.grpc, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.endswith(b"<closed>"), got
        got = it.raw(d.grpc, os.urandom(4096))
        assert got.endswith(b"<closed>"), got
        # A frame on stream 0 that must not be there, a bad length, a truncated frame.
        pre = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\x04\0\0\0\0\0"
        for bad in (b"\0\0\x05\x00\x01\0\0\0\0hello",          # DATA on stream 0
                    b"\0\0\x03\x04\0\0\0\0\0abc",              # SETTINGS of 3 bytes
                    b"\xff\xff\xff\x01\x04\0\0\0\x01",        # a HEADERS frame past max size
                    b"\0\0\x08\x06\0\0\0\0\x03" + b"x" * 8):  # PING on stream 3
            got = it.raw(d.grpc, pre + bad)
            assert b"\x07\x00\x00\x00\x00\x00" in got and got.endswith(b"<closed>"), (bad, got)
        # Unknown method, wrong content type, compressed and oversized messages.
        hdrs, _ = h2_call(d.grpc, frame(b""), path="/x.Y/Z")
        assert hdrs["grpc-status"] == "12", hdrs
        hdrs, _ = h2_call(d.grpc, frame(b"\x0a\x01x"), extra=[("grpc-encoding", "gzip")])
        assert hdrs["grpc-status"] in ("0", "2", "12"), hdrs  # identity bytes: decided
        hdrs, _ = h2_call(d.grpc, b"\x01" + frame(b"\x0a\x01x")[1:])
        assert hdrs["grpc-status"] == "12", hdrs
        hdrs, _ = h2_call(d.grpc, frame(b"\x0a\x01x")[:-1])
        assert hdrs["grpc-status"] == "3", hdrs
        big = req("rl", [("category", "x" * 70000)]).SerializeToString()
        hdrs, _ = h2_call(d.grpc, frame(big))
        assert hdrs["grpc-status"] == "8", hdrs
        alive(d)
        r = it.raw(d.port, it.resp("PING"))
        assert r.startswith(b"+PONG"), r


@test
def the_envoy_example_config_answers_the_descriptors_its_envoy_yaml_sends(tmp):
    cfg = open(os.path.join(ROOT, "examples/envoy/ratelimit-config.yaml")).read()
    with GDaemon(tmp, config=cfg) as d:
        cl = d.client()
        # What examples/envoy/envoy.yaml's rate_limits produce for a POST with both headers.
        r = req("edge", [("remote_address", "198.51.100.7")], [("header_match", "api_write")],
                [("api_key", "k1")], [("api_key", "k1"), ("plan", "free")])
        a = cl(r)
        assert a.overall_code == OK, a
        assert statuses(a) == [(OK, 100, 99), (OK, 10, 9), (OK, 50000, 49999), (OK, 1000, 999)], a
        assert [s.current_limit.unit for s in a.statuses] == [2, 1, 7, 5], a
        assert headers(a)["ratelimit-policy"] == '"api_writes";q=10;w=1', headers(a)
        a = cl(req("edge", [("remote_address", "192.0.2.66")]))
        assert a.overall_code == OVER, a
        cl.close()


@redis_test
def redis_failures_follow_each_rules_fail_mode(tmp):
    servers = os.environ["RLT_REDIS_SERVERS"]
    base = os.environ["RLT_REDIS_BASE"]
    cfg = ("redis:\n  address: \"%s\"\n  timeout: 100ms\n  backoff_min: 200ms\n" % servers +
           "domain: d\ndescriptors:\n"
           "  - key: open\n    rate_limit: {unit: hour, requests_per_unit: 10, fail: open}\n"
           "  - key: closed\n    rate_limit: {unit: hour, requests_per_unit: 10, fail: closed}\n")
    with GDaemon(tmp, "--no-snapshot", config=cfg) as d:
        cl = d.client()
        assert statuses(cl(req("d", [("open", "x")]))) == [(OK, 10, 9)]
        assert statuses(cl(req("d", [("closed", "x")]))) == [(OK, 10, 9)]
        pid = int(open(os.path.join(base, "s0", "pid")).read())
        os.kill(pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                a = cl(req("d", [("open", "x")]))
                assert a.overall_code == OK, a
                a = cl(req("d", [("closed", "x")]))
                assert a.overall_code == OVER, a
        finally:
            os.kill(pid, signal.SIGCONT)
        m = d.metrics()
        f = re.search(r'ratelimitd_redis_decisions_total\{by="fail_closed"\} (\d+)', m)
        assert f and int(f.group(1)) >= 1, m
        cl.close()


@redis_test
def two_daemons_on_one_redis_share_a_grpc_limit(tmp):
    servers = os.environ["RLT_REDIS_SERVERS"]
    cfg = ("redis:\n  address: \"%s\"\n" % servers +
           "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 6}\n")
    os.makedirs(os.path.join(tmp, "a"))
    os.makedirs(os.path.join(tmp, "b"))
    with GDaemon(os.path.join(tmp, "a"), "--no-snapshot", config=cfg) as a, \
            GDaemon(os.path.join(tmp, "b"), "--no-snapshot", config=cfg) as b:
        ca, cb = a.client(), b.client()
        ok = sum(c(req("d", [("k", "shared")])).overall_code == OK for c in (ca, cb) * 5)
        assert ok == 6, ok
        ca.close()
        cb.close()


@redis_test
def drain_over_limit_on_redis_charges_every_hit_of_two_daemons_past_the_limit(tmp):
    # The stream-end call's real cost is a reservation of 0 settled at the cost, in Redis:
    # two daemons charge one limit, past it as a debt.
    servers = os.environ["RLT_REDIS_SERVERS"]
    cfg = ("redis:\n  address: \"%s\"\n" % servers +
           "domain: d\ndescriptors:\n"
           "  - key: llm\n    rate_limit: {unit: hour, requests_per_unit: 10, drain_over_limit: true}\n")
    os.makedirs(os.path.join(tmp, "a"))
    os.makedirs(os.path.join(tmp, "b"))
    with GDaemon(os.path.join(tmp, "a"), "--no-snapshot", config=cfg) as a, \
            GDaemon(os.path.join(tmp, "b"), "--no-snapshot", config=cfg) as b:
        ca, cb = a.client(), b.client()
        look = {"entries": [("llm", "u1")], "hits_addend": 0}
        assert statuses(ca(req("d", look))) == [(OK, 10, 10)]
        assert statuses(ca(req("d", [("llm", "u1")], hits=8))) == [(OK, 10, 2)]
        r = cb(req("d", [("llm", "u1")], hits=5))  # 5 > 2 left: charged anyway, said so
        assert r.overall_code == OVER and statuses(r) == [(OVER, 10, 0)], r
        assert ca(req("d", look)).overall_code == OVER  # 13 of 10 used, seen by the other
        ca.close()
        cb.close()


def main():
    return it.run_tests(REDIS_TESTS if REDIS else TESTS, ARGS, prefix="rltg-")


if __name__ == "__main__":
    sys.exit(main())
