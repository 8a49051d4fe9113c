"""libratelimit.slowapi: slowapi's API.  Its documented quick starts (Starlette and FastAPI),
changed only at the import lines, answer as slowapi's docs say; then the middleware's default
limits, exempt, stacked limits all-or-nothing and headers."""
import pytest


def starlette_quick_start():
    # ---- slowapi's Starlette quick start (slowapi.readthedocs.io), only the imports changed
    # (the docs' snippet uses Request and PlainTextResponse without importing them)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from libratelimit.slowapi import Limiter, _rate_limit_exceeded_handler
    from libratelimit.slowapi.util import get_remote_address
    from libratelimit.slowapi.errors import RateLimitExceeded

    limiter = Limiter(key_func=get_remote_address)
    app = Starlette()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    @limiter.limit("5/minute")
    async def homepage(request: Request):
        return PlainTextResponse("test")

    app.add_route("/home", homepage)
    # ---- end
    return app


def fastapi_quick_start():
    # ---- slowapi's FastAPI quick start, only the imports changed
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from libratelimit.slowapi import Limiter, _rate_limit_exceeded_handler
    from libratelimit.slowapi.util import get_remote_address
    from libratelimit.slowapi.errors import RateLimitExceeded

    limiter = Limiter(key_func=get_remote_address)
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    @app.get("/home")
    @limiter.limit("5/minute")
    async def homepage(request: Request):
        return PlainTextResponse("test")
    # ---- end
    return app


@pytest.mark.parametrize("make", [starlette_quick_start, fastapi_quick_start])
def test_quick_start_allows_5_a_minute_then_429(make):
    from starlette.testclient import TestClient
    c = TestClient(make())
    assert [c.get("/home").status_code for _ in range(5)] == [200] * 5
    r = c.get("/home")
    assert r.status_code == 429
    assert r.json() == {"error": "Rate limit exceeded: fixed_window:5/1m"}
    assert int(r.headers["retry-after"]) >= 1


def test_middleware_defaults_exempt_stacked_sync_and_headers():
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.testclient import TestClient
    from libratelimit.slowapi import Limiter, _rate_limit_exceeded_handler
    from libratelimit.slowapi.errors import RateLimitExceeded
    from libratelimit.slowapi.middleware import SlowAPIMiddleware
    from libratelimit.slowapi.util import get_remote_address

    limiter = Limiter(key_func=get_remote_address, default_limits=["2/minute"],
                      headers_enabled=True)
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)
    app.add_middleware(SlowAPIMiddleware)

    @app.get("/plain")
    def plain():
        return {"ok": 1}

    @app.get("/free")
    @limiter.exempt
    def free():
        return {"ok": 1}

    @app.get("/stacked")
    @limiter.limit("3/minute")
    @limiter.limit("5/hour")
    def stacked(request: Request):
        return {"ok": 1}

    c = TestClient(app)
    r = c.get("/plain")
    assert r.status_code == 200 and r.headers["x-ratelimit-limit"] == "2"
    assert [c.get("/plain").status_code for _ in range(2)] == [200, 429]
    assert [c.get("/free").status_code for _ in range(4)] == [200] * 4
    assert [c.get("/stacked").status_code for _ in range(4)] == [200] * 3 + [429]
    lim = limiter._limiter("fixed_window:5/1h")
    from libratelimit._web import store_key
    name = [n for n in limiter._routes if n.endswith("stacked")][0]
    # the refused request charged neither limit: 5/hour counted 3
    assert lim.peek(store_key("%s\0fixed_window:5/1h" % name, "testclient")).remaining == 2


def test_limit_without_request_argument_is_refused():
    from libratelimit.slowapi import Limiter
    from libratelimit.slowapi.util import get_remote_address
    limiter = Limiter(key_func=get_remote_address)
    with pytest.raises(TypeError):
        limiter.limit("1/minute")(lambda: None)
