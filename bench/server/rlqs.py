#!/usr/bin/env python3
"""bench/server/rlqs.py [RATELIMITD] [SECONDS]: how many RLQS usage reports one daemon thread
absorbs.  ratelimitd runs with --threads 1; STREAMS streams (default 1,000, over STREAMS / 100
HTTP/2 connections: the server's 100 concurrent streams each) act as Envoys reporting the same
BUCKETS buckets (default 100) each, one report message of all their buckets per stream per
round, as fast as the client can, for SECONDS (default 10).  Every bucket has a budget
(token_bucket:100000/1s) divided among its 1,000 members, so its division is recomputed as
reports arrive (every TTL / 12).  The reports' counts vary from round to round.

Prints the reports (messages) and bucket usages sent, the answers (response messages and
bucket actions) received, the server's CPU time (user + system, /proc/PID/stat, all threads),
and from them usages per server CPU second and server CPU per usage and per assignment.
The client is Python (python3-h2 over pre-encoded messages): when it, not the server, is the
limit, the per-CPU-second figures still hold (they divide by the server's CPU, not the wall
clock); the wall-clock rate is printed too.  Run with /usr/bin/python3 (Debian's h2)."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(HERE, "../../build/release/src/server/ratelimitd"))
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
STREAMS = int(os.environ.get("STREAMS", "1000"))
BUCKETS = int(os.environ.get("BUCKETS", "100"))
PATH = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"


def varint(n):
    b = bytearray()
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            b.append(x | 0x80)
        else:
            b.append(x)
            return bytes(b)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vfield(num, v):
    return varint(num << 3) + varint(v)


def report(domain, round_no):
    """A RateLimitQuotaUsageReports of every bucket, 150 ms elapsed, counts by round."""
    body = field(1, domain) if domain else b""
    for b in range(BUCKETS):
        pair = field(1, field(1, b"b") + field(2, b"%d" % b))
        u = (field(1, pair) + field(2, vfield(2, 150000000)) +
             vfield(3, 10 + (round_no * 7 + b) % 40) + vfield(4, (round_no + b) % 3))
        body += field(2, u)
    return b"\0" + len(body).to_bytes(4, "big") + body


def cpu_ticks(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def main():
    tmp = tempfile.mkdtemp(prefix="rlt-rlqs-bench-")
    with open(os.path.join(tmp, "q.yaml"), "w") as f:
        f.write("domain: bench\nquota_buckets:\n  - match: {b: \"*\"}\n"
                "    policy: token_bucket:100000/1s,burst=100000\n")
    out = open(os.path.join(tmp, "out"), "w+")
    p = subprocess.Popen([BIN, "--config", "q.yaml", "--port", "0", "--http-port", "0",
                          "--grpc-port", "0", "--threads", "1", "--no-snapshot"], cwd=tmp,
                         stdout=out, stderr=subprocess.DEVNULL)
    try:
        port = None
        for _ in range(200):
            out.seek(0)
            m = re.search(r"grpc [^ ]+:(\d+)", out.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.02)
        assert port, "the daemon did not start"
        # Pre-encoded reports: the first of a stream names the domain; rounds cycle over 8.
        first = [report(b"bench", r) for r in range(8)]
        later = [report(b"", r) for r in range(8)]
        conns = []
        for c in range((STREAMS + 99) // 100):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            h.initiate_connection()
            h.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
            h.increment_flow_control_window(1 << 30)
            ids = []
            for i in range(min(100, STREAMS - c * 100)):
                sid = h.get_next_available_stream_id()
                h.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", PATH),
                                     (":authority", "x"), ("content-type", "application/grpc"),
                                     ("te", "trailers")])
                ids.append(sid)
            s.sendall(h.data_to_send())
            s.setblocking(False)
            conns.append((s, h, ids))
        sent = answers = actions = 0
        pending = {}  # per (connection, stream): bytes of response messages not yet parsed
        t0, c0 = time.monotonic(), cpu_ticks(p.pid)
        round_no = 0
        named = set()  # (connection, stream) that sent their first report (with the domain)
        while time.monotonic() - t0 < SECONDS:
            for (s, h, ids) in conns:
                # From a different stream each round: the connection's flow-control window
                # would otherwise always run out on the same last streams.
                k = round_no % len(ids)
                for sid in ids[k:] + ids[:k]:
                    if h.local_flow_control_window(sid) < 2 * len(first[0]):
                        continue
                    h.send_data(sid, (later if (id(s), sid) in named else first)[round_no % 8])
                    named.add((id(s), sid))
                    sent += 1
                s.setblocking(True)
                s.sendall(h.data_to_send())
                s.setblocking(False)
                try:
                    while True:
                        data = s.recv(1 << 20)
                        if not data:
                            raise SystemExit("the daemon closed a connection")
                        for ev in h.receive_data(data):
                            if isinstance(ev, h2.events.DataReceived):
                                h.acknowledge_received_data(ev.flow_controlled_length,
                                                            ev.stream_id)
                                buf = pending.get((s, ev.stream_id), b"") + ev.data
                                while len(buf) >= 5 and len(buf) >= 5 + int.from_bytes(buf[1:5], "big"):
                                    n = int.from_bytes(buf[1:5], "big")
                                    msg, buf = buf[5:5 + n], buf[5 + n:]
                                    answers += 1
                                    actions += count_actions(msg)
                                pending[(s, ev.stream_id)] = buf
                            elif isinstance(ev, h2.events.StreamEnded) or \
                                    isinstance(ev, h2.events.StreamReset):
                                raise SystemExit("a stream ended: %r" % ev)
                        out_ = h.data_to_send()
                        if out_:
                            s.setblocking(True)
                            s.sendall(out_)
                            s.setblocking(False)
                except BlockingIOError:
                    pass
            round_no += 1
        wall = time.monotonic() - t0
        time.sleep(0.3)  # the last reports are absorbed
        cpu = (cpu_ticks(p.pid) - c0) / os.sysconf("SC_CLK_TCK")
        usages = sent * BUCKETS
        print("streams %d x buckets %d, %.1f s: %d reports (%d usages) sent, %.0f reports/s wall"
              % (STREAMS, BUCKETS, wall, sent, usages, sent / wall))
        print("answers: %d response messages, %d bucket actions" % (answers, actions))
        print("server CPU %.2f s: %.0f reports and %.0f usages per CPU second; "
              "%.1f us per report, %.2f us per usage, %.1f us per action" %
              (cpu, sent / cpu, usages / cpu, cpu * 1e6 / sent, cpu * 1e6 / usages,
               cpu * 1e6 / max(actions, 1)))
    finally:
        p.terminate()
        p.wait()


def count_actions(msg):
    """Top-level field-1 entries of a RateLimitQuotaResponse."""
    i = n = 0
    while i < len(msg):
        tag = msg[i]
        i += 1
        ln = shift = 0
        while True:
            b = msg[i]
            i += 1
            ln |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        i += ln
        n += tag == 0x0A
    return n


if __name__ == "__main__":
    main()
