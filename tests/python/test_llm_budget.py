"""Reservations over several limits from Python (libratelimit.budget) on the memory, Redis and
ratelimitd stores alike (a real redis-server, a real ratelimitd), and the ASGI middleware for
an LLM proxy route (libratelimit.llm_asgi) in front of a real Starlette app and a FastAPI app
that answer like an OpenAI-compatible API, in JSON and streamed: reserved before, 429 when a
limit cannot take it, settled from the response's usage exactly once."""
import json

import pytest

from libratelimit import DaemonStore, Limiter, MemoryStore, RedisStore, _native
from libratelimit.budget import reserve_limits
from libratelimit.llm_asgi import LLMBudgetMiddleware

USAGE = {"prompt_tokens": 1200, "completion_tokens": 350, "total_tokens": 1550,
         "prompt_tokens_details": {"cached_tokens": 200}}


@pytest.fixture(params=["memory", "redis", "daemon"])
def store(request):
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "redis":
        r = request.getfixturevalue("redis_server")
        yield RedisStore("127.0.0.1:%d" % r.port, timeout=5)
    else:
        port = request.getfixturevalue("ratelimitd")
        yield DaemonStore("127.0.0.1", port, timeout=5)


def three(store):
    return (Limiter("fixed_window:10000/1000d", store), Limiter("fixed_window:3000/1000d", store),
            Limiter("fixed_window:100000/1000d", store))


def test_one_reservation_over_three_limits_charges_each_by_its_weights_once(store):
    tok, out, usd = three(store)
    lims = [(tok, "user:1", "in+out"), (out, "model:m", "out"),
            (usd, "org:a", "in*3+out*15+cached*1")]
    r = reserve_limits(lims, {"in": 1000, "out": 2000})
    assert r.allowed and r.id and r.refused == -1, r
    assert [d.remaining for d in r.limits] == [7000, 1000, 67000]
    r2 = reserve_limits(lims, "in=1000,out=2000")  # the model's 1000 left cannot take it
    assert not r2.allowed and r2.id == 0 and r2.refused == 1, r2
    assert r2.decision.remaining == 1000
    s = r.settle({"in": 800, "out": 100}, partial=True)
    assert s.charged == [0, 0, 0], s
    s = r.settle({"out": 250, "cached": 200})
    assert [d.remaining for d in s.limits] == [10000 - 1150, 3000 - 350, 100000 - 2400 - 5250 - 200]
    with pytest.raises(KeyError, match="unknown reservation"):
        r.settle({"out": 1})  # exactly once
    assert tok.peek("user:1").remaining == 8850  # nothing charged twice


def test_bad_input_is_a_clear_error_and_charges_nothing(store):
    tok, out, usd = three(store)
    lims = [(tok, "k", "in+out"), (out, "k2", "out")]
    with pytest.raises(ValueError, match="weighting"):
        reserve_limits([(tok, "k", "in*")], "in=1")
    with pytest.raises(ValueError, match="named counts"):
        reserve_limits(lims, "in=-1")
    with pytest.raises(ValueError, match="no limit weighs"):
        reserve_limits(lims, {"in": 1, "tools": 2})
    with pytest.raises(ValueError, match="1 to 16 limits"):
        reserve_limits([(tok, "k%d" % i, "in") for i in range(17)], "in=1")
    with pytest.raises(ValueError, match="one policy that can settle"):
        reserve_limits([(Limiter("leaky_bucket:5/1s", store), "k", "in")], "in=1")
    assert tok.peek("k").remaining == 10000
    r = reserve_limits(lims, "in=10,out=20")
    with pytest.raises(ValueError, match="no limit weighs"):
        r.settle("in=1,tools=1")
    with pytest.raises(KeyError):  # another key set (the same limits in another order)
        _native.settle_limits(r.id, [(out, "k2"), (tok, "k")], "out=1", True, None)
    assert r.settle("in=10,out=5").limits[0].remaining == 10000 - 15


def upstream():
    """A Starlette app answering like an OpenAI-compatible API: JSON, or SSE with the usage in
    the last event when the request asks to stream; "nousage" leaves the usage out."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def chat(request):
        req = await request.json()
        usage = None if req.get("model") == "nousage" else USAGE
        if not req.get("stream"):
            return JSONResponse({"id": "c1", "choices": [{"message": {"content": "hi"}}],
                                 "usage": usage})

        async def events():
            for part in ("h", "i"):
                yield "data: %s\n\n" % json.dumps({"choices": [{"delta": {"content": part}}]})
            yield "data: %s\n\n" % json.dumps({"choices": [], "usage": usage})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def gateway(store, app=None, **kw):
    tok, out, usd = three(store)

    def limits(scope, request):
        return [(tok, "user:bob", "in+cached+out"),
                (out, "model:" + str((request or {}).get("model")), "out"),
                (usd, "org:acme", "in*3+out*15+cached*1")]

    app = app or upstream()
    app.add_middleware(LLMBudgetMiddleware, limits=limits, **kw)
    return app, (tok, out, usd), None


@pytest.mark.parametrize("stream", [False, True])
def test_the_middleware_reserves_then_settles_from_the_usage_of_json_and_sse(store, stream):
    from starlette.testclient import TestClient
    app, (tok, out, usd), _ = gateway(store)
    c = TestClient(app)
    r = c.post("/v1/chat/completions", json={"model": "m", "max_tokens": 500, "stream": stream,
                                             "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    assert "ratelimit" in {k.lower() for k in r.headers}, r.headers
    assert tok.peek("user:bob").remaining == 10000 - 1550  # 1000 in + 200 cached + 350 out
    assert out.peek("model:m").remaining == 3000 - 350
    assert usd.peek("org:acme").remaining == 100000 - (3000 + 5250 + 200)


def test_the_middleware_refuses_with_429_when_a_limit_cannot_take_the_maximum(store):
    from starlette.testclient import TestClient
    app, (tok, out, usd), _ = gateway(store)
    c = TestClient(app)
    r = c.post("/v1/chat/completions", json={"model": "m", "max_tokens": 3001})
    assert r.status_code == 429 and r.headers["ratelimit"].endswith("r=3000;t=0"), r.headers
    r = c.post("/v1/chat/completions", json={"model": "m", "max_tokens": 2000})
    assert r.status_code == 200  # settled: 350 out
    user, org = tok.peek("user:bob").remaining, usd.peek("org:acme").remaining
    r = c.post("/v1/chat/completions", json={"model": "m", "max_tokens": 2900})
    assert r.status_code == 429 and "retry-after" in {k.lower() for k in r.headers}, r.headers
    assert tok.peek("user:bob").remaining == user  # all or nothing: none charged
    assert usd.peek("org:acme").remaining == org


def test_a_response_without_usage_stays_charged_as_estimated(store):
    from starlette.testclient import TestClient
    app, (tok, out, usd), _ = gateway(store)
    c = TestClient(app)
    r = c.post("/v1/chat/completions", json={"model": "nousage", "max_tokens": 700})
    assert r.status_code == 200
    assert out.peek("model:nousage").remaining == 3000 - 700  # never guessed at


def test_fastapi_route_behind_the_middleware(store):
    from fastapi import FastAPI
    from starlette.testclient import TestClient
    api = FastAPI()

    @api.post("/v1/chat/completions")
    async def chat(body: dict):
        return {"id": "c1", "choices": [], "usage": USAGE}

    app, (tok, out, usd), _ = gateway(store, app=api)
    c = TestClient(app)
    assert c.post("/v1/chat/completions", json={"model": "f", "max_tokens": 400}).status_code == 200
    assert out.peek("model:f").remaining == 3000 - 350
    assert c.get("/v1/chat/completions").status_code == 405  # not a POST: passed through
