#!/usr/bin/env python3
"""ratelimitd under attack and misconfiguration, end to end: each test is one fault an
adversarial run found, named after the behaviour that replaces it (reloads as strict as start,
identities that do not survive their removal, ports that are never silently shared, snapshot
errors that say why, costs that can never fit).
Usage: hardening.py PATH_TO_RATELIMITD [TEST_NAME...]; prints "N passed, N failed"."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Conn:
    """One RESP connection kept open across commands (a session)."""

    def __init__(self, port, source="127.0.0.1"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                          source_address=(source, 0))
        self.buf = b""

    def cmd(self, *args):
        self.s.sendall(it.resp(*args))
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return "<closed>"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        if line.startswith(b"*"):  # an array of integers
            vals = []
            for _ in range(int(line[1:])):
                while b"\r\n" not in self.buf:
                    self.buf += self.s.recv(65536)
                v, self.buf = self.buf.split(b"\r\n", 1)
                vals.append(int(v[1:]))
            return vals
        return line.decode()

    def close(self):
        self.s.close()


def reload(d, text):
    with open(d.config_path, "w") as f:
        f.write(text)
    before = d.stderr().count("reload")
    d.p.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while time.time() < deadline and d.stderr().count("reload") == before:
        time.sleep(0.05)
    time.sleep(0.1)


@test
def an_empty_config_file_on_reload_is_refused_and_the_password_stays(tmp):
    d = it.Daemon(tmp, config="server:\n  password: s3cret\npolicies:\n  api: fixed_window:1/1h\n")
    try:
        reload(d, "")
        assert "reload failed, keeping the old config" in d.stderr() and "is empty" in d.stderr()
        c = Conn(d.port)
        assert c.cmd("RL.CHECK", "a", "api").startswith("-NOAUTH")
        assert c.cmd("AUTH", "s3cret") == "+OK"
        assert c.cmd("RL.CHECK", "a", "api")[0] == 1
        c.close()
    finally:
        d.stop()


@test
def a_tenant_removed_by_a_reload_loses_its_open_sessions(tmp):
    cfg = ("server:\n  password: admin-pw\ntenants:\n  - {name: acme, password: acme-pw}\n"
           "  - {name: other, password: other-pw}\npolicies:\n  api: fixed_window:5/1h\n")
    d = it.Daemon(tmp, config=cfg)
    try:
        acme, other = Conn(d.port), Conn(d.port)
        assert acme.cmd("AUTH", "acme-pw") == "+OK" and other.cmd("AUTH", "other-pw") == "+OK"
        assert acme.cmd("RL.CHECK", "k", "api")[0] == 1
        reload(d, cfg.replace("  - {name: acme, password: acme-pw}\n", ""))
        assert "tenant 'acme' removed" in d.stderr(), d.stderr()
        assert acme.cmd("RL.CHECK", "k", "api").startswith("-NOAUTH")
        assert acme.cmd("AUTH", "acme-pw").startswith("-WRONGPASS")
        assert other.cmd("RL.CHECK", "k", "api")[0] == 1  # untouched
        acme.close()
        other.close()
    finally:
        d.stop()


@test
def a_password_added_by_a_reload_deauthenticates_open_sessions(tmp):
    d = it.Daemon(tmp, config="policies:\n  api: fixed_window:5/1h\n")
    try:
        c = Conn(d.port)
        assert c.cmd("RL.CHECK", "k", "api")[0] == 1  # no password: everyone is admin
        reload(d, "server:\n  password: now-set\npolicies:\n  api: fixed_window:5/1h\n")
        assert "the server password was set" in d.stderr(), d.stderr()
        assert c.cmd("RL.CHECK", "k", "api").startswith("-NOAUTH")
        assert c.cmd("AUTH", "now-set") == "+OK"
        assert c.cmd("RL.CHECK", "k", "api")[0] == 1
        # A changed password logs out those who used the old one.
        reload(d, "server:\n  password: changed\npolicies:\n  api: fixed_window:5/1h\n")
        assert c.cmd("RL.CHECK", "k", "api").startswith("-NOAUTH")
        c.close()
    finally:
        d.stop()


@test
def a_second_daemon_on_a_busy_port_fails_to_start_naming_the_port_and_its_flag(tmp):
    d = it.Daemon(tmp)
    try:
        # Each listener's error names the flag (and the config key) that moves it.
        for flag, busy, key in (("--port", d.port, "server.port"),
                                ("--http-port", d.http, "server.http_port"),
                                ("--grpc-port", d.grpc, "server.grpc_port")):
            args = ["--port", "0", "--http-port", "0", "--grpc-port", "0"]
            args[args.index(flag) + 1] = str(busy)
            other = os.path.join(tmp, "second")
            os.makedirs(other, exist_ok=True)
            r = subprocess.run([it.BIN, "--no-snapshot"] + args, cwd=other, capture_output=True,
                               text=True, timeout=10)
            assert r.returncode != 0, r
            assert "127.0.0.1:%s: Address already in use" % busy in r.stderr, r.stderr
            assert "%s N (%s) moves the" % (flag, key) in r.stderr, r.stderr
        # The first daemon still answers every connection (nothing was shared).
        for _ in range(20):
            assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def snapshot_errors_name_the_path_and_the_cause(tmp):
    cases = [(os.path.join(tmp, "no", "such", "dir", "r.snap"), "No such file or directory")]
    ro = os.path.join(tmp, "ro")
    os.makedirs(ro)
    os.chmod(ro, 0o555)
    if os.geteuid() != 0:  # root writes anywhere: the read-only case needs another user
        cases.append((os.path.join(ro, "r.snap"), "Permission denied"))
    for path, cause in cases:
        d = it.Daemon(tmp, "--snapshot", path, "--snapshot-interval", "200ms")
        try:
            deadline = time.time() + 5
            while time.time() < deadline and "snapshot to" not in d.stderr():
                time.sleep(0.05)
            err = d.stderr()
            assert "periodic snapshot to %s failed: %s" % (path, cause) in err, err
        finally:
            d.stop()


@test
def a_cost_that_can_never_fit_is_a_429_without_retry_after_that_says_so(tmp):
    d = it.Daemon(tmp)
    try:
        r = d.curl("/v1/check?key=big&policy=gcra:10/1m&cost=11")
        head, body = r.split("\n\n", 1)
        assert head.startswith("HTTP/1.1 429"), r
        assert "Retry-After" not in head, r
        assert '"retry_after_ms":-1' in body and '"error":"cost 11 can never be allowed' in body, r
        # RESP: retry_after_ms -1 says the same.
        assert it.ints(d.cli("RL.CHECK", "big", "gcra:10/1m", 11))[3] == -1
        # A cost that merely has to wait gets its Retry-After.
        assert d.curl("/v1/check?key=w&policy=gcra:10/1m&cost=10").startswith("HTTP/1.1 200")
        assert "Retry-After: " in d.curl("/v1/check?key=w&policy=gcra:10/1m&cost=10")
    finally:
        d.stop()


@test
def config_set_and_other_unsupported_commands_answer_an_error(tmp):
    d = it.Daemon(tmp)
    try:
        assert d.cli("CONFIG", "SET", "maxmemory", "1").startswith("ERR ratelimitd takes no CONFIG SET")
        assert d.cli("CONFIG", "GET", "save") != ""
        assert d.cli("FLUSHALL").startswith("ERR unknown command")
    finally:
        d.stop()


# Under a sanitizer RSS is mostly its own (shadow memory, quarantine, history): the
# memory tests then assert the daemon's own accounting only.
ASAN = os.environ.get("RLT_SANITIZE", "") != ""  # any sanitizer: ASan and TSan alike


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def info(d):
    text = it.raw(d.port, it.resp("INFO"), wait=2.0).decode(errors="replace")
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l and not l.startswith("#"))


@test
def memory_stays_within_max_memory_when_every_key_is_a_big_state(tmp):
    # An 80 KB state per key (a sliding log of 10,000 entries, each key charged all 10,000 so
    # its compact log grows to full size): 4,000 keys would take 320 MB.
    cfg = "server:\n  max_memory: 32mb\npolicies:\n  big: sliding_log:10000/1h\n"
    d = it.Daemon(tmp, config=cfg)
    try:
        base = rss_bytes(d.p.pid)
        burst = b"".join(it.resp("RL.CHECK", "k%d" % i, "big", 10000) for i in range(4000))
        got = it.raw(d.port, burst, wait=3.0)
        assert got.count(b"*6\r\n:1\r\n") == 4000, got[:200]  # every request answered, allowed
        i = info(d)
        assert int(i["used_memory_store"]) <= int(i["maxmemory_store"]), i
        assert int(i["maxmemory"]) == 32 << 20 and int(i["evicted_forced"]) > 0, i
        grown = rss_bytes(d.p.pid) - base
        assert ASAN or grown < 48 << 20, "RSS grew %d MB" % (grown >> 20)
    finally:
        d.stop()


@test
def clients_that_never_read_share_one_bounded_slice_of_memory(tmp):
    # 32 MB budget: 4 MB for every connection's buffers together.  30 clients asking for 8 MB
    # of ECHO replies each and never reading them would hold 240 MB at the per-connection cap
    # (8 MB) alone.
    d = it.Daemon(tmp, config="server:\n  max_memory: 32mb\n  max_output_buffer: 8mb\n")
    try:
        base = rss_bytes(d.p.pid)
        socks = []
        payload = it.resp("ECHO", "x" * 60000) * 140
        for _ in range(30):
            s = socket.create_connection(("127.0.0.1", d.port))
            s.settimeout(2)
            try:
                s.sendall(payload)
            except OSError:
                pass
            socks.append(s)
        time.sleep(1.5)
        i = info(d)
        assert int(i["used_memory_connections"]) <= int(i["maxmemory_connections"]), i
        grown = rss_bytes(d.p.pid) - base
        assert ASAN or grown < 40 << 20, "RSS grew %d MB" % (grown >> 20)
        for s in socks:
            s.close()
        time.sleep(0.3)
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


def open_idle(port, n, payload):
    """n connections that each sent `payload` once, read their answer, and stay open."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(payload)
        socks.append(s)
    for s in socks:
        s.recv(4096)
    return socks


@test
def thousands_of_idle_connections_leave_room_for_every_new_client(tmp):
    # On the default settings (max_memory 1 GB: 128 MB for connections) 4,400 idle clients
    # that each sent one PING used to hold a 32 KiB input buffer apiece, and a new PING,
    # /healthz or /v1/check was closed without a reply.  An idle connection now holds no input
    # buffer: 5,000 of them (below max_connections 10,000) and every new client is served.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))
    if min(hard, 20000) < 6000:
        raise AssertionError("needs ulimit -n >= 6000 (have %d)" % hard)
    d = it.Daemon(tmp, config="server:\n  max_memory: 64mb\n")  # 8 MB for connections
    try:
        socks = open_idle(d.port, 5000, it.resp("PING"))
        i = info(d)
        assert int(i["connected_clients"]) >= 5000, i
        # 5,000 x 32 KiB would be 160 MB; what is held is the replies' small buffers.
        assert int(i["used_memory_connections"]) <= int(i["maxmemory_connections"]), i
        assert d.cli("PING") == "PONG"
        r = d.curl("/healthz")
        assert r.startswith("HTTP/1.1 200"), r
        r = d.curl("/v1/check?key=idle-test&policy=gcra:10/1m")
        assert r.startswith("HTTP/1.1 200"), r
        for s in socks:
            s.close()
    finally:
        d.stop()


@test
def a_client_over_max_connections_is_refused_with_a_clear_error(tmp):
    d = it.Daemon(tmp, config="server:\n  max_connections: 50\n")
    try:
        socks = open_idle(d.port, 50, it.resp("PING"))
        got = it.raw(d.port, it.resp("PING"))
        assert got.startswith(b"-ERR max number of clients reached"), got
        r = d.curl("/healthz")
        assert r.startswith("HTTP/1.1 503") and "max number of clients reached" in r, r
        for s in socks:
            s.close()
        time.sleep(0.3)
        assert d.cli("PING") == "PONG"  # a slot freed is a slot served
    finally:
        d.stop()


@test
def inline_policies_and_their_state_survive_a_restart_in_their_slots(tmp):
    snap = os.path.join(tmp, "r.snap")
    d = it.Daemon(tmp, "--snapshot", snap)
    try:
        assert it.ints(d.cli("CL.THROTTLE", "k", 0, 1, 3600))[0] == 0
    finally:
        d.stop()
    d = it.Daemon(tmp, "--snapshot", snap)
    try:
        assert it.ints(d.cli("CL.THROTTLE", "k", 0, 1, 3600))[0] == 1  # still used up
        assert "name=i%3Agcra%3A1/1h" in d.cli("INFO", "policies"), d.cli("INFO", "policies")
    finally:
        d.stop()


def pipeline(port, cmds):
    """Sends every command on one connection at once; returns the replies in order."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(b"".join(it.resp(*c) for c in cmds))
        r = it.Replies(s)
        return [r.one() for _ in cmds]
    finally:
        s.close()


@test
def one_clients_distinct_inline_policies_do_not_lock_another_client_out(tmp):
    # No tenants (everyone is the default tenant): one client sends 3,000 distinct inline
    # policies, each holding a key's state for a day.  Another client's inline calls are
    # served all the same: the table evicts its least recently used policy (past a grace of
    # a second) with its keys, as a full store evicts its least recently used key.
    d = it.Daemon(tmp)
    try:
        flood = [("CL.THROTTLE", "a%d" % i, 0, 1, 86400 + i) for i in range(3000)]
        replies = pipeline(d.port, flood)
        assert isinstance(replies[0], list), replies[0]
        time.sleep(1.2)  # past the grace: the flood's policies were all used just now
        v = Conn(d.port)
        first = v.cmd("CL.THROTTLE", "user:42", 15, 30, 60, 1)
        assert isinstance(first, list) and first[0] == 0, first
        check = v.cmd("RL.CHECK", "k2", "sliding_window:100/1m")
        assert isinstance(check, list), check
        # The victim's policy, just used, is not the one the flood pushes out next.
        pipeline(d.port, [("CL.THROTTLE", "b%d" % i, 0, 1, 90000 + i) for i in range(3000)])
        second = v.cmd("CL.THROTTLE", "user:42", 15, 30, 60, 1)
        assert isinstance(second, list) and second[2] == first[2] - 1, (first, second)
        v.close()
    finally:
        d.stop()


class Flood:
    """A client sending new inline texts on one RESP connection (or, `reconnect`, a new
    connection for every 50), pipelined by 50, until told to stop: every text distinct (its
    period), each holding a key's state for a day."""

    def __init__(self, port, reconnect=False):
        import threading
        self.port, self.reconnect = port, reconnect
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.r = it.Replies(self.s)
        self.stop = threading.Event()
        self.sent = self.refused = 0
        self.last = ""
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        while not self.stop.is_set():
            if self.reconnect and self.sent > 0:
                self.s.close()
                self.s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
                self.r = it.Replies(self.s)
            cmds = [("CL.THROTTLE", "f%d" % i, 0, 1, 86400 + i)
                    for i in range(self.sent, self.sent + 50)]
            self.s.sendall(b"".join(it.resp(*c) for c in cmds))
            for _ in cmds:
                r = self.r.one()
                if "change too fast" in str(r):
                    self.refused += 1
                    self.last = str(r)
            self.sent += len(cmds)

    def wait_full(self):
        """Until the table is full and a new text of the flood was refused."""
        deadline = time.time() + 60
        while self.refused == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert self.refused > 0, "the flood never filled the table"

    def still_refused(self, whose):
        """The flood goes on, refused naming `whose` budget."""
        before = self.refused
        time.sleep(0.3)
        assert self.refused > before, "the flood stopped being refused: was it still flooding?"
        assert whose in self.last, self.last

    def close(self):
        self.stop.set()
        self.th.join(30)
        self.s.close()


def ten_new_texts_served(v):
    """Ten new inline texts on Conn v, each served."""
    for i in range(10):
        r = v.cmd("RL.CHECK", "v%d" % i, "gcra:%d/1h" % (i + 2))
        assert isinstance(r, list), (i, r)
    v.close()


@test
def one_client_flooding_new_inline_texts_leaves_another_clients_new_texts_served(tmp):
    # The table (64 slots) is full of one client's texts and it keeps sending new ones: each
    # now needs a replacement.  Replacements were one budget for all (10 a second, first come
    # first served): the flood took them all and 0 of 10 new texts of another client got
    # through.  Now each client (connection) has its own budget within the global one: the
    # flood spends its own, and another client's 10 new texts on RESP, then 10 on HTTP (one
    # keep-alive connection), are all served while the flood goes on.
    import http.client
    d = it.Daemon(tmp, config="server:\n  max_inline_policies: 64\n")
    f = Flood(d.port)
    try:
        f.wait_full()
        time.sleep(1.2)  # past the grace of the slots the flood filled first
        ten_new_texts_served(Conn(d.port))
        h = http.client.HTTPConnection("127.0.0.1", d.http, timeout=10)
        for i in range(10):
            h.request("GET", "/v1/check?key=h%d&policy=sliding_window:%d/1h" % (i, i + 2))
            resp = h.getresponse()
            body = resp.read()
            assert resp.status in (200, 429), (i, resp.status, body)
        h.close()
        f.still_refused("this connection's new texts")
    finally:
        f.close()
        d.stop()


@test
def a_client_reconnecting_for_each_new_text_leaves_other_addresses_served(tmp):
    # The flood opens a new connection for every 50 texts, so each of its connections has a
    # fresh budget; its address (127.0.0.1) has one budget for all of them, and a client from
    # another address (127.0.0.2) gets its 10 new texts through.
    d = it.Daemon(tmp, config="server:\n  max_inline_policies: 64\n")
    f = Flood(d.port, reconnect=True)
    try:
        f.wait_full()
        # The flood spent the global burst with its address's; the global budget refills at
        # 10/s and the address's at 5/s: in 2.5 s the rest holds 12.
        time.sleep(2.5)
        ten_new_texts_served(Conn(d.port, source="127.0.0.2"))
        f.still_refused("this address's new texts")
    finally:
        f.close()
        d.stop()


@test
def every_json_answer_of_the_http_door_is_nosniff_and_no_store(tmp):
    # /v1/top, /v1/stats, /v1/rules and /v1/peek answered JSON without
    # X-Content-Type-Options: nosniff (and /v1/top without Cache-Control: no-store): a browser
    # could sniff a key an attacker chose into HTML, a cache could keep counters.  Every JSON
    # answer, errors included, now carries both.
    d = it.Daemon(tmp)
    try:
        paths = ["/v1/top", "/v1/stats", "/v1/rules", "/v1/peek?key=a&policy=gcra:1/1s",
                 "/v1/check?key=a&policy=gcra:1/1s", "/v1/check?key=a&policy=gcra:1/1s",
                 "/v1/check?key=a&policy=nope:1", "/v1/nothing"]
        for path in paths:
            r = d.curl(path)
            head = r.split("\n\n", 1)[0].lower()
            assert "content-type: application/json" in head, (path, r)
            assert "x-content-type-options: nosniff" in head, (path, r)
            assert head.count("cache-control: no-store") == 1, (path, r)
        r = d.curl("/json", "-d", "{}")
        head = r.split("\n\n", 1)[0].lower()
        assert "x-content-type-options: nosniff" in head and "cache-control: no-store" in head, r
    finally:
        d.stop()


@test
def one_client_filling_the_reservation_table_locks_no_one_else_out(tmp):
    # One connection fills the table (estimate 0: free) for an hour; another client's
    # RL.RESERVE and reserve=1 still get a reservation: the biggest holder's are ended early,
    # charged as estimated, when the table is full.
    d = it.Daemon(tmp, config="server:\n  max_reservations: 1000\n")
    try:
        flood = [("RL.RESERVE", "r%d" % i, "gcra:1000000/1s", 0, "TIMEOUT", 3600000)
                 for i in range(1200)]
        got = pipeline(d.port, flood)
        held = sum(1 for r in got if isinstance(r, list) and r[5] is not None)
        assert held >= 1000, got[-1]
        r = pipeline(d.port, [("RL.RESERVE", "user:42", "gcra:10/1m", 3)])[0]
        assert isinstance(r, list) and r[0] == 1 and r[5] is not None, r
        # The victim's reservation settles (it was not the one ended).
        s = pipeline(d.port, [("RL.SETTLE", "user:42", "gcra:10/1m", r[5], 1)])[0]
        assert isinstance(s, list), s
        h = d.curl("/v1/check?key=user:43&policy=gcra:10/1m&reserve=1")
        assert h.startswith("HTTP/1.1 200"), h
        # A timeout is capped (max_reservation_timeout, 1 h by default).
        e = pipeline(d.port, [("RL.RESERVE", "x", "gcra:10/1m", 1, "TIMEOUT", 86400000)])[0]
        assert e.startswith(b"-ERR timeout 86400000 ms is over max_reservation_timeout"), e
    finally:
        d.stop()


@test
def one_connection_holds_at_most_its_share_of_reservations(tmp):
    d = it.Daemon(tmp, config="server:\n  max_reservations_per_client: 10\n")
    try:
        got = pipeline(d.port, [("RL.RESERVE", "r%d" % i, "gcra:1000/1s", 1) for i in range(11)])
        assert all(isinstance(r, list) for r in got[:10]), got
        assert isinstance(got[10], bytes) and got[10].startswith(b"-"), got[10]
        r = pipeline(d.port, [("RL.RESERVE", "other", "gcra:1000/1s", 1)])[0]
        assert isinstance(r, list) and r[5] is not None, r
    finally:
        d.stop()


@test
def a_closing_connection_is_gone_after_its_linger_whatever_it_keeps_sending(tmp):
    d = it.Daemon(tmp, "--max-connections", "2")
    try:
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(it.resp("QUIT"))
        assert s.recv(100).startswith(b"+OK")
        t0 = time.time()
        closed = False
        while time.time() - t0 < 5:
            try:
                s.sendall(b"x")  # one byte every 0.2 s: a persistent timer would restart
            except OSError:
                closed = True
                break
            time.sleep(0.2)
        assert closed and time.time() - t0 < 2.5, time.time() - t0
        s.close()
        # The slot is free again.
        assert d.cli("PING") == "PONG"
    finally:
        d.stop()


@test
def tier_assignments_are_bounded_by_max_keys(tmp):
    cfg = "policies:\n  pro: fixed_window:100/1h\ntiers:\n  pro: pro\n"
    d = it.Daemon(tmp, "--max-keys", "1000", config=cfg)
    try:
        burst = b"".join(it.resp("RL.TIER", "t%d" % i, "pro") for i in range(20000))
        got = it.raw(d.port, burst, wait=3.0)
        ok = got.count(b"+OK\r\n")
        assert 0 < ok <= 1000, ok
        assert b"-ERR too many tier assignments" in got
        assert got.count(b"\r\n") == 20000  # every command answered
    finally:
        d.stop()


@test
def a_sigterm_the_moment_it_is_ready_stops_it_cleanly_with_its_final_snapshot(tmp):
    # systemd may stop a service as soon as it reports READY=1: the handlers must be in place
    # by then, or the default action of SIGTERM kills the daemon without its final snapshot
    # (seen under TSan, where the window was long enough to hit).
    path = os.path.join(tmp, "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(10 * it.SCALE)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    try:
        for i in range(5):
            snap = os.path.join(tmp, "final%d.snap" % i)
            with open(os.path.join(tmp, "stderr%d" % i), "w+") as err:
                p = subprocess.Popen([it.BIN, "--port", "0", "--http-port", "0", "--grpc-port",
                                      "0", "--bind", "127.0.0.1", "--snapshot", snap], cwd=tmp,
                                     env=env, stdout=subprocess.DEVNULL, stderr=err)
                try:
                    assert srv.recv(64) == b"READY=1"
                    p.send_signal(signal.SIGTERM)  # at once: no wait for the start line
                    assert p.wait(20 * it.SCALE) == 0, p.returncode
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                assert srv.recv(64) == b"STOPPING=1"
                err.seek(0)
                log = err.read()
                assert "ratelimitd: stopped" in log, log
                assert not it.SANITIZER_REPORT.search(log), log
            assert os.path.getsize(snap) > 0, snap
    finally:
        srv.close()


@test
def a_sigterm_at_any_instant_of_the_start_stops_it_cleanly_never_hangs(tmp):
    # A signal at any instant of the start must stop the daemon: waiting, pending, while it
    # loads its config and snapshot (the config here is a FIFO, so the signal surely comes
    # while main is reading it), and at instants spread over the whole start.  Before the
    # signals were read from a signalfd, a SIGTERM before the handlers killed it without its
    # final snapshot, and one the moment READY=1 came was once lost under TSan.
    fifo = os.path.join(tmp, "config.fifo")
    os.mkfifo(fifo)
    base = [it.BIN, "--port", "0", "--http-port", "0", "--grpc-port", "0", "--bind",
            "127.0.0.1"]
    for i in range(3):
        snap = os.path.join(tmp, "fifo%d.snap" % i)
        with open(os.path.join(tmp, "fifo-stderr%d" % i), "w+") as err:
            p = subprocess.Popen(base + ["--config", fifo, "--snapshot", snap], cwd=tmp,
                                 stdout=subprocess.DEVNULL, stderr=err)
            try:
                with open(fifo, "w") as f:  # opens once the daemon opened it to read
                    p.send_signal(signal.SIGTERM)
                    f.write("policies:\n  api: gcra:10/1s\n")
                assert p.wait(20 * it.SCALE) == 0, p.returncode
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            err.seek(0)
            log = err.read()
            assert "signal 15, stopping" in log and "ratelimitd: stopped" in log, log
            assert not it.SANITIZER_REPORT.search(log), log
        assert os.path.getsize(snap) > 0, snap
    # How long a start takes here, then signals at instants spread over it and just past it.
    t0 = time.time()
    d = it.Daemon(tmp, "--no-snapshot")
    ready = time.time() - t0
    d.stop()
    n = 24
    for i in range(n):
        delay = ready * 1.5 * i / (n - 1)
        with open(os.path.join(tmp, "spread-stderr%d" % i), "w+") as err:
            p = subprocess.Popen(base + ["--no-snapshot"], cwd=tmp, stdout=subprocess.DEVNULL,
                                 stderr=err)
            time.sleep(delay)
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(20 * it.SCALE)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError("no exit within %ds of a SIGTERM %.3fs into the start"
                                     % (20 * it.SCALE, delay))
            err.seek(0)
            log = err.read()
            # Only before main's first line (the loader, a sanitizer's start) may the signal's
            # default action end it; from there on it is read and the stop is clean.
            assert rc == 0 or (rc == -signal.SIGTERM and log == ""), (delay, rc, log)
            if rc == 0:
                assert "ratelimitd: stopped" in log, (delay, log)
            assert not it.SANITIZER_REPORT.search(log), log


@test
def under_systemd_it_reports_readiness_and_logs_with_priorities(tmp):
    # Type=notify: READY=1 on $NOTIFY_SOCKET once listening, STOPPING=1 at stop; with
    # JOURNAL_STREAM set every log line starts with its syslog priority (<3> errors, <6> info).
    path = os.path.join(tmp, "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(5)
    old = {k: os.environ.get(k) for k in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    os.environ["NOTIFY_SOCKET"] = path
    os.environ["JOURNAL_STREAM"] = "8:12345"
    try:
        d = it.Daemon(tmp)
        try:
            assert srv.recv(64) == b"READY=1"
        finally:
            d.stop()
        assert srv.recv(64) == b"STOPPING=1"
        lines = [ln for ln in d.stderr().splitlines() if ln]
        assert lines and all(re.match(r"<[0-7]>ratelimitd: ", ln) for ln in lines), lines
        assert "<6>ratelimitd: stopped" in lines, lines
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        srv.close()


def main():
    return it.run_tests(TESTS, sys.argv[2:], prefix="rlth-")


if __name__ == "__main__":
    sys.exit(main())
