#!/usr/bin/python3
"""The examples of examples/, checked as their readers use them.

Usage: test_examples.py RATELIMITD SOURCE_DIR envoy|grpc
  envoy: examples/envoy/ as a pair.  Every rule of ratelimit-config.yaml must be reachable
         from an action of envoy.yaml (walking both files: a rule no descriptor Envoy sends
         can match is dead configuration, and the docs would promise what cannot happen);
         then each rule is asked for over gRPC with the descriptor its action sends, and
         ratelimitd must answer with that rule (its limit, unlimited, or blocked).  The
         ratelimitd cluster must use typed_extension_protocol_options (HttpProtocolOptions),
         not the deprecated cluster-level http2_protocol_options.
  grpc:  examples/grpc/should_rate_limit.py run as its docstring says, against ratelimitd.
Runs with /usr/bin/python3 (Debian's grpcio, grpc-tools and yaml)."""
import os
import re
import subprocess
import sys
import tempfile
import time

BIN, SRC, WHAT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
sys.dont_write_bytecode = True  # importing the example must leave nothing in the checkout
try:
    import yaml
except ImportError as e:
    sys.exit("FAIL %s (install python3-yaml python3-grpcio python3-grpc-tools)" % e)
class _Any:
    def __repr__(self):
        return "*"


ANY = _Any()  # a descriptor value taken from the request (an address, a header)


class Daemon:
    def __init__(self, config):
        self.tmp = tempfile.mkdtemp(prefix="rlt-ex-")
        self.out = open(os.path.join(self.tmp, "out"), "w+")
        self.p = subprocess.Popen([BIN, "--no-snapshot", "--port", "-1", "--http-port", "-1",
                                   "--grpc-port", "0", "--config", config],
                                  stdout=self.out, stderr=subprocess.STDOUT, cwd=self.tmp)
        deadline = time.time() + 10
        while time.time() < deadline:
            self.out.seek(0)
            m = re.search(r"grpc [^ ]+:(\d+)", self.out.read())
            if m:
                self.target = "127.0.0.1:" + m.group(1)
                return
            assert self.p.poll() is None, "ratelimitd exited: " + open(self.out.name).read()
            time.sleep(0.02)
        raise AssertionError("ratelimitd did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait(10)
        subprocess.run(["rm", "-rf", self.tmp])


def rules(nodes, path=()):
    """(path of (key, value or None), rate_limit) for every node with a rate_limit."""
    for n in nodes or []:
        p = path + ((n["key"], n.get("value")),)
        if "rate_limit" in n:
            yield p, n["rate_limit"]
        yield from rules(n.get("descriptors"), p)


def action_entry(a, route_match):
    """The descriptor entry (key, value or ANY) an Envoy rate limit action sends."""
    (kind, spec), = a.items()
    if kind == "remote_address":
        return ("remote_address", ANY)
    if kind == "header_value_match":
        return (spec.get("descriptor_key", "header_match"), spec["descriptor_value"])
    if kind == "generic_key":
        return (spec.get("descriptor_key", "generic_key"), spec["descriptor_value"])
    if kind == "request_headers":
        if spec["header_name"] == ":path" and "path" in route_match:
            return (spec["descriptor_key"], route_match["path"])  # the route's exact path
        return (spec["descriptor_key"], ANY)
    raise AssertionError("the test does not know the action %r: teach it" % kind)


def envoy_descriptors(envoy):
    """Every descriptor envoy.yaml's routes send, and the filter's domain."""
    out, domains = [], set()
    for lis in envoy["static_resources"]["listeners"]:
        for chain in lis["filter_chains"]:
            for f in chain["filters"]:
                hcm = f["typed_config"]
                for hf in hcm.get("http_filters", []):
                    if hf["name"] == "envoy.filters.http.ratelimit":
                        domains.add(hf["typed_config"]["domain"])
                for vh in hcm["route_config"]["virtual_hosts"]:
                    for r in vh["routes"]:
                        for rl in r.get("route", {}).get("rate_limits", []):
                            out.append((r["match"], [action_entry(a, r["match"])
                                                     for a in rl["actions"]]))
    return out, domains


def reaches(desc, path):
    return len(desc) == len(path) and all(
        dk == rk and (rv is None or dv is ANY or dv == rv) for (dk, dv), (rk, rv) in zip(desc, path))


def test_envoy():
    ex = os.path.join(SRC, "examples/envoy")
    envoy = yaml.safe_load(open(os.path.join(ex, "envoy.yaml")))
    conf_path = os.path.join(ex, "ratelimit-config.yaml")
    conf = yaml.safe_load(open(conf_path))
    descs, domains = envoy_descriptors(envoy)
    assert domains == {conf["domain"]}, (domains, conf["domain"])
    problems = []
    # The rate limit cluster speaks h2c the current way.
    for c in envoy["static_resources"]["clusters"]:
        if "http2_protocol_options" in c:
            problems.append("cluster %s: the deprecated http2_protocol_options (use "
                            "typed_extension_protocol_options)" % c["name"])
    rl = [c for c in envoy["static_resources"]["clusters"] if c["name"] == "ratelimitd"][0]
    opts = rl.get("typed_extension_protocol_options", {}).get(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {})
    if opts.get("@type") != "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions" \
            or "http2_protocol_options" not in opts.get("explicit_http_config", {}):
        problems.append("cluster ratelimitd: no HttpProtocolOptions with explicit_http_config."
                        "http2_protocol_options (h2c)")
    # Every rule reachable; then asked for over gRPC with the descriptor that reaches it.
    sys.path.insert(0, os.path.join(SRC, "examples/grpc"))
    from should_rate_limit import should_rate_limit
    d = Daemon(conf_path)
    try:
        n = 0
        for path, limit in rules(conf["descriptors"]):
            name = ", ".join("%s=%s" % (k, v if v is not None else "*") for k, v in path)
            by = [(m, desc) for m, desc in descs if reaches(desc, path)]
            if not by:
                problems.append("rule (%s): no action of envoy.yaml sends a descriptor it "
                                "matches" % name)
                continue
            entries = [(k, rv if rv is not None else (dv if dv is not ANY else "sample-" + k))
                       for (k, rv), (_, dv) in zip(path, by[0][1])]
            st = should_rate_limit(d.target, conf["domain"], [entries]).statuses[0]
            if limit.get("unlimited"):
                good = st.code == 1 and st.limit_remaining == 4294967295 and not st.HasField("current_limit")
            elif limit["requests_per_unit"] == 0:
                good = st.code == 2
            else:
                good = (st.code == 1 and st.current_limit.requests_per_unit == limit["requests_per_unit"]
                        and st.limit_remaining == limit["requests_per_unit"] - 1)
            if not good:
                problems.append("rule (%s), asked with %s: ratelimitd answered %s" % (name, entries, st))
            else:
                print("ok   rule (%s): sent by %s (route %s), answered by ratelimitd" % (name, by[0][1], by[0][0]))
                n += 1
    finally:
        d.stop()
    assert not problems, "\n".join(problems)
    assert n >= 7, n
    print("ok   every rule of examples/envoy/ratelimit-config.yaml (%d) is reached from envoy.yaml" % n)


def test_grpc():
    d = Daemon(os.path.join(SRC, "examples/envoy/ratelimit-config.yaml"))
    try:
        script = os.path.join(SRC, "examples/grpc/should_rate_limit.py")
        ok = subprocess.run([script, d.target, "edge", "remote_address=10.0.0.1", "path=/healthz"],
                            capture_output=True, text=True, timeout=60, cwd=d.tmp,
                            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("overall_code: OK\n"), ok.stdout
        assert 'name: "per_client"' in ok.stdout and "limit_remaining: 99\n" in ok.stdout, ok.stdout
        assert "limit_remaining: 4294967295" in ok.stdout, ok.stdout  # /healthz: unlimited
        blocked = subprocess.run([script, d.target, "edge", "remote_address=192.0.2.66"],
                                 capture_output=True, text=True, timeout=60, cwd=d.tmp)
        assert blocked.stdout.startswith("overall_code: OVER_LIMIT\n"), blocked.stdout
        print("ok   examples/grpc/should_rate_limit.py: OK for a client, OVER_LIMIT for the "
              "blocked address")
    finally:
        d.stop()


if __name__ == "__main__":
    try:
        {"envoy": test_envoy, "grpc": test_grpc}[WHAT]()
    except AssertionError as e:
        print("FAIL %s: %s" % (WHAT, e))
        sys.exit(1)
