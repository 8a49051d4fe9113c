#!/usr/bin/env python3
"""Runs every example of README.md and docs/*.md that shows output, and compares.

Usage: doc_examples.py SOURCE_DIR BUILD_DIR [FILE[:LINE]...]

An example is a fenced block whose first line starts with "$ ": each "$ " line is a command,
the lines after it (up to the next "$ ") its output as a terminal shows it.  A block whose
commands show no output is not run.  Each block runs in one bash, on a pseudo-terminal (so
redis-cli answers as it does to a person, and stderr lands where it is seen), in a temporary
copy of the checkout (symbolic links to the source tree, and build/release pointing at
BUILD_DIR) after the README's own `export PATH=...` line: the examples must run as written
from a checkout.  Around the block:

- a fresh ratelimitd (--no-snapshot, free ports) when the block talks to 6380, 8080 or 8081
  and does not start one itself; the doc's ports (6379, 6380, 8080, 8081, 80 for nginx) are
  mapped to free ones in the commands (and back in the output);
- a command ending in "&" runs in the background, its output to a log (a terminal would show
  it at some unknown point), and the next command waits for its port; background jobs are
  killed at the end of the block;
- "$ cat FILE" of a file that is not in the checkout writes FILE from the output shown (the
  doc defines the file, the commands after it use it);
- the checkout must hold nothing new afterwards (no dump.rdb, no snapshot).

Output is compared line by line after removing a trailing "  # comment" from each shown line.
Hidden directives, HTML comments on the lines just above the block, one per comment:

  <!-- doc-test setup: CMD -->       runs CMD first (output not shown)
  <!-- doc-test config: YAML -->     the fresh ratelimitd's --config (one line of YAML)
  <!-- doc-test vary: TEXT [A..B] --> TEXT stands for whatever the run prints there (an
                                     integer in A..B when given); later commands get the
                                     printed value in its place
  <!-- doc-test excerpt: TEXT -->    for the commands containing TEXT, the shown lines appear
                                     in the output in this order (curl -i: a few headers)
  <!-- doc-test nginx -->            an nginx runs the previous ```nginx block (the module
                                     from BUILD_DIR)
  <!-- doc-test skip: REASON -->     not run (say why)
"""
import errno
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time

SRC = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(sys.argv[2])
ONLY = sys.argv[3:]
DAEMON = os.path.join(BUILD, "src/server/ratelimitd")
NGX_MODULE = os.path.join(BUILD, "src/nginx/ngx_http_ratelimit_module.so")
# Blocks in files this test's owners do not edit, not run, with the reason.
SKIP = {("docs/performance.md", "bench/server/vs-nginx.sh"):
        "a measurement: its figures are the machine's, recorded with the date and load"}
SEP = "\x1e"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError("exited before listening on %d" % port)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.03)
    raise AssertionError("nothing listens on %d" % port)


class Block:
    def __init__(self, path, line, lines, directives, prev_nginx):
        self.path, self.line, self.directives, self.prev_nginx = path, line, directives, prev_nginx
        self.cmds = []  # (command, [shown output lines])
        for l in lines:
            if l.startswith("$ "):
                self.cmds.append((l[2:], []))
            elif self.cmds:
                self.cmds[-1][1].append(l)

    def get(self, name):
        return [v for n, v in self.directives if n == name]


def parse(path):
    rel = os.path.relpath(path, SRC)
    text = open(path, encoding="utf-8").read().split("\n")
    blocks, i, last_nginx = [], 0, None
    while i < len(text):
        m = re.match(r"^(`{3,})(\w*)\s*$", text[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(text) and text[j] != fence:
            j += 1
        body = text[i + 1:j]
        if lang == "nginx":
            last_nginx = "\n".join(body)
        elif body and body[0].startswith("$ "):
            directives, k = [], start - 1
            while k >= 0:
                d = re.match(r"^<!-- doc-test (\w+)(?::\s*(.*?))?\s*-->$", text[k])
                if not d:
                    break
                directives.insert(0, (d.group(1), d.group(2) or ""))
                k -= 1
            b = Block(rel, start + 1, body, directives, last_nginx)
            if any(out for _, out in b.cmds):
                blocks.append(b)
        i = j + 1
    return blocks


def strip_comment(l):
    return re.sub(r" {2,}# .*$", "", l).rstrip()


def shown_regex(l, vary):
    """The regex of one shown line: literal, but each `vary` text matches one printed token."""
    alt = "|".join(re.escape(v) for v in sorted(vary, key=len, reverse=True))
    parts, pos, groups = [], 0, []
    for m in re.finditer(alt, l):
        parts.append(re.escape(l[pos:m.start()]))
        parts.append(r"([^\s\"',;]+)")
        groups.append(m.group(0))
        pos = m.end()
    parts.append(re.escape(l[pos:]))
    return re.compile("".join(parts) + r"\Z"), groups


class Run:
    """One block's environment: checkout copy, ports, daemons."""

    def __init__(self, block):
        self.b = block
        self.tmp = tempfile.mkdtemp(prefix="rlt-doc-")
        os.chmod(self.tmp, 0o755)
        self.co = os.path.join(self.tmp, "checkout")
        os.mkdir(self.co)
        for e in os.listdir(SRC):
            if e not in ("build", ".git") and not e.startswith("build-"):
                os.symlink(os.path.join(SRC, e), os.path.join(self.co, e))
        os.mkdir(os.path.join(self.co, "build"))
        os.symlink(BUILD, os.path.join(self.co, "build", "release"))
        self.before = set(os.listdir(self.co))
        self.ports = {n: free_port() for n in (6379, 6380, 8080, 8081, 80)}
        self.procs = []
        self.defined = []
        self.shell = None

    def sub(self, s, back=False):
        """The doc's ports to this run's (or back)."""
        pairs = [(str(k), str(v)) for k, v in self.ports.items() if k != 80]
        if back:
            for k, v in pairs:
                s = re.sub(r"(?<![0-9])%s(?![0-9])" % v, k, s)
            return s.replace("127.0.0.1:%d/" % self.ports[80], "127.0.0.1/")
        for k, v in pairs:
            s = re.sub(r"(?<![0-9])%s(?![0-9])" % k, v, s)
        return s.replace("127.0.0.1/", "127.0.0.1:%d/" % self.ports[80])

    def start_daemon(self):
        args = [DAEMON, "--no-snapshot", "--port", str(self.ports[6380]), "--http-port",
                str(self.ports[8080]), "--grpc-port", str(self.ports[8081])]
        for y in self.b.get("config"):
            path = os.path.join(self.tmp, "daemon.yaml")
            with open(path, "w") as f:
                f.write(y + "\n")
            args += ["--config", path]
        log = open(os.path.join(self.tmp, "daemon.log"), "w")
        p = subprocess.Popen(args, cwd=self.tmp, stdout=log, stderr=log)
        self.procs.append(p)
        wait_port(self.ports[6380], p)

    def start_nginx(self):
        conf = self.b.prev_nginx
        assert conf, "doc-test nginx: no ```nginx block before the example"
        p = self.tmp + "/nginx"
        for d in ("", "/logs", "/tmp", "/html"):
            os.mkdir(p + d)
            os.chmod(p + d, 0o755)
        conf = re.sub(r"(?m)^load_module \S+;.*$", "", conf)
        conf = re.sub(r"(?m)^(\s*)server \{", r"\1server {\n\1    listen 127.0.0.1:%d;"
                      % self.ports[80], conf)
        temps = "".join("    %s_temp_path %s/tmp/%s;\n" % (t, p, t) for t in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = conf.replace("http {", "http {\n    access_log off;\n" + temps, 1)
        conf = ("load_module %s;\ndaemon off;\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/logs/error.log;\n"
                "events { worker_connections 64; }\n" % (NGX_MODULE, p, p)) + conf
        with open(p + "/nginx.conf", "w") as f:
            f.write(conf)
        proc = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", p + "/", "-c", "nginx.conf"],
                                stdout=subprocess.DEVNULL, stderr=open(p + "/stderr", "w"))
        self.procs.append(proc)
        try:
            wait_port(self.ports[80], proc)
        except AssertionError:
            raise AssertionError("nginx did not start: " + open(p + "/stderr").read())

    def start_shell(self):
        """One bash for the block, on a pseudo-terminal, reading its commands from a pipe as
        they are written: each command's output is read before the next is written."""
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["PATH"] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        env["LC_ALL"] = "C.UTF-8"
        env["TERM"] = "dumb"
        r, self.w = os.pipe()
        self.shell = subprocess.Popen(["bash", "--noprofile", "--norc", "/dev/fd/%d" % r],
                                      pass_fds=[r], stdin=subprocess.DEVNULL, stdout=slave,
                                      stderr=slave, env=env, cwd=self.co, start_new_session=True)
        os.close(slave)
        os.close(r)
        self.buf, self.n = b"", 0
        self.send("cd " + self.co)
        self.send(PATH_LINE)
        for s in self.b.get("setup"):
            self.send("{ %s ; } >/dev/null 2>&1 </dev/null" % self.sub(s))
        self.command("true")

    def send(self, line):
        os.write(self.w, (line + "\n").encode())

    def command(self, c):
        """Runs one command; returns what the terminal showed (doc ports put back)."""
        body = self.sub(c)
        if "--port" not in body:  # a daemon the example starts: on this run's ports
            body = re.sub(r"(^|[|;&]\s*)ratelimitd(?=\s)", r"\1ratelimitd --port %d --http-port %d "
                          "--grpc-port %d" % (self.ports[6380], self.ports[8080], self.ports[8081]),
                          body)
        bg = re.match(r"^(.*?)\s*&(\s+#.*)?$", body)
        if bg:
            self.send("{ %s ; } >%s/bg%d.log 2>&1 </dev/null &" % (bg.group(1), self.tmp, self.n))
            wait = [v for k, v in self.ports.items() if str(v) in bg.group(1)]
            if "ratelimitd" in bg.group(1) and not wait:
                wait = [self.ports[6380]]
            for p in wait:
                self.send("for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null "
                          "&& break; sleep 0.05; done" % p)
        else:
            self.send(body)
        mark = ("%s%d%s" % (SEP, self.n, SEP)).encode()
        self.send("printf '%s'" % mark.decode())
        self.n += 1
        deadline = time.time() + 120
        while mark not in self.buf:
            if time.time() > deadline:
                raise AssertionError("$ %s: no end after 120 s" % c)
            r, _, _ = select.select([self.master], [], [], 1)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    chunk = b""
                if not chunk:
                    raise AssertionError("$ %s: the shell ended" % c)
                self.buf += chunk
            elif self.shell.poll() is not None:
                raise AssertionError("$ %s: the shell ended" % c)
        out, self.buf = self.buf.split(mark, 1)
        text = out.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "")
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # curl's bold header names on a terminal
        return self.sub(text, back=True)

    def finish(self):
        """Ends the shell and what the example left running (SIGTERM: servers stop as they
        do for a person, writing what they write on exit)."""
        self.send("kill $(jobs -p) 2>/dev/null; wait; exit 0")
        os.close(self.w)
        try:
            self.shell.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait()
        deadline = time.time() + 10
        try:
            os.killpg(self.shell.pid, signal.SIGTERM)  # background jobs' own children
            while time.time() < deadline:
                os.killpg(self.shell.pid, 0)
                time.sleep(0.05)
            os.killpg(self.shell.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.master)

    def close(self):
        if self.shell is not None and self.shell.poll() is None:
            os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def check(block):
    """Runs one block; returns a list of complaints (empty: the doc is true)."""
    for (f, cmd), why in SKIP.items():
        if block.path == f and any(cmd in c for c, _ in block.cmds):
            return None, why
    skip = block.get("skip")
    if skip:
        return None, skip[0]
    vary = {}
    for v in block.get("vary"):
        parts = v.split()
        rng = tuple(int(x) for x in parts[1].split("..")) if len(parts) > 1 else None
        vary[parts[0]] = rng
    run = Run(block)
    try:
        text = "\n".join(c for c, _ in block.cmds)
        starts_own = re.search(r"(^|\s)ratelimitd\s", text)
        if not starts_own and re.search(r"\b(6380|8080|8081)\b", text + "".join(block.get("setup"))):
            run.start_daemon()
        if block.get("nginx"):
            run.start_nginx()
        values, problems = {}, []
        run.start_shell()
        for cmd, shown in block.cmds:
            m = re.match(r"^cat (\S+)(\s+#.*)?$", cmd)
            if m and not os.path.lexists(os.path.join(run.co, m.group(1))):
                # the doc defines the file: what the commands after it read
                run.defined.append(m.group(1))
                with open(os.path.join(run.co, m.group(1)), "w") as f:
                    f.write(run.sub("\n".join(strip_comment(l) for l in shown).rstrip("\n")) + "\n")
            real = cmd
            for k, v in values.items():
                real = real.replace(k, v)  # a text that varies: what the run printed
            want = [strip_comment(l) for l in shown]
            while want and want[-1] == "":
                want.pop()
            have = [l.rstrip() for l in run.command(real).split("\n")]
            while have and have[-1] == "":
                have.pop()
            excerpt = any(e and e in cmd for e in block.get("excerpt"))
            if not match(want, have, vary, values, excerpt):
                problems.append("$ %s\n  shown:\n%s\n  printed:\n%s" % (
                    cmd, "\n".join("    | " + l for l in want), "\n".join("    | " + l for l in have)))
        run.finish()
        left = set(os.listdir(run.co)) - run.before - set(run.defined)
        if left:
            problems.append("left in the checkout: %s" % ", ".join(sorted(left)))
        return problems, None
    finally:
        run.close()


def match(want, have, vary, values, excerpt):
    pats = []
    for l in want:
        used = [v for v in vary if v in l]
        if used:
            rx, groups = shown_regex(l, used)
        else:
            rx, groups = re.compile(re.escape(l) + r"\Z"), []
        pats.append((rx, groups))
    if not excerpt and len(pats) != len(have):
        return False
    k = 0
    for rx, groups in pats:
        while k < len(have):
            m = rx.match(have[k])
            k += 1
            if m and all(ok_value(g, m.group(n + 1), vary, values) for n, g in enumerate(groups)):
                break
            if not excerpt:
                return False
        else:
            return False
    return True


def ok_value(text, got, vary, values):
    rng = vary[text]
    if rng is not None:
        if not re.fullmatch(r"-?\d+", got) or not rng[0] <= int(got) <= rng[1]:
            return False
    values[text] = got
    return True


def path_line():
    for l in open(os.path.join(SRC, "README.md"), encoding="utf-8"):
        if l.startswith("export PATH="):
            return l.split("  #")[0].strip()
    raise SystemExit("FAIL README.md has no `export PATH=...` line: its examples call ratelimit "
                     "and ratelimitd by name, so it must say how to reach them from a checkout")


PATH_LINE = path_line()


def main():
    files = [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(SRC, "docs", f) for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md"))
    failed = passed = skipped = 0
    for f in files:
        for b in parse(f):
            name = "%s:%d" % (b.path, b.line)
            if ONLY and not any(name == o or b.path == o for o in ONLY):
                continue
            try:
                problems, why = check(b)
            except Exception as e:  # noqa: BLE001 (a harness failure is a failed example)
                problems, why = ["%s: %s" % (type(e).__name__, e)], None
            if why:
                print("skip %s (%s)" % (name, why))
                skipped += 1
            elif problems:
                print("FAIL %s\n%s" % (name, "\n".join(problems)))
                failed += 1
            else:
                print("ok   %s (%d commands)" % (name, len(b.cmds)))
                passed += 1
            sys.stdout.flush()
    print("%d examples true, %d false, %d not run" % (passed, failed, skipped))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
