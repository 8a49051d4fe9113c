"""An ASGI middleware for an LLM proxy route (Starlette, FastAPI, any ASGI app): before the
request goes on, one reservation over every limit it counts against (a user's tokens, an
organisation's money budget, a model's output tokens: libratelimit.budget), all or nothing; a
429 with the refusing limit's headers when it does not fit; after the response, one settle from
the OpenAI ``usage`` the response carries (a JSON body, or the last server-sent event that has
one: libratelimit.llm).  A response without a usage is not guessed at: the reservation stays
charged as estimated and expires at its timeout (docs/llm.md).

    def limits(scope, request):           # request: the JSON body (a dict), or None
        user = scope["state"]["user"]
        return [(user_tokens, "user:" + user, "in+cached+out"),
                (org_usd, "org:acme", "in*3+out*15+cached*1"),
                (model_out, "model:" + request.get("model", "?"), "out")]

    app.add_middleware(LLMBudgetMiddleware, limits=limits)

The default estimate reserves the maximum: ``in`` the request body's length in bytes (no
tokenizer makes more tokens than a text has bytes) and ``out`` its ``max_completion_tokens`` or
``max_tokens`` (else ``max_out``); give ``estimate(scope, request, body)`` to reserve less.
"""
import json
from typing import Any, Awaitable, Callable, Dict, List, Mapping, MutableMapping, Optional
from typing import Sequence, Tuple

from ._web import header_list, refusal
from .budget import areserve_limits
from .llm import SSEUsage, usage_from_json

__all__ = ["LLMBudgetMiddleware", "max_estimate"]

Scope = MutableMapping[str, Any]
Limits = Callable[[Scope, Optional[dict]], Optional[Sequence[Tuple[Any, Any, str]]]]


def max_estimate(scope: Scope, request: Optional[dict], body: bytes,
                 max_out: int = 4096) -> Dict[str, int]:
    """Reserve the maximum: every byte of the body a prompt token, and the output's cap."""
    out = max_out
    if isinstance(request, dict):
        for name in ("max_completion_tokens", "max_tokens"):
            v = request.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                out = v
                break
    return {"in": len(body), "out": out}


class LLMBudgetMiddleware:
    """Wraps an ASGI app.  ``limits(scope, request)`` gives the (Limiter, key, weighting)
    limits of a request (None: not limited); ``paths`` the routes it watches (None: every
    POST); ``timeout_ns`` the reservation's life; ``max_body`` the most bytes read from a
    request or kept of a JSON response (413 past it for a request)."""

    def __init__(self, app: Callable[..., Awaitable[None]], limits: Limits,
                 paths: Optional[Sequence[str]] = ("/v1/chat/completions", "/v1/completions"),
                 estimate: Optional[Callable[[Scope, Optional[dict], bytes], Mapping[str, int]]]
                 = None, timeout_ns: Optional[int] = None, max_out: int = 4096,
                 max_body: int = 1 << 20) -> None:
        self.app = app
        self.limits = limits
        self.paths = None if paths is None else set(paths)
        self.estimate = estimate or (lambda s, r, b: max_estimate(s, r, b, max_out))
        self.timeout_ns = timeout_ns
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or scope.get("method") != "POST" or
                (self.paths is not None and scope.get("path") not in self.paths)):
            return await self.app(scope, receive, send)
        chunks: List[bytes] = []
        size, more = 0, True
        while more:
            m = await receive()
            if m["type"] != "http.request":
                return  # the client went away before its request was read
            chunks.append(m.get("body", b""))
            size += len(chunks[-1])
            more = m.get("more_body", False)
            if size > self.max_body:
                return await _answer(send, 413, b"request body too large", [])
        body = b"".join(chunks)
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        lims = self.limits(scope, request if isinstance(request, dict) else None)
        if not lims:
            return await self.app(scope, _replay(body, receive), send)
        est = dict(self.estimate(scope, request if isinstance(request, dict) else None, body))
        r = await areserve_limits(lims, est, self.timeout_ns)
        scope.setdefault("state", {})["libratelimit.reservation"] = r
        headers = [(n.lower().encode("latin-1"), v.encode("latin-1"))
                   for n, v in header_list(r.decision)]
        if not r.allowed:
            status, text = refusal(r.decision)
            return await _answer(send, status, text, headers)
        sse = SSEUsage()
        state = {"stream": False, "kept": [], "size": 0, "settled": None}

        async def watch(message: Mapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                ctype = dict(message.get("headers", [])).get(b"content-type", b"")
                state["stream"] = ctype.startswith(b"text/event-stream")
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + headers
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if state["stream"]:
                    sse.feed(chunk)
                elif state["size"] + len(chunk) <= self.max_body:
                    state["kept"].append(chunk)
                    state["size"] += len(chunk)
                else:
                    state["size"] = self.max_body + 1  # too long to read: not guessed at
                if not message.get("more_body", False):
                    await settle()
            await send(message)

        async def settle() -> None:
            if state["settled"] is not None:
                return
            if state["stream"]:
                usage = sse.close()
            else:
                usage = (usage_from_json(b"".join(state["kept"]))
                         if state["size"] <= self.max_body else None)
            if usage is None:
                state["settled"] = False  # charged as estimated when it expires
                return
            usage = {k: v for k, v in usage.items() if v}  # names at 0 charge nothing
            state["settled"] = await r.asettle(usage)
            scope["state"]["libratelimit.settled"] = state["settled"]

        await self.app(scope, _replay(body, receive), watch)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[Mapping[str, Any]]]:
    """A receive that gives the request body read already, then the client's own messages."""
    sent = False

    async def again() -> Mapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _answer(send: Any, status: int, text: bytes, headers: List[Tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(text)).encode())] + headers})
    await send({"type": "http.response.body", "body": text})
