#!/usr/bin/python3
"""Real Redis clients against ratelimitd, each used the way its users write it: redis-py (Debian
python3-redis: info(), its default transactional pipeline, execute_command), hiredis (a C
program, tests/server/clients/hiredis_client.c), and node-redis (npm `redis`, installed into a
temporary folder, on RESP2 and RESP3).  Runs under /usr/bin/python3 (Debian's packages).
Usage: clients.py RATELIMITD HIREDIS_CLIENT [TEST_NAME...]; prints "N passed, N failed"."""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
HIREDIS = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
sys.argv = sys.argv[:2] + sys.argv[3:]  # integration.py reads the daemon from argv[1]
import integration as it  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def redis_py_info_parses_into_sections_and_typed_values(tmp):
    import redis
    d = it.Daemon(tmp)
    try:
        r = redis.Redis(port=d.port)
        assert r.ping() is True
        r.execute_command("RL.CHECK", "k", "gcra:2/1s")
        info = r.info()
        assert info["connected_clients"] >= 1 and info["redis_version"] == "7.0.0", info
        assert isinstance(info["total_commands_processed"], int)
        pol = [v for k, v in info.items() if k.startswith("policy")]
        assert pol and pol[0]["name"] == "i%3Agcra%3A2/1s" and pol[0]["allowed"] == 1, pol
        stats = r.info("stats")
        assert "total_commands_processed" in stats and "connected_clients" not in stats, stats
        assert r.info("everything")["keys"] >= 1
    finally:
        d.stop()


@test
def redis_py_default_pipeline_is_a_multi_exec_transaction(tmp):
    import redis
    d = it.Daemon(tmp)
    try:
        r = redis.Redis(port=d.port)
        p = r.pipeline()  # transaction=True: MULTI ... EXEC
        for _ in range(3):
            p.execute_command("CL.THROTTLE", "user:7", 1, 10, 60)
        res = p.execute()
        assert [x[0] for x in res] == [0, 0, 1], res
        p = r.pipeline(transaction=False)
        for _ in range(2):
            p.execute_command("RL.CHECK", "user:8", "fixed_window:1/1h")
        assert [x[0] for x in p.execute()] == [1, 0]
        with r.pipeline() as p:
            try:
                p.watch("k")
                raise AssertionError("WATCH was accepted")
            except redis.ResponseError as e:
                assert "WATCH is not supported" in str(e)
    finally:
        d.stop()


@test
def redis_py_client_and_config_calls_work(tmp):
    import redis
    d = it.Daemon(tmp)
    try:
        r = redis.Redis(port=d.port, client_name="app-1")
        assert r.client_getname() in ("app-1", b"app-1")
        assert r.client_id() >= 1
        assert r.config_get("maxclients") == {"maxclients": "10000"}
        assert r.config_get("save")["save"] == ""
        assert r.dbsize() == 0
        assert r.execute_command("RL.CHECK", "a", "default")[0] == 1
        try:
            r.config_set("maxmemory", "1mb")
            raise AssertionError("CONFIG SET was accepted")
        except redis.ResponseError as e:
            assert "CONFIG SET" in str(e)
        assert r.echo("hi") == b"hi"
        assert r.select(0) is True or r.execute_command("SELECT", 0) == b"OK"
    finally:
        d.stop()


@test
def hiredis_commands_and_pipelines_get_the_documented_replies(tmp):
    if HIREDIS is None or not os.path.exists(HIREDIS):
        raise AssertionError("hiredis_client was not built (needs libhiredis-dev)")
    d = it.Daemon(tmp)
    try:
        out = subprocess.run([HIREDIS, str(d.port)], capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "ints 0 16 15 -1 2", lines
        assert lines[1].startswith("ints 1 2 1 0 "), lines
        assert [l.split()[1] for l in lines[2:7]] == ["1", "1", "1", "0", "0"], lines
        assert lines[7].startswith("error ERR unknown policy 'nosuch'"), lines
        assert "info connected_clients=1" in lines, lines
    finally:
        d.stop()


def npm_install(tmp):
    """npm install redis into tmp; None when npm or the registry is unreachable."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    r = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", tmp,
                        "redis@5"], capture_output=True, text=True, timeout=180)
    return tmp if r.returncode == 0 else None


@test
def node_redis_on_resp2_and_resp3(tmp):
    mods = npm_install(tmp)
    if mods is None:
        print("SKIP node_redis_on_resp2_and_resp3: npm or its registry is unreachable")
        return
    shutil.copy(os.path.join(HERE, "clients", "node_client.mjs"), tmp)
    d = it.Daemon(tmp)
    try:
        for resp in ("2", "3"):
            r = subprocess.run(["node", os.path.join(tmp, "node_client.mjs"), str(d.port), resp],
                               capture_output=True, text=True, timeout=60, cwd=tmp)
            assert r.returncode == 0, (resp, r.stdout, r.stderr)
            steps = {j["step"]: j["value"] for j in map(json.loads, r.stdout.splitlines())}
            assert steps["ping"] == "PONG", steps
            # Each run has keys of its own: a fresh burst whatever the time between runs.
            assert steps["throttle"][:3] == [0, 16, 15], steps
            assert steps["check"][0] == 1 and steps["info"] is True, steps
            # The transaction's two checks: the second uses the 2/1h window's last.
            assert [x[0] for x in steps["multi"]] == [1, 0], steps
    finally:
        d.stop()


def main():
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltk-")


if __name__ == "__main__":
    sys.exit(main())
