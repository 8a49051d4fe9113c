"""The middleware through the frameworks' own test clients: Flask's test client, Starlette's
TestClient (httpx), FastAPI; 429s with Retry-After and the IETF headers, headers on allowed
responses, keys per user, per-route policies.  The example apps in examples/python are what is
tested."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def example(name):
    spec = importlib.util.spec_from_file_location(
        "example_" + name, os.path.join(ROOT, "examples", "python", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_flask_defaults_decorator_users_and_headers():
    app = example("flask_app").app
    c = app.test_client()
    r = c.get("/")
    assert r.status_code == 200
    assert r.headers["RateLimit-Policy"] == '"default";q=100;w=60'
    assert r.headers["RateLimit"].startswith('"default";r=99;')
    for i in range(5):
        assert c.post("/login").status_code == 200
    r = c.post("/login")
    assert r.status_code == 429
    assert int(r.headers["Retry-After"]) >= 1
    assert r.headers["RateLimit"].startswith('"default";r=0;')
    # another user (API key) has their own count; the client address was the key above
    assert c.post("/login", headers={"X-API-Key": "alice"}).status_code == 200
    # exempt views have no limit and no headers
    r = c.get("/healthz")
    assert r.status_code == 200 and "RateLimit" not in r.headers
    # the decorator's name is the IETF policy name
    r = c.get("/api/search")
    assert r.headers["RateLimit-Policy"] == '"search";q=10;w=1'


def test_flask_app_limit_shared_across_views():
    import flask
    from libratelimit.flask import FlaskLimiter
    app = flask.Flask("t")
    FlaskLimiter(app, app_limit="3/minute")
    app.add_url_rule("/a", "a", lambda: "a")
    app.add_url_rule("/b", "b", lambda: "b")
    c = app.test_client()
    assert [c.get(p).status_code for p in ["/a", "/b", "/a", "/b"]] == [200, 200, 200, 429]


def test_wsgi_middleware_routes_and_users():
    from werkzeug.test import Client
    app = example("wsgi_app").app
    c = Client(app)
    codes = [c.post("/login").status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
    r = c.post("/login")
    assert r.headers["Retry-After"] and r.headers["Content-Type"].startswith("text/plain")
    # REMOTE_USER is the key when set: another user is not limited by the address's count
    assert c.post("/login", environ_overrides={"REMOTE_USER": "bob"}).status_code == 200
    r = c.get("/api/x")
    assert r.status_code == 200 and r.headers["RateLimit-Policy"] == '"default";q=100;w=60'
    assert r.headers["RateLimit"] == '"default";r=19;t=1'  # burst 20, one used


def test_asgi_middleware_starlette_users():
    from starlette.testclient import TestClient
    c = TestClient(example("asgi_app").app)
    ok = [c.post("/login").status_code for _ in range(6)]
    assert ok == [200] * 5 + [429]
    r = c.post("/login")
    assert int(r.headers["retry-after"]) >= 1
    assert r.headers["ratelimit-policy"] == '"default";q=5;w=60'
    # an authenticated user is counted apart from the address
    r = c.post("/login", headers={"Authorization": "Bearer carol"})
    assert r.status_code == 200 and r.text == "hello carol\n"
    assert r.headers["ratelimit"].startswith('"default";r=4;')


def test_fastapi_dependency():
    from fastapi.testclient import TestClient
    c = TestClient(example("fastapi_app").app)
    codes = [c.get("/search").status_code for _ in range(11)]
    assert codes == [200] * 10 + [429]
    r = c.get("/search")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert r.headers["ratelimit-policy"] == '"default";q=10;w=60'
    # the route's endpoint is the counter, not its path: /items/1 and /items/2 share 3/minute
    assert [c.get("/items/%d" % i).status_code for i in range(4)] == [200, 200, 200, 429]
    r = c.post("/upload")
    assert r.status_code == 200 and r.headers["ratelimit-policy"] == '"upload";q=5;w=1'


# ---- the default key: the client address, never a header the client chose ----------------

def basic(name):
    import base64
    return {"Authorization": "Basic " + base64.b64encode(("%s:pw" % name).encode()).decode()}


def flask_app(**kw):
    import flask
    from libratelimit.flask import FlaskLimiter
    app = flask.Flask("t")
    FlaskLimiter(app, default="5/minute", **kw)
    app.add_url_rule("/", "index", lambda: "ok")
    return app


def test_flask_default_key_ignores_made_up_basic_auth_names():
    c = flask_app().test_client()
    codes = [c.get("/", headers=basic("user%d" % i)).status_code for i in range(20)]
    assert codes == [200] * 5 + [429] * 15


def test_flask_600_byte_basic_auth_name_is_no_500():
    c = flask_app().test_client()
    codes = [c.get("/", headers=basic("x" * 600)).status_code for i in range(7)]
    assert codes == [200] * 5 + [429] * 2


def test_flask_overlong_key_from_key_function_is_hashed_and_counted():
    import flask
    app = flask_app(key=lambda: "user:" + flask.request.headers.get("X-User", "-"))
    c = app.test_client()
    long_a, long_b = "a" * 600, "a" * 599 + "b"  # equal up to the store's 512 bytes
    assert [c.get("/", headers={"X-User": long_a}).status_code for _ in range(6)] == \
        [200] * 5 + [429]
    assert c.get("/", headers={"X-User": long_b}).status_code == 200  # a count of its own


def test_store_key_hashes_only_what_is_too_long():
    from libratelimit._web import store_key
    assert store_key("r", "k") == b"r\0k"
    assert store_key("r", "x" * 510) == b"r\0" + b"x" * 510  # 512 bytes: as it is
    h = store_key("r", "x" * 511)
    assert len(h) == 40 and h.startswith(b"\xffsha256:")
    assert store_key("r", "x" * 511) == h and store_key("s", "x" * 511) != h


def test_address_key_masks_ipv6_to_56_and_folds_ipv4_mapped():
    from libratelimit._web import address_key, check_subnet
    assert address_key("192.0.2.7") == "addr:192.0.2.7"
    assert address_key("::ffff:192.0.2.7") == "addr:192.0.2.7"
    assert address_key("2001:db8:1:ff:1::9") == "addr:2001:db8:1::/56"
    assert address_key("2001:db8:1:100::1") == "addr:2001:db8:1:100::/56"
    assert address_key("2001:db8:1:ff::1", 64) == "addr:2001:db8:1:ff::/64"
    assert address_key("2001:db8::1", 128) == "addr:2001:db8::1/128"
    # The one rule of every part (rlt_addr_key): spellings of one network are one key,
    # IPv4-compatible folds too, and the prefix is 32..128.
    assert address_key("2001:0DB8:0001:00FF:0000::9") == "addr:2001:db8:1::/56"
    assert address_key("::192.0.2.7") == "addr:192.0.2.7"
    with pytest.raises(ValueError):
        check_subnet(31)
    assert address_key("fe80::1%eth0") == "addr:fe80::/56"
    assert address_key("testclient") == "addr:testclient" and address_key(None) == "addr:-"


def test_flask_ipv6_clients_of_one_56_share_a_count():
    c = flask_app().test_client()
    get = lambda ip: c.get("/", environ_base={"REMOTE_ADDR": ip}).status_code
    assert [get("2001:db8:0:%x::%d" % (i, i)) for i in range(6)] == [200] * 5 + [429]
    assert get("2001:db8:0:100::1") == 200  # the next /56
    c64 = flask_app(ipv6_subnet=64).test_client()
    get64 = lambda ip: c64.get("/", environ_base={"REMOTE_ADDR": ip}).status_code
    assert [get64("2001:db8:0:%x::1" % i) for i in range(6)] == [200] * 6
    assert [get("::ffff:192.0.2.9") for _ in range(3)] + [get("192.0.2.9") for _ in range(3)] \
        == [200] * 5 + [429]


def asgi_codes(app, client, n, headers=None):
    import asyncio
    import httpx

    async def run():
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return [(await c.get("/", headers=headers)).status_code for _ in range(n)]
    return asyncio.run(run())


def test_asgi_and_fastapi_default_key_is_the_address_masked():
    from fastapi import Depends, FastAPI
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from libratelimit.asgi import RateLimitMiddleware
    from libratelimit.fastapi import RateLimit

    star = RateLimitMiddleware(Starlette(routes=[Route("/", lambda r: PlainTextResponse("ok"))]),
                               default="5/minute")
    fast = FastAPI()
    fast.get("/", dependencies=[Depends(RateLimit("5/minute"))])(lambda: "ok")
    for app in (star, fast):
        assert asgi_codes(app, ("2001:db8::1", 1), 3, basic("a")) == [200] * 3
        assert asgi_codes(app, ("2001:db8:0:ff::2", 1), 3, basic("b")) == [200] * 2 + [429]
        assert asgi_codes(app, ("::ffff:192.0.2.1", 1), 3) == [200] * 3
        assert asgi_codes(app, ("192.0.2.1", 1), 3) == [200] * 2 + [429]


def test_wsgi_default_key_ignores_remote_user_unless_asked():
    from werkzeug.test import Client
    from libratelimit.wsgi import RateLimitMiddleware

    def hello(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    c = Client(RateLimitMiddleware(hello, default="5/minute"))
    codes = [c.get("/", environ_overrides={"REMOTE_USER": "u%d" % i}).status_code
             for i in range(6)]
    assert codes == [200] * 5 + [429]
    long_key = Client(RateLimitMiddleware(hello, default="5/minute", key=lambda e: "k" * 700))
    assert [long_key.get("/").status_code for _ in range(6)] == [200] * 5 + [429]


def test_flask_stacked_limits_are_all_or_nothing():
    import flask
    from libratelimit.flask import FlaskLimiter
    app = flask.Flask("t")
    limiter = FlaskLimiter(app)
    hourly = limiter.limit("5/hour")

    @app.route("/")
    @limiter.limit("3/minute")
    @hourly
    def index():
        return "ok"
    c = app.test_client()
    assert [c.get("/").status_code for _ in range(4)] == [200] * 3 + [429]
    lim = limiter._views[index][0][0]  # the 5/hour limiter: charged 3, not 4
    assert lim.peek(b"index\0addr:127.0.0.1").remaining == 2
