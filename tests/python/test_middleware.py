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
