#!/usr/bin/env python3
"""ngx_http_ratelimit_module against the real nginx: every test starts nginx from a temporary
prefix with load_module, drives it over loopback with http.client, and stops it.

  test_nginx.py --nginx /usr/sbin/nginx --module .../ngx_http_ratelimit_module.so --cli .../ratelimit
                [-k SUBSTRING]

Decisions are compared with `ratelimit replay` on the same requests, fed with the times at which
they were sent: the policies are slow enough (per hour) that no decision depends on the
sub-millisecond gap between the client's clock and nginx's cached one.
"""
import argparse
import http.client
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ARGS = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """One nginx master (daemon off) in its own prefix; `http` is inserted in the http block."""

    def __init__(self, http, workers=1, main=""):
        self.prefix = tempfile.mkdtemp(prefix="rlt-nginx-")
        os.chmod(self.prefix, 0o755)  # workers run as nobody when the test runs as root
        for d in ("logs", "www", "tmp"):
            os.mkdir(os.path.join(self.prefix, d))
            os.chmod(os.path.join(self.prefix, d), 0o755)
        with open(os.path.join(self.prefix, "www", "index.html"), "w") as f:
            f.write("ok\n")
        os.chmod(os.path.join(self.prefix, "www", "index.html"), 0o644)
        self.port = free_port()
        self.workers = workers
        self.main = main
        self.proc = None
        self.write(http)

    def conf(self, http):
        p = self.prefix
        http = http.replace("PORT", str(self.port))
        return f"""
load_module {os.path.abspath(ARGS.module)};
daemon off;
worker_processes {self.workers};
pid {p}/nginx.pid;
error_log {p}/logs/error.log info;
{self.main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    default_type text/plain;
    root {p}/www;
    client_body_temp_path {p}/tmp/body;
    proxy_temp_path {p}/tmp/proxy;
    fastcgi_temp_path {p}/tmp/fastcgi;
    uwsgi_temp_path {p}/tmp/uwsgi;
    scgi_temp_path {p}/tmp/scgi;
    keepalive_requests 100000;
{http}
}}
"""

    def write(self, http):
        with open(os.path.join(self.prefix, "nginx.conf"), "w") as f:
            f.write(self.conf(http))

    def check(self):
        """nginx -t on the written configuration: (exit code, stderr)."""
        r = subprocess.run([ARGS.nginx, "-t", "-p", self.prefix + "/", "-c", "nginx.conf"],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stderr

    def start(self):
        rc, err = self.check()
        assert rc == 0, f"nginx -t failed:\n{err}"
        self.proc = subprocess.Popen([ARGS.nginx, "-p", self.prefix + "/", "-c", "nginx.conf"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            assert self.proc.poll() is None, f"nginx exited: {self.proc.stderr.read().decode()}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("nginx did not start listening")

    def worker_pids(self):
        out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(self.proc.pid)],
                             capture_output=True, text=True).stdout
        return {int(l.split()[0]) for l in out.splitlines() if "worker process" in l and
                "shutting down" not in l}

    def reload(self):
        old = self.worker_pids()
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline:
            now = self.worker_pids()
            if now and not (now & old) and len(now) == self.workers:
                return
            time.sleep(0.05)
        raise AssertionError("reload did not replace the workers")

    def log(self):
        with open(os.path.join(self.prefix, "logs", "error.log")) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.prefix, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Client:
    """One keep-alive connection; get() returns (status, headers dict (lowercase), sent_at)."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, path="/index.html", headers=None):
        sent = time.time()
        self.conn.request("GET", path, headers=headers or {})
        r = self.conn.getresponse()
        r.read()
        h = {}
        for k, v in r.getheaders():
            k = k.lower()
            h[k] = h[k] + ", " + v if k in h else v
        return r.status, h, sent

    def close(self):
        self.conn.close()


def get(port, path="/index.html", headers=None):
    c = Client(port)
    try:
        return c.get(path, headers)
    finally:
        c.close()


def simultaneous(port, count, headers=None):
    """`count` requests sent at once on their own connections: (status, headers, seconds taken)."""
    barrier = threading.Barrier(count)

    def one(_):
        c = Client(port)
        c.conn.connect()
        barrier.wait()
        s, h, sent = c.get(headers=headers)
        c.close()
        return s, h, time.time() - sent

    with ThreadPoolExecutor(count) as ex:
        return list(ex.map(one, range(count)))


def replay(policy, times, costs=None):
    """`ratelimit replay` over one key: a list of (verdict, remaining, retry_s, reset_s, delay_s)."""
    costs = costs or [1] * len(times)
    trace = "".join(f"{t:.3f} k {c}\n" for t, c in zip(times, costs))
    r = subprocess.run([ARGS.cli, "replay", "--policy", policy], input=trace,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        out.append((f[3], int(f[4]), float(f[5]), float(f[6]), float(f[7])))
    return out


def ietf(h, name):
    """(r, t) of the RateLimit item for `name`, or None."""
    m = re.search(r'"%s";r=(\d+);t=(\d+)' % re.escape(name), h.get("ratelimit", ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def clear_of_boundary(period_s, margin=15):
    """Waits until a UTC-aligned window of period_s has at least `margin` seconds left."""
    left = period_s - time.time() % period_s
    if left < margin:
        time.sleep(left + 0.5)


STATUS = "add_header X-RL-Status $ratelimit_status always;"

# ---- tests -------------------------------------------------------------------------------------


def exact_totals_across_workers(workers):
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone "one" zone=fw:1m policy=fixed_window:50/1h;
    server {{ listen 127.0.0.1:PORT reuseport; {STATUS} add_header X-Pid $pid always;
             location / {{ ratelimit zone=fw; }} }}"""
    with Nginx(http, workers=workers).start() as n:
        def burst(_):
            c, res = Client(n.port), []
            for _ in range(10):
                s, h, _ = c.get()
                res.append((s, h["x-pid"]))
            c.close()
            return res
        # 20 connections spread by reuseport: all on one worker has odds 2^-19 with 2 workers.
        with ThreadPoolExecutor(20) as ex:
            results = [r for chunk in ex.map(burst, range(20)) for r in chunk]
        passed = sum(1 for s, _ in results if s == 200)
        rejected = sum(1 for s, _ in results if s == 429)
        assert (passed, rejected) == (50, 150), (passed, rejected)
        pids = {p for _, p in results}
        assert len(pids) >= 2, f"only worker(s) {pids} served: the test did not spread the load"


def test_exactly_50_of_200_pass_across_2_workers():
    exact_totals_across_workers(2)


def test_exactly_50_of_200_pass_across_4_workers():
    exact_totals_across_workers(4)


POLICIES = ["fixed_window:5/1h", "sliding_window:5/1h", "sliding_log:5/1h", "token_bucket:5/1h",
            "gcra:5/1h,burst=5", "leaky_bucket:5/1h,queue=3,delay=3"]


def test_every_algorithm_decides_as_ratelimit_replay():
    clear_of_boundary(3600)
    zones = "\n".join(f'    ratelimit_zone "k" zone=z{i}:1m policy={p};'
                      for i, p in enumerate(POLICIES))
    locs = " ".join(f"location /z{i}/ {{ ratelimit zone=z{i}; }}" for i in range(len(POLICIES)))
    http = f"""{zones}
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ }} {locs} }}"""
    with Nginx(http) as n:
        for i in range(len(POLICIES)):
            d = os.path.join(n.prefix, "www", f"z{i}")
            os.mkdir(d)
            os.chmod(d, 0o755)
            shutil.copy(os.path.join(n.prefix, "www", "index.html"), d)
        n.start()
        c = Client(n.port)
        for i, p in enumerate(POLICIES):
            got = [c.get(f"/z{i}/index.html") for _ in range(8)]
            want = replay(p, [t for _, _, t in got])
            for k, ((s, h, _), (verdict, remaining, retry, reset, delay)) in enumerate(
                    zip(got, want)):
                where = f"{p} request {k + 1}"
                assert delay == 0, where
                assert s == (200 if verdict == "allow" else 429), (where, s, verdict)
                assert h["x-rl-status"] == ("PASSED" if verdict == "allow" else "REJECTED")
                r, t = ietf(h, "z%d" % i)
                assert r == remaining, (where, r, remaining)
                # t and Retry-After are whole seconds rounded up; the two clocks may straddle a
                # second boundary for the UTC-aligned windows.
                # (docs/algorithms.md: on a denial t is the Retry-After, when allowed the time
                # until the limiter is fresh again.)
                want_t = math.ceil(retry) if verdict == "deny" else math.ceil(reset)
                assert abs(t - want_t) <= 1, (where, t, want_t)
                if verdict == "deny":
                    assert abs(int(h["retry-after"]) - math.ceil(retry)) <= 1, (where, h, retry)
        c.close()


def test_headers_on_pass_and_on_rejection_with_retry_after_rounded_up():
    http = f"""
    ratelimit_zone $binary_remote_addr zone=api:1m policy=gcra:10/1s,burst=2;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=api; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        s1, h1, _ = c.get()
        s2, h2, _ = c.get()
        s3, h3, _ = c.get()
        assert (s1, s2, s3) == (200, 200, 429), (s1, s2, s3)
        for h in (h1, h2, h3):
            assert h["ratelimit-policy"] == '"api";q=10;w=1', h  # the rate, not the burst
        assert ietf(h1, "api") == (1, 1) and "retry-after" not in h1, h1
        assert ietf(h2, "api")[0] == 0 and "retry-after" not in h2, h2
        # The next unit comes 100 ms (or less) later: Retry-After rounds it up to 1 second.
        assert h3["retry-after"] == "1", h3
        assert ietf(h3, "api") == (0, 1), h3
        c.close()


def test_calendar_months_end_at_the_real_local_month_end():
    from datetime import datetime
    from zoneinfo import ZoneInfo
    zone = ZoneInfo("Europe/Paris")

    def left():
        now = datetime.now(zone)
        m = now.year * 12 + now.month  # the next month, 0-based
        return datetime(m // 12, m % 12 + 1, 1, tzinfo=zone).timestamp() - time.time()

    if left() < 10:
        time.sleep(left() + 1)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=month:1m policy=fixed_window:2/1mo,tz=Europe/Paris;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=month; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        statuses = [c.get()[0] for _ in range(3)]
        s, h, _ = c.get()
        assert statuses == [200, 200, 429] and s == 429, statuses
        assert abs(int(h["retry-after"]) - left()) <= 2, (h, left())
        assert h["ratelimit-policy"] == '"month";q=2;w=2629746', h
        c.close()
        # A reload to another zone is another policy: the month now ends in New York.
        n.write(http.replace("Europe/Paris", "America/New_York"))
        n.reload()
        s, h, _ = get(n.port)
        ny = ZoneInfo("America/New_York")
        now = datetime.now(ny)
        m = now.year * 12 + now.month
        left_ny = datetime(m // 12, m % 12 + 1, 1, tzinfo=ny).timestamp() - time.time()
        assert s == 429 and abs(int(h["retry-after"]) - left_ny) <= 2, (h, left_ny)
        assert 'now has policy "fixed_window:2/1mo,tz=America/New_York": 1 keys carried' \
            in n.log()


def test_headers_off_sends_none():
    http = """
    ratelimit_zone $binary_remote_addr zone=api:1m policy=gcra:1/1h;
    ratelimit_headers off;
    server { listen 127.0.0.1:PORT; location / { ratelimit zone=api; } }"""
    with Nginx(http).start() as n:
        for want in (200, 429):
            s, h, _ = get(n.port)
            assert s == want and not {"ratelimit", "ratelimit-policy", "retry-after"} & set(h), h


def test_ratelimit_status_sets_the_rejection_code():
    http = """
    ratelimit_zone $binary_remote_addr zone=api:1m policy=fixed_window:1/1h;
    server { listen 127.0.0.1:PORT; ratelimit_status 503; location / { ratelimit zone=api; } }"""
    with Nginx(http).start() as n:
        assert [get(n.port)[0] for _ in range(2)] == [200, 503]


def test_dry_run_passes_everything_and_reports_rejected_dry_run():
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=dry:1m policy=fixed_window:2/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS}
             location / {{ ratelimit zone=dry; ratelimit_dry_run on; ratelimit_log_level warn; }}
             location /enforced/ {{ alias {{www}}/; ratelimit zone=dry; }} }}"""
    with Nginx(http) as n:
        n.write(http.replace("{www}", os.path.join(n.prefix, "www")))
        n.start()
        got = [get(n.port) for _ in range(5)]
        assert [s for s, _, _ in got] == [200] * 5, got
        assert [h["x-rl-status"] for _, h, _ in got] == ["PASSED"] * 2 + ["REJECTED_DRY_RUN"] * 3
        assert all("retry-after" not in h for _, h, _ in got)
        assert "limiting requests, dry run, by ratelimit zone \"dry\"" in n.log()
        # The refused requests consumed nothing and the zone is the same for an enforcing
        # location: the third request overall is the first one refused there.
        s, h, _ = get(n.port, "/enforced/index.html")
        assert s == 429 and h["x-rl-status"] == "REJECTED", (s, h)


def test_several_directives_pass_all_or_consume_from_none():
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=a:1m policy=fixed_window:3/1h;
    ratelimit_zone $binary_remote_addr zone=b:1m policy=fixed_window:5/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS}
             location / {{ ratelimit zone=a; ratelimit zone=b; }}
             location /b/ {{ alias {{www}}/; ratelimit zone=b; }} }}"""
    with Nginx(http) as n:
        n.write(http.replace("{www}", os.path.join(n.prefix, "www")))
        n.start()
        c = Client(n.port)
        for k in range(3):
            s, h, _ = c.get()
            assert s == 200 and ietf(h, "a") == (2 - k, ietf(h, "a")[1]), (k, h)
            assert ietf(h, "b")[0] == 4 - k, h
        for _ in range(3):  # a refuses; b must not be charged
            s, h, _ = c.get()
            assert s == 429 and ietf(h, "a") is not None and ietf(h, "b") is None, h
        assert [c.get("/b/index.html")[0] for _ in range(3)] == [200, 200, 429]
        c.close()


def test_penalty_box_and_jitter_with_one_and_with_several_directives():
    # block=: after the breach every request is refused until the block's end, with Retry-After
    # to it, though the window has room again; with two directives the zone that refused keeps
    # its block and the other is charged nothing.  jitter=: Retry-After within [exact, +50%].
    http = f"""
    ratelimit_zone $http_x_key zone=box:1m policy=fixed_window:1/1s,block=1h;
    ratelimit_zone $http_x_key zone=wide:1m policy=fixed_window:100/1h;
    ratelimit_zone $http_x_key zone=jit:1m policy=gcra:1/1h,jitter=50%;
    server {{ listen 127.0.0.1:PORT; {STATUS}
             location / {{ ratelimit zone=box; }}
             location /two/ {{ alias {{www}}/; ratelimit zone=box; ratelimit zone=wide; }}
             location /jit/ {{ alias {{www}}/; ratelimit zone=jit; }} }}"""
    with Nginx(http) as n:
        n.write(http.replace("{www}", os.path.join(n.prefix, "www")))
        n.start()
        c = Client(n.port)
        assert c.get(headers={"X-Key": "a"})[0] == 200
        s, h, _ = c.get(headers={"X-Key": "a"})
        assert s == 429 and 3599 <= int(h["retry-after"]) <= 3600, h
        time.sleep(1.1)
        s, h, _ = c.get(headers={"X-Key": "a"})
        assert s == 429 and 3590 <= int(h["retry-after"]) <= 3600, h
        assert c.get("/two/index.html", headers={"X-Key": "b"})[0] == 200
        s, h, _ = c.get("/two/index.html", headers={"X-Key": "b"})
        assert s == 429 and ietf(h, "wide") is None, h
        time.sleep(1.1)
        s, h, _ = c.get("/two/index.html", headers={"X-Key": "b"})
        assert s == 429 and 3590 <= int(h["retry-after"]) <= 3600, h  # b's block was kept
        waits = set()
        for k in range(12):
            assert c.get("/jit/index.html", headers={"X-Key": "j%d" % k})[0] == 200
            s, h, _ = c.get("/jit/index.html", headers={"X-Key": "j%d" % k})
            assert s == 429 and 3600 <= int(h["retry-after"]) <= 5400, h
            waits.add(int(h["retry-after"]))
        assert len(waits) >= 6, waits
        c.close()


def test_cost_from_a_variable():
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=c:1m policy=fixed_window:10/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=c cost=$arg_cost; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        costs = [4, 4, 4, 2, 1, 0]
        got = [c.get(f"/index.html?cost={k}") for k in costs]
        want = replay("fixed_window:10/1h", [t for _, _, t in got], costs)
        # cost 0 peeks: refused once the window is spent, consuming nothing either way.
        assert [s for s, _, _ in got] == [200, 200, 429, 200, 429, 429], got
        assert [("allow" if s == 200 else "deny") for s, _, _ in got] == [w[0] for w in want]
        assert [ietf(h, "c")[0] for _, h, _ in got] == [w[1] for w in want]
        s, _, _ = c.get("/index.html?cost=lots")  # not a number: counted as 1, so refused
        assert s == 429
        assert 'ratelimit cost "$arg_cost" is "lots"' in n.log()
        c.close()


def test_leaky_bucket_delay_holds_the_request():
    policy = "leaky_bucket:2/1s,queue=3,delay=1"
    http = f"""
    ratelimit_zone $http_x_key zone=lb:1m policy={policy};
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=lb; }} }}"""
    with Nginx(http).start() as n:
        got = sorted(((s, h["x-rl-status"], took)
                      for s, h, took in simultaneous(n.port, 5, {"X-Key": "held"})),
                     key=lambda g: g[2])
        want = replay(policy, [0, 0, 0, 0, 0])
        assert sorted(w[0] for w in want) == sorted(
            "allow" if s == 200 else "deny" for s, _, _ in got), (got, want)
        delays = sorted(w[4] for w in want if w[0] == "allow")  # 0, 0, 0.5, 1
        held = sorted(d for s, _, d in got if s == 200)
        for want_d, took in zip(delays, held):
            # Held at least the delay (less the ms the timer rounds), at most a loaded machine's
            # scheduling later.
            assert want_d - 0.01 <= took <= want_d + 0.6, (delays, held)
        assert sorted(st for _, st, _ in got) == sorted(
            ["PASSED", "PASSED", "DELAYED", "DELAYED", "REJECTED"]), got


def test_concurrency_counts_requests_in_flight_and_releases_them():
    # A slow upstream keeps requests in flight: concurrency:2 lets 2 of 4 in at once.
    backend = socket.socket()
    backend.bind(("127.0.0.1", 0))
    backend.listen(16)
    bport = backend.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = backend.accept()
            except OSError:
                return

            def answer(conn=conn):
                conn.recv(65536)
                time.sleep(0.6)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
                conn.close()
            threading.Thread(target=answer, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    http = f"""
    ratelimit_zone "one" zone=cc:1m policy=concurrency:2;
    server {{ listen 127.0.0.1:PORT; {STATUS}
             location / {{ ratelimit zone=cc; proxy_pass http://127.0.0.1:{bport}; }} }}"""
    try:
        with Nginx(http).start() as n:
            got = sorted(s for s, _, _ in simultaneous(n.port, 4))
            assert got == [200, 200, 429, 429], got
            # Both leases were released when their requests ended.
            with ThreadPoolExecutor(2) as ex:
                assert sorted(ex.map(lambda _: get(n.port)[0], range(2))) == [200, 200]
    finally:
        backend.close()


def test_reload_keeps_the_state():
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=r:1m policy=fixed_window:3/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=r; }} }}"""
    with Nginx(http, workers=2).start() as n:
        assert [get(n.port)[0] for _ in range(2)] == [200, 200]
        n.reload()
        s, h, _ = get(n.port)
        assert s == 200 and ietf(h, "r")[0] == 0, h
        assert get(n.port)[0] == 429
        # A reload with a larger limit of the same algorithm carries the used count over.
        n.write(http.replace("fixed_window:3/1h", "fixed_window:4/1h"))
        n.reload()
        assert [get(n.port)[0] for _ in range(2)] == [200, 429]
        assert 'ratelimit zone "r" now has policy "fixed_window:4/1h": 1 keys carried over' \
            in n.log()


def test_a_full_zone_evicts_the_least_recently_used_and_keeps_serving():
    http = f"""
    ratelimit_zone $http_x_key zone=small:32k policy=gcra:1/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=small; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        statuses = [c.get(headers={"X-Key": f"key-{k}"})[0] for k in range(3000)]
        assert statuses == [200] * 3000, "a full zone must never fail a request"
        assert 'ratelimit zone "small" is full' in n.log()
        assert c.get(headers={"X-Key": "key-2999"})[0] == 429  # recent: still there
        assert c.get(headers={"X-Key": "key-0"})[0] == 200     # oldest: evicted, fresh again
        assert "could not allocate" not in n.log() and "[alert]" not in n.log()
        c.close()


def test_a_key_the_zone_cannot_hold_is_refused_logged_and_evicts_nothing():
    # A 40,000-byte key cannot be held by a 32k zone even empty (nor past a quarter of its pages):
    # let through, a long header would be a way around the limit; limit_req refuses a key it
    # cannot allocate a node for, and so does this module, with the configured status.
    http = f"""
    ratelimit_zone $http_x_key zone=small:32k policy=gcra:1/1h;
    server {{ listen 127.0.0.1:PORT; large_client_header_buffers 4 64k; {STATUS}
              location / {{ ratelimit zone=small; ratelimit_status 503; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        assert c.get(headers={"X-Key": "small"})[0] == 200
        big = "k" * 40000
        got = [c.get(headers={"X-Key": big}) for _ in range(3)]
        assert [s for s, _, _ in got] == [503] * 3, [s for s, _, _ in got]
        assert got[0][1].get("x-rl-status") == "REJECTED", got[0][1]
        log = n.log()
        assert log.count('ratelimit zone "small" cannot hold a key of 40000 bytes') == 1, log[-2000:]
        # Nothing was evicted for it: the small key is still used up.
        assert c.get(headers={"X-Key": "small"})[0] == 503
        assert "is full" not in n.log()
        c.close()


def test_idle_keys_are_evicted_before_busy_ones():
    # gcra:1000/1s: a key is idle (fresh) 1 ms after its request.  2000 keys of 128 bytes do not
    # fit in 32k, so the zone must make room; dropping idle keys first, it never drops a busy
    # one (none is: each key was used once, at least a loop turn ago).
    http = f"""
    ratelimit_zone $http_x_key zone=idle:32k policy=gcra:1000/1s;
    server {{ listen 127.0.0.1:PORT; location / {{ ratelimit zone=idle; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        for k in range(2000):
            c.get(headers={"X-Key": f"key-{k}"})
            if k % 200 == 0:
                time.sleep(0.01)
        c.close()
        log = n.log()
        busy = [int(m) for m in re.findall(r"dropped \d+ idle and (\d+) busy keys", log)]
        assert not busy or max(busy) == 0, log[-2000:]


def test_addresses_rotating_inside_one_48_get_the_48_limit():
    # addr_prefix=48: the key ($http_x_client, a client address) is rlt_addr_key's, so 2,000
    # distinct addresses of one /48 share one budget; IPv4-mapped is its IPv4; a malformed
    # address is refused (with the configured status) and logged once a second, never keyed.
    http = f"""
    ratelimit_zone $http_x_client zone=net:1m policy=gcra:20/1d addr_prefix=48;
    server {{ listen 127.0.0.1:PORT; {STATUS}
              location / {{ ratelimit zone=net; ratelimit_status 429; }} }}"""
    rnd = random.Random(48)
    addrs = set()
    while len(addrs) < 2000:
        addrs.add("2001:db8:77:%x:%x:%x:%x:%x" % tuple(rnd.getrandbits(16) for _ in range(5)))
    with Nginx(http, workers=2).start() as n:
        c = Client(n.port)
        codes = [c.get(headers={"X-Client": a})[0] for a in sorted(addrs)]
        assert codes.count(200) == 20 and codes.count(429) == 1980, codes.count(200)
        assert c.get(headers={"X-Client": "2001:db8:78::1"})[0] == 200
        r = [ietf(c.get(headers={"X-Client": a})[1], "net") for a in
             ("192.0.2.1", "::ffff:192.0.2.1")]
        assert [x[0] for x in r] == [19, 18], r
        got = [c.get(headers={"X-Client": "2001:db8::1::2"})[0] for _ in range(3)]
        assert got == [429] * 3, got
        c.close()
        log = n.log()
        assert log.count('malformed address "2001:db8::1::2"') == 1, log[-2000:]


def test_an_empty_key_is_not_limited():
    http = f"""
    ratelimit_zone $http_x_key zone=e:1m policy=fixed_window:1/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=e; }} }}"""
    with Nginx(http).start() as n:
        got = [get(n.port) for _ in range(3)]
        assert [s for s, _, _ in got] == [200] * 3 and "ratelimit" not in got[0][1]
        assert "x-rl-status" not in got[0][1] or got[0][1]["x-rl-status"] == ""


def test_retry_after_is_the_longest_wait_and_absent_when_the_cost_never_fits():
    http = f"""
    ratelimit_zone $binary_remote_addr zone=short:1m policy=gcra:1/10s;
    ratelimit_zone $binary_remote_addr zone=long:1m policy=gcra:1/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS}
             location / {{ ratelimit zone=short; ratelimit zone=long; }}
             location /big/ {{ ratelimit zone=short cost=5; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        assert c.get()[0] == 200
        s, h, _ = c.get()  # both refuse: the client may retry when both allow, in an hour
        assert s == 429 and ietf(h, "short") and ietf(h, "long"), h
        assert 3599 <= int(h["retry-after"]) <= 3600, h
        s, h, _ = c.get("/big/index.html")  # cost 5 of a burst of 1: no wait helps
        assert s == 429 and "retry-after" not in h, h
        assert "cost 5 can never pass" in n.log()
        c.close()


def test_an_internal_redirect_is_not_charged_twice():
    clear_of_boundary(3600)
    http = f"""
    ratelimit_zone $binary_remote_addr zone=once:1m policy=fixed_window:2/1h;
    ratelimit zone=once;
    log_format rl "$uri $ratelimit_status";
    server {{ listen 127.0.0.1:PORT; access_log {{logs}}/access.log rl;
             location / {{ index index.html; }} }}"""
    with Nginx(http) as n:
        n.write(http.replace("{logs}", os.path.join(n.prefix, "logs")))
        n.start()
        # "/" is redirected internally to /index.html: PREACCESS runs twice, the zone once.
        assert [get(n.port, "/")[0] for _ in range(3)] == [200, 200, 429]
        time.sleep(0.2)
        with open(os.path.join(n.prefix, "logs", "access.log")) as f:
            lines = f.read().split("\n")
        assert lines[:3] == ["/index.html PASSED", "/index.html PASSED", "/ REJECTED"], lines


def test_a_delay_is_not_held_in_dry_run():
    http = f"""
    ratelimit_zone $binary_remote_addr zone=lb:1m policy=leaky_bucket:1/1h,queue=3;
    server {{ listen 127.0.0.1:PORT; {STATUS} ratelimit_dry_run on;
             location / {{ ratelimit zone=lb; }} }}"""
    with Nginx(http).start() as n:
        t0 = time.time()
        got = [get(n.port)[1]["x-rl-status"] for _ in range(5)]
        assert time.time() - t0 < 2, "a dry run held a request"
        assert got == ["PASSED"] * 4 + ["REJECTED_DRY_RUN"], got


def test_a_reload_that_adds_a_penalty_box_or_jitter_takes_effect():
    # Only block= or jitter= changes: still another policy, adopted by the zone at the reload.
    http = f"""
    ratelimit_zone $http_x_key zone=r:1m policy=fixed_window:1/1s;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=r; }} }}"""
    with Nginx(http).start() as n:
        c = Client(n.port)
        assert [c.get(headers={"X-Key": "a"})[0] for _ in range(2)] == [200, 429]
        n.write(http.replace("fixed_window:1/1s", "fixed_window:1/1s,block=1h"))
        n.reload()
        c.close()
        c = Client(n.port)
        assert c.get(headers={"X-Key": "b"})[0] == 200
        s, h, _ = c.get(headers={"X-Key": "b"})
        assert s == 429 and 3599 <= int(h["retry-after"]) <= 3600, h
        c.close()
        assert 'now has policy "fixed_window:1/1s,block=1h"' in n.log(), n.log()


def test_a_reload_to_another_algorithm_drops_the_zone_keys():
    http = f"""
    ratelimit_zone $binary_remote_addr zone=r:1m policy=gcra:1/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=r; }} }}"""
    with Nginx(http).start() as n:
        assert [get(n.port)[0] for _ in range(2)] == [200, 429]
        n.write(http.replace("gcra:1/1h", "sliding_log:1/1h"))
        n.reload()
        assert [get(n.port)[0] for _ in range(2)] == [200, 429]
        assert '"sliding_log:1/1h": 0 keys carried over, 1 dropped' in n.log()


def test_a_reload_that_changes_a_zone_key_is_refused_and_the_old_config_serves():
    http = f"""
    ratelimit_zone $binary_remote_addr zone=r:1m policy=gcra:1/1h;
    server {{ listen 127.0.0.1:PORT; {STATUS} location / {{ ratelimit zone=r; }} }}"""
    with Nginx(http).start() as n:
        assert get(n.port)[0] == 200
        n.write(http.replace("$binary_remote_addr", "$http_x_key"))
        n.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while 'uses the "$http_x_key" key while previously it used' not in n.log():
            assert time.time() < deadline, n.log()[-2000:]
            time.sleep(0.05)
        assert get(n.port)[0] == 429  # the old zone, the old key, the old state


BAD = [
    ("ratelimit_zone zone=a:1m policy=gcra:1/s;", '"ratelimit_zone" needs a key first'),
    ("ratelimit_zone $binary_remote_addr policy=gcra:1/s;",
     '"ratelimit_zone" must have a "zone=NAME:SIZE" parameter'),
    ("ratelimit_zone $binary_remote_addr zone=a:1m;",
     '"ratelimit_zone" must have a "policy=POLICY" parameter'),
    ("ratelimit_zone $binary_remote_addr zone=a policy=gcra:1/s;", 'invalid zone "zone=a"'),
    ("ratelimit_zone $remote_addr zone=a:1m policy=gcra:1/s addr_prefix=20;",
     'invalid "addr_prefix=20": the IPv6 prefix is 32 to 128'),
    ("ratelimit_zone $binary_remote_addr zone=a:lots policy=gcra:1/s;",
     'invalid zone size "zone=a:lots"'),
    ("ratelimit_zone $binary_remote_addr zone=a:8k policy=gcra:1/s;", 'zone "a" is too small'),
    ("ratelimit_zone $binary_remote_addr zone=a:1m policy=sliding_log:1000000/1h;",
     'zone "a" is too small'),
    ("ratelimit_zone $binary_remote_addr zone=a/b:1m policy=gcra:1/s;", "invalid zone name"),
    ("ratelimit_zone $binary_remote_addr zone=a:1m policy=gcra:100/1x;",
     'invalid policy "gcra:100/1x": '),
    ("ratelimit_zone $binary_remote_addr zone=a:1m policy=bogus:1/s;", 'invalid policy "bogus:1/s": '),
    ("ratelimit_zone $binary_remote_addr zone=a:1m policy=gcra:1/s rate=1r/s;",
     'invalid parameter "rate=1r/s"'),
    ("ratelimit_zone $binary_remote_addr zone=a:1m policy=gcra:1/s;\n"
     "ratelimit_zone $http_x zone=a:1m policy=gcra:1/s;",
     'ratelimit_zone "a" is already bound to key "$binary_remote_addr"'),
    ("server { location / { ratelimit zone=nope; } }", 'unknown ratelimit_zone "nope"'),
    ("Z server { location / { ratelimit cost=2; } }", '"ratelimit" must have a "zone=NAME"'),
    ("Z server { location / { ratelimit zone=a cost=-1; } }", 'invalid cost "cost=-1"'),
    ("Z server { location / { ratelimit zone=a burst=5; } }", 'invalid parameter "burst=5"'),
    ("Z server { location / { ratelimit zone=a; ratelimit zone=a; } }", "is duplicate"),
    ("Z ratelimit_status 200;", 'invalid "ratelimit_status" "200": a status code from 400 to 599'),
    ("Z ratelimit_status many;", 'invalid "ratelimit_status" "many"'),
    ("Z ratelimit_log_level loud;", 'invalid "ratelimit_log_level" "loud": info, notice, warn or error'),
    ("Z ratelimit_dry_run maybe;", 'invalid value "maybe"'),
    ("Z ratelimit_headers yes;", 'invalid value "yes"'),
    ("ratelimit_zone $binary_remote_addr zone=c:1m policy=concurrency:2;\n"
     "server { location / { ratelimit zone=c cost=2; } }", "invalid cost 2 for the concurrency"),
]


def test_nginx_t_names_every_bad_directive():
    good = "ratelimit_zone $binary_remote_addr zone=a:1m policy=gcra:1/s;\n"
    with Nginx(good + "server { listen 127.0.0.1:PORT; location / { ratelimit zone=a; } }") as n:
        rc, err = n.check()
        assert rc == 0, err
        for text, message in BAD:
            if text.startswith("Z "):
                text = good + text[2:]
            n.write(text)
            rc, err = n.check()
            assert rc != 0 and message in err and "[emerg]" in err, (text, message, err)


def test_auth_request_recipe_against_ratelimitd_check():
    # docs/nginx.md's recipe for an nginx without the module: auth_request asks ratelimitd's
    # /v1/check (deny_status=403, the only denial auth_request understands), copies the
    # RateLimit fields and Retry-After back, and turns the 403 into a 429.
    if not ARGS.daemon:
        raise AssertionError("needs --daemon (ratelimitd)")
    tmp = tempfile.mkdtemp(prefix="rlt-authreq-")
    d = subprocess.Popen([ARGS.daemon, "--port", "-1", "--http-port", "0", "--grpc-port", "-1",
                          "--no-snapshot", "--threads", "1"], cwd=tmp, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        m = re.search(r"http [^ ]+:(\d+)", d.stdout.readline())
        assert m, "ratelimitd printed no port"
        rl = int(m.group(1))
        http = f"""
    server {{ listen 127.0.0.1:PORT;
        location = /_ratelimit {{
            internal;
            proxy_pass http://127.0.0.1:{rl}/v1/check?key=$remote_addr&policy=fixed_window:2/1h&deny_status=403;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }}
        location / {{
            auth_request /_ratelimit;
            auth_request_set $rl_policy $upstream_http_ratelimit_policy;
            auth_request_set $rl_fields $upstream_http_ratelimit;
            auth_request_set $rl_retry $upstream_http_retry_after;
            add_header RateLimit-Policy $rl_policy always;
            add_header RateLimit $rl_fields always;
            error_page 403 = @limited;
        }}
        location @limited {{
            add_header RateLimit-Policy $rl_policy always;
            add_header RateLimit $rl_fields always;
            add_header Retry-After $rl_retry always;
            return 429 "rate limited\n";
        }}
    }}"""
        with Nginx(http).start() as n:
            c = Client(n.port)
            got = [c.get() for _ in range(3)]
            assert [s for s, _, _ in got] == [200, 200, 429], [(s, h) for s, h, _ in got]
            assert got[0][1]["ratelimit-policy"] == '"inline";q=2;w=3600', got[0][1]
            assert got[0][1]["ratelimit"].startswith('"inline";r=1;'), got[0][1]
            assert int(got[2][1]["retry-after"]) >= 1, got[2][1]
            assert got[2][1]["ratelimit"].startswith('"inline";r=0;'), got[2][1]
            c.close()
    finally:
        d.terminate()
        d.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--nginx", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--daemon", default="")
    ap.add_argument("-k", default="")
    ARGS = ap.parse_args()
    for tool in (ARGS.nginx, ARGS.module, ARGS.cli):
        if not os.path.exists(tool):
            print(f"missing: {tool}", file=sys.stderr)
            return 1
    tests = [(k, v) for k, v in globals().items() if k.startswith("test_") and ARGS.k in k]
    failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            print(f"ok   {name} ({time.time() - t0:.1f}s)", flush=True)
        except Exception as e:  # report every test, then fail
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {e!r}"[:2000], flush=True)
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
