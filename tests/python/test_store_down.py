"""A store that cannot answer fails as the user chose, loudly: a real redis-server stopped and
restarted under traffic through a Flask app, for each mode (fail closed: 503, never a 429; fail
open: every request allowed; an in-process fallback: the limits still hold, and Redis decides
again once it is back).  Each switch is logged once on the `libratelimit` logger and counted."""
import logging
import threading

import flask
import pytest

from libratelimit.flask import FlaskLimiter


def app_for(url, policy, **kw):
    from libratelimit import RedisStore
    app = flask.Flask("down")
    # backoff: the client's breaker tries a failed server again after 1 ns, so the first request
    # after the restart reaches it (the default waits 0.1 s and more: a timing assumption)
    store = RedisStore(url.split("://")[1], backoff_min=1e-9, backoff_max=1e-9, timeout=5)
    limiter = FlaskLimiter(app, default=policy, store=store, **kw)
    app.add_url_rule("/", "index", lambda: "ok")
    return app, limiter.default


def switches(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "libratelimit"]


# Each mode's arguments (the fallback tries Redis again on every call: no waiting in a test).
MODES = {"closed": {}, "open": {"fail_open": True},
         "fallback": {"fallback": True, "fallback_probe": 0}}


@pytest.mark.parametrize("mode", list(MODES))
def test_redis_stopped_and_restarted_under_traffic(redis_server, caplog, mode):
    caplog.set_level(logging.INFO, logger="libratelimit")
    app, lim = app_for(redis_server.url, "1000/hour", **MODES[mode])
    c = app.test_client()
    assert [c.get("/").status_code for _ in range(5)] == [200] * 5
    assert switches(caplog) == []
    redis_server.kill()
    during = [c.get("/").status_code for _ in range(20)]
    if mode == "closed":
        assert during == [503] * 20  # loud, and not a 429: nobody is over a limit
        r = c.get("/")
        assert r.status_code == 503 and r.headers["Retry-After"]
    else:
        assert during == [200] * 20  # no request refused for the outage
    logged = switches(caplog)
    assert len(logged) == 1 and "cannot answer" in logged[0], logged  # once, not 20 times
    h = lim.health()
    assert not h["up"] and h["outages"] == 1 and h["mode"] == mode
    if mode == "fallback":
        assert h["fallback_decisions"] >= 20 and h["failed_decisions"] == 0
    else:
        assert h["failed_decisions"] >= 20
    redis_server.start()
    after = [c.get("/").status_code for _ in range(5)]
    assert after == [200] * 5
    logged = switches(caplog)
    assert len(logged) == 2 and "is back" in logged[1], logged
    h = lim.health()
    assert h["up"] and h["recoveries"] == 1
    # Redis decides again: its (fresh) count holds exactly the requests since it came back
    d = lim.peek(b"index\0addr:127.0.0.1")
    assert d.error is None and d.remaining == 1000 - 5


def test_fallback_keeps_the_limits_while_redis_is_down(redis_server, caplog):
    caplog.set_level(logging.INFO, logger="libratelimit")
    app, lim = app_for(redis_server.url, "5/hour", fallback=True, fallback_probe=0)
    c = app.test_client()
    assert [c.get("/").status_code for _ in range(2)] == [200] * 2
    redis_server.kill()
    # the fallback counts from zero (it cannot know Redis's count): 5 more, then 429s
    assert [c.get("/").status_code for _ in range(7)] == [200] * 5 + [429] * 2
    redis_server.start()
    assert [c.get("/").status_code for _ in range(6)] == [200] * 5 + [429]  # Redis, fresh: 5
    assert lim.health()["recoveries"] == 1


def test_fallback_only_for_remote_stores():
    import libratelimit as rl
    with pytest.raises(ValueError):
        rl.Limiter("5/minute", fallback=True)


def test_flask_limiter_api_swallow_errors_and_in_memory_fallback(redis_server, caplog):
    from libratelimit import RedisStore
    from libratelimit.flask_limiter import Limiter
    from libratelimit.flask_limiter.util import get_remote_address
    caplog.set_level(logging.INFO, logger="libratelimit")
    results = {}
    for name, kw in [("swallow", {"swallow_errors": True}),
                     ("fallback", {"in_memory_fallback_enabled": True}),
                     ("closed", {})]:
        app = flask.Flask(name)
        store = RedisStore(redis_server.url.split("://")[1], backoff_min=1e-9, backoff_max=1e-9,
                           timeout=5,
                           prefix=name)
        lim = Limiter(get_remote_address, app=app, storage_uri=store, **kw)
        app.add_url_rule("/", "index", lim.limit("3/hour")(lim.limit("100/hour")(lambda: "ok")))
        results[name] = app.test_client()
    redis_server.kill()
    got = {n: [c.get("/").status_code for _ in range(4)] for n, c in results.items()}
    assert got == {"swallow": [200] * 4, "fallback": [200] * 3 + [429], "closed": [503] * 4}
    assert sum("cannot answer" in r.getMessage() for r in caplog.records) >= 3
    redis_server.start()
    got = {n: [c.get("/").status_code for _ in range(4)] for n, c in results.items()}
    assert got == {n: [200] * 3 + [429] for n in results}


@pytest.mark.parametrize("mode", list(MODES))
def test_redis_stopped_and_restarted_under_concurrent_traffic(redis_server, caplog, mode):
    # Two threads keep requesting while the main thread stops and restarts Redis: the codes
    # they see are the mode's, and every switch the limiter counted was logged once (calls in
    # flight across the restart may flap down and up again: each flap is a counted, logged pair).
    caplog.set_level(logging.INFO, logger="libratelimit")
    app, lim = app_for(redis_server.url, "1000000/hour", **MODES[mode])
    stop, seen = threading.Event(), []

    def traffic():
        c = app.test_client()
        while not stop.is_set():
            seen.append(c.get("/").status_code)

    ts = [threading.Thread(target=traffic) for _ in range(2)]
    for t in ts:
        t.start()
    try:
        c = app.test_client()
        assert c.get("/").status_code == 200
        redis_server.kill()
        down = [c.get("/").status_code for _ in range(10)]
        redis_server.start()
        after = [c.get("/").status_code for _ in range(10)]
    finally:
        stop.set()
        for t in ts:
            t.join()
    allowed = {"closed": {200, 503}, "open": {200}, "fallback": {200}}[mode]
    assert seen and set(seen) <= allowed  # never a 429: nobody is over 1,000,000 an hour
    assert down == ([503] * 10 if mode == "closed" else [200] * 10)
    assert after[-1] == 200
    h = lim.health()
    logged = [r.getMessage() for r in caplog.records if r.name == "libratelimit"]
    assert h["outages"] >= 1 and h["up"]
    assert sum("cannot answer" in m for m in logged) == h["outages"]
    assert sum("is back" in m for m in logged) == h["recoveries"] == h["outages"]
