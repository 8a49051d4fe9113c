"""pytest setup for the Python package's tests: where the package and the built programs are.

RLT_PY_PATH: the folder holding the libratelimit package (a wheel unpacked by tests/python/run,
or python/ after `setup.py build_ext --inplace`); RLT_BUILD_DIR: the cmake build with the
`ratelimit` CLI and `ratelimitd` (default build/dev)."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.environ.get("RLT_PY_PATH") or os.path.join(ROOT, "python"))
BUILD = os.environ.get("RLT_BUILD_DIR") or os.path.join(ROOT, "build", "dev")


def program(rel):
    path = os.path.join(BUILD, rel)
    if not os.access(path, os.X_OK):
        pytest.fail("%s is not built (RLT_BUILD_DIR=%s)" % (rel, BUILD))
    return path


@pytest.fixture(scope="session")
def cli():
    return program("src/cli/ratelimit")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("port %d never opened" % port)


class RedisServer:
    """A private redis-server on a random port, optionally with the module loaded."""

    def __init__(self, module=None, extra=()):
        self.dir = tempfile.mkdtemp(prefix="rlt-py-redis-")
        self.port = free_port()
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.dir, *extra]
        if module:
            args += ["--loadmodule", module, "testing", "yes"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_server():
    if not shutil.which("redis-server"):
        pytest.fail("redis-server is not installed (scripts/deps)")
    r = RedisServer()
    yield r
    r.stop()
