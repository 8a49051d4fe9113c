"""ASGI middleware (Starlette, FastAPI, any ASGI app): a limit per route (or a default) keyed by
the client address (IPv6 per /56), or by what ``key=`` gives (user_or_address: the user that
Starlette's AuthenticationMiddleware authenticated); 429 with Retry-After and the IETF headers
(503 when the store cannot answer and the limiter fails closed), the headers on allowed
responses.

    app.add_middleware(RateLimitMiddleware, default="100/minute", routes={"/login": "5/minute"})
"""
from typing import Any, Awaitable, Callable, Mapping, MutableMapping, Optional, Union

from ._web import (IPV6_SUBNET, KeyFunc, Routes, Spec, address_key, check_subnet,
                   failure_mode, header_list, refusal, store_key, user_key)
from .stores import Store

__all__ = ["RateLimitMiddleware", "default_key", "user_or_address"]

Scope = MutableMapping[str, Any]


def default_key(scope: Scope) -> Optional[str]:
    """The client address ("addr:IP": scope["client"], as the server or a trusted proxy
    middleware set it), IPv6 as its /56.  Never a header the client chose."""
    client = scope.get("client")
    return address_key(client[0] if client else None)


def user_or_address(scope: Scope) -> Optional[str]:
    """A key function for apps with an authentication middleware (Starlette's
    AuthenticationMiddleware sets scope["user"]): "user:NAME" for an authenticated user
    (identity, else display_name), else the client address."""
    return user_key(scope.get("user")) or default_key(scope)


class RateLimitMiddleware:
    """Wraps an ASGI app; the arguments are the WSGI middleware's, ``key`` and ``cost`` taking
    the ASGI scope.  Non-HTTP scopes (lifespan, websocket) pass through."""

    def __init__(self, app: Callable[..., Awaitable[None]], default: Optional[Spec] = None,
                 routes: Optional[Mapping[str, Spec]] = None, key: Optional[KeyFunc] = None,
                 store: Union[None, str, Store] = None,
                 cost: Optional[Callable[[Scope], int]] = None,
                 strategy: Optional[str] = None, ipv6_subnet: int = IPV6_SUBNET,
                 fail_open: bool = False, fallback: Any = None,
                 fallback_probe: float = 1.0) -> None:
        self.app = app
        self.routes = Routes(routes, default, store, strategy,
                             failure_mode(fail_open, fallback, fallback_probe))
        subnet = check_subnet(ipv6_subnet)
        self.key = key or (lambda scope: address_key(
            scope["client"][0] if scope.get("client") else None, subnet))
        self.cost = cost

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route, lim = self.routes.find(scope.get("path", "/"))
        k = self.key(scope) if lim is not None else None
        if lim is None or k is None:
            return await self.app(scope, receive, send)
        d = await lim.ahit(store_key(route, k), self.cost(scope) if self.cost else 1)
        scope.setdefault("state", {})["libratelimit.decision"] = d
        headers = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in header_list(d)]
        if not d.allowed:
            status, body = refusal(d)
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())] + headers})
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_headers(message: Mapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
