#!/usr/bin/env python3
"""The workers' scratch arenas (src/server/base/scratch.h), end to end: counted in INFO's
used_memory_scratch and within used_memory_connections (so in max_memory), given back after
every command (a transaction of many multi-key commands fits one arena), and each worker's own
(threads deciding RL.MULTI at once).
Usage: scratch_integration.py PATH_TO_RATELIMITD [TEST_NAME...]; prints "N passed, N failed"."""
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402

TESTS = []
CAP = 64 * 1024  # RLT__SCRATCH_CAP


def test(fn):
    TESTS.append(fn)
    return fn


def info(d):
    out = {}
    for line in d.cli("INFO").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def replies(sock, n):
    """Reads n whole RESP replies (simple, errors, integers, bulk, arrays of those)."""
    buf = b""
    got = []

    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise AssertionError("connection closed after %d replies" % len(got))
            buf += chunk
        ln, buf = buf.split(b"\r\n", 1)
        return ln

    def one():
        ln = line()
        if ln.startswith(b"*"):
            return [one() for _ in range(int(ln[1:]))]
        if ln.startswith(b"$"):
            return None if ln == b"$-1" else line().decode()
        return ln.decode()

    while len(got) < n:
        got.append(one())
    return got


def multi16(tag, i):
    args = ["RL.MULTI"]
    for k in range(16):
        args += ["%s:%d:%d" % (tag, i, k), "gcra:100/1m", 1]
    return args


@test
def info_counts_every_workers_scratch_in_the_connections_memory(tmp):
    d = it.Daemon(tmp, "--threads", "3")
    try:
        i = info(d)
        scratch = int(i["used_memory_scratch"])
        assert scratch >= 3 * CAP, i
        assert int(i["used_memory_connections"]) >= scratch, i
        assert int(i["used_memory"]) >= int(i["used_memory_store"]) + scratch, i
    finally:
        d.stop()


@test
def a_transaction_of_many_multi_key_commands_reuses_one_arena(tmp):
    # 300 RL.MULTI of 16 keys each (8 KiB of keys apiece, 2.4 MB together) in one EXEC: each
    # command gives its keys back, so all fit one worker's 64 KiB.
    d = it.Daemon(tmp)
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        n = 300
        data = it.resp("MULTI") + b"".join(it.resp(*multi16("t", i)) for i in range(n))
        s.sendall(data + it.resp("EXEC"))
        r = replies(s, n + 2)
        assert r[0] == "+OK", r[0]
        assert all(x == "+QUEUED" for x in r[1:n + 1]), r[1:4]
        assert len(r[n + 1]) == n, r[n + 1][:2]
        for x in r[n + 1]:
            assert isinstance(x, list) and x[0] == ":1", x
        # and a plain pipeline of them, then RL.MRESERVE's 16 keys
        s.sendall(b"".join(it.resp(*multi16("p", i)) for i in range(n)))
        assert all(x[0] == ":1" for x in replies(s, n))
        args = ["RL.MRESERVE", "in=10"]
        for k in range(16):
            args += ["m:%d" % k, "gcra:100/1m", "in"]
        s.sendall(it.resp(*args))
        r = replies(s, 1)[0]
        assert isinstance(r, list) and r[0] == ":1", r
        s.close()
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def workers_deciding_at_once_each_use_their_own_arena(tmp):
    d = it.Daemon(tmp, "--threads", "4")
    errors = []

    def client(c):
        try:
            s = socket.create_connection(("127.0.0.1", d.port), timeout=20)
            for rnd in range(20):
                s.sendall(b"".join(it.resp(*multi16("c%d-%d" % (c, rnd), i)) for i in range(20)))
                for x in replies(s, 20):
                    if not (isinstance(x, list) and x[0] == ":1" and x[2] == ":99"):
                        errors.append(x)
            s.close()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    try:
        ts = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:3]
    finally:
        d.stop()


if __name__ == "__main__":
    sys.exit(it.run_tests(TESTS, sys.argv[2:], prefix="rltd-scratch-"))
