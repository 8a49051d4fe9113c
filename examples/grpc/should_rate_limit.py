#!/usr/bin/python3
"""Asks ratelimitd over gRPC (Envoy's rate limit service) about one request, as Envoy would:
  ./should_rate_limit.py 127.0.0.1:8081 DOMAIN KEY=VALUE[,KEY=VALUE...] ...  (a descriptor each)
Debian's grpcio and grpc-tools (python3-grpcio python3-grpc-tools); the messages come from
the shipped proto (src/server/.../rls.proto), compiled when the script starts."""
import glob, os, sys, tempfile
import grpc
from grpc_tools import protoc

here = os.path.dirname(os.path.abspath(__file__))
proto = glob.glob(here + "/../../src/server/**/rls.proto", recursive=True)[0]
with tempfile.TemporaryDirectory() as out:
    protoc.main(["protoc", "-I" + os.path.dirname(proto), "-I" + os.path.dirname(protoc.__file__)
                 + "/_proto", "--python_out=" + out, "--grpc_python_out=" + out, proto])
    sys.path.insert(0, out)
    import rls_pb2, rls_pb2_grpc  # noqa: E401,E402 (generated just above)


def should_rate_limit(target, domain, descriptors):
    """descriptors: a list of [(key, value), ...]; returns the RateLimitResponse."""
    req = rls_pb2.RateLimitRequest(domain=domain, descriptors=[rls_pb2.RateLimitDescriptor(
        entries=[rls_pb2.Entry(key=k, value=v) for k, v in d]) for d in descriptors])
    with grpc.insecure_channel(target) as channel:
        return rls_pb2_grpc.RateLimitServiceStub(channel).ShouldRateLimit(req, timeout=5)


if __name__ == "__main__":
    descs = [[tuple(e.split("=", 1)) for e in a.split(",")] for a in sys.argv[3:]]
    print(should_rate_limit(sys.argv[1], sys.argv[2], descs), end="")
