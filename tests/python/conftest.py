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
                "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes",
                *extra]
        if module:
            args += ["--loadmodule", module, "testing", "yes"]
        self.args = args
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def kill(self):
        """Stops the server (its data is gone); start() brings it back on the same port."""
        self.proc.terminate()
        self.proc.wait(10)

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


@pytest.fixture
def redis_module_server():
    r = RedisServer(module=program("src/redismodule/ratelimit.so"))
    yield r
    r.stop()


@pytest.fixture
def ratelimitd():
    """A private ratelimitd: RESP on a random port, HTTP and gRPC off, no snapshot."""
    port = free_port()
    proc = subprocess.Popen([program("src/server/ratelimitd"), "--port", str(port),
                             "--http-port", "-1", "--grpc-port", "-1", "--no-snapshot",
                             "--threads", "2"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    yield port
    proc.terminate()
    proc.wait(10)


def redis_servers(mode):
    """tests/redis/redis-servers.sh run MODE around a waiting command: its servers stay up until
    the returned stop() (the script's trap then stops every one); the environment it exports
    (RLT_REDIS_SERVERS, RLT_REDIS_SENTINELS) is returned."""
    d = tempfile.mkdtemp(prefix="rlt-py-servers-")
    env_file, stop_file = os.path.join(d, "env"), os.path.join(d, "stop")
    cmd = ("env | grep ^RLT_REDIS > %s.tmp && mv %s.tmp %s; "
           "while [ ! -e %s ]; do sleep 0.1; done" % (env_file, env_file, env_file, stop_file))
    proc = subprocess.Popen([os.path.join(ROOT, "tests", "redis", "redis-servers.sh"), "run", mode,
                             "--", "sh", "-c", cmd], stdout=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while not os.path.exists(env_file):
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError("redis-servers.sh %s did not start" % mode)
        time.sleep(0.05)
    env = dict(l.split("=", 1) for l in open(env_file).read().splitlines())

    def stop():
        open(stop_file, "w").close()
        proc.wait(60)
        shutil.rmtree(d, ignore_errors=True)

    return env, stop


@pytest.fixture
def redis_cluster():
    env, stop = redis_servers("cluster")
    yield env["RLT_REDIS_SERVERS"]
    stop()


@pytest.fixture
def redis_sentinel():
    env, stop = redis_servers("sentinel")
    yield env["RLT_REDIS_SENTINELS"]
    stop()
