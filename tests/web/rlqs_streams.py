#!/usr/bin/env python3
"""Envoys for tests/web/quotas.mjs: real grpcio StreamRateLimitQuotas streams (the Envoy of
tests/server/rlqs_integration.py) that report once and then stay open, silent, so that the
quota state holds still while the test reads it.

Usage: rlqs_streams.py GRPC_PORT WEB_STREAMS API_STREAMS API_BUCKETS   (with /usr/bin/python3)
  - WEB_STREAMS Envoys (each its own connection) report bucket {name: web}, the i-th
    allowed = 10 x (i + 1) over 1 s;
  - API_STREAMS Envoys (each its own connection: another client) report API_BUCKETS buckets
    {name: api, user: s<i>-u<j>} each, allowed = j % 13 over 1 s.
When every stream has its answers, prints one line of JSON (what the reports amount to) and
waits for stdin to close; then ends the streams.  Exit 1 (and a message) on a stream error."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
sys.argv = [sys.argv[0], "/nonexistent"] + sys.argv[1:]  # integration.py reads argv[1]
import rlqs_integration as rq  # noqa: E402  (Envoy, B, wait_for)


def main():
    port, nweb, napi, nbk = (int(a) for a in sys.argv[2:6])
    envoys = []
    want = {}
    web = rq.B(name="web")
    for i in range(nweb):
        e = rq.Envoy(port, own_connection=True)
        e.report([web], elapsed=1.0, allowed=10 * (i + 1), denied=0)
        envoys.append(e)
        want[id(e)] = 1
    api_demand = 0
    for i in range(napi):
        e = rq.Envoy(port, own_connection=True)
        m = rq.Rep(domain="q")
        for j in range(nbk):
            u = m.bucket_quota_usages.add()
            u.bucket_id.bucket["name"] = "api"
            u.bucket_id.bucket["user"] = "s%d-u%d" % (i, j)
            u.time_elapsed.seconds = 1
            u.num_requests_allowed = j % 13
            api_demand += j % 13
        e.send(m)
        envoys.append(e)
        want[id(e)] = nbk
    for e in envoys:
        rq.wait_for(lambda: len(e.assign) >= want[id(e)] or e.error is not None, 120,
                    what="every bucket's answer")
        if e.error is not None:
            print("stream error: %s" % e.error, file=sys.stderr)
            return 1
    web_demand = sum(10 * (i + 1) for i in range(nweb))
    print(json.dumps({"buckets": (1 if nweb else 0) + napi * nbk, "web_demand": web_demand,
                      "web_members": nweb, "demand": web_demand + api_demand}), flush=True)
    sys.stdin.read()
    for e in envoys:
        e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
