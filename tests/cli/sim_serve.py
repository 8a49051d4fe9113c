#!/usr/bin/env python3
"""`ratelimit sim --serve` under clients that hold connections without a byte: the server must
keep answering others while they wait, well before their deadline (10 s) would free them.
Usage: sim_serve.py PATH_TO_RATELIMIT [TEST_NAME...]; prints "N passed, N failed"."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

TESTS = []
BIN = None
# Closed only after 10 s; an answer within 5 s was served while they still held their places,
# with 5 s of margin for a loaded machine.
BOUND_S = 5.0


def test(fn):
    TESTS.append(fn)
    return fn


class Serve:
    def __init__(self):
        self.p = subprocess.Popen([BIN, "sim", "--serve", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            self.stop()
            raise AssertionError("no address printed: %r" % line)
        self.port = int(m.group(1))

    def get(self, path, timeout):
        """GET path on a new connection: (status, body, seconds taken)."""
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split(b" ")[1]), body, time.monotonic() - t0

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode


def still_open(s):
    """True when the server has not closed s (nothing to read yet, no EOF)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


@test
def silent_connections_do_not_hold_up_a_page(tmp):
    # 32 connections that never send a byte used to take every place of the server, so the
    # next client waited 10 s for the first of them to time out, again and again.  Now 100 of
    # them (more than the 64 places: the ones accepted first give theirs up) and a page is
    # served at once, while the latest silent ones are still open.
    sv = Serve()
    silent = []
    try:
        for _ in range(100):
            silent.append(socket.create_connection(("127.0.0.1", sv.port), timeout=10))
        for i in range(3):
            code, body, took = sv.get("/", timeout=BOUND_S)
            assert code == 200 and b"<" in body, (code, body[:200])
            assert took < BOUND_S, took
        assert all(still_open(s) for s in silent[-32:]), "the latest silent ones were closed"
    finally:
        for s in silent:
            s.close()
        assert sv.stop() == 0


def main():
    global BIN
    BIN = sys.argv[1]
    only = sys.argv[2:]
    passed = failed = 0
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        try:
            t(None)
            print("ok  ", t.__name__)
            passed += 1
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            print("FAIL", t.__name__, e)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
