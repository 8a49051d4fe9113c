"""WSGI middleware: a limit per route (or a default) keyed by the authenticated user or the
client address; 429 with Retry-After and the IETF RateLimit headers when denied, the headers
added to allowed responses.

    from libratelimit.wsgi import RateLimitMiddleware
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, default="100/minute",
                                       routes={"/login": "5/minute", "/api/*": "gcra:50/1s"})
"""
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from ._web import BODY_429, KeyFunc, Routes, Spec, header_list
from .stores import Store

__all__ = ["RateLimitMiddleware", "default_key"]


def default_key(environ: Mapping[str, Any]) -> Optional[str]:
    """REMOTE_USER when the server or an auth layer set one ("user:NAME"), else the client
    address ("addr:IP")."""
    user = environ.get("REMOTE_USER")
    if user:
        return "user:%s" % user
    return "addr:%s" % environ.get("REMOTE_ADDR", "-")


class RateLimitMiddleware:
    """Wraps a WSGI app.  ``default``: the policy (or Limiter) of every route not in
    ``routes`` (None: not limited); ``routes``: {path or "prefix*": policy}; ``key``: a
    callable(environ) -> key, None to let the request through unlimited; ``store``: where the
    state lives (a Store or URL; default in-process); ``cost``: a callable(environ) -> int."""

    def __init__(self, app: Callable[..., Iterable[bytes]], default: Optional[Spec] = None,
                 routes: Optional[Mapping[str, Spec]] = None, key: KeyFunc = default_key,
                 store: Union[None, str, Store] = None,
                 cost: Optional[Callable[[Mapping[str, Any]], int]] = None,
                 strategy: Optional[str] = None) -> None:
        self.app = app
        self.routes = Routes(routes, default, store, strategy)
        self.key = key
        self.cost = cost

    def __call__(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        route, lim = self.routes.find(environ.get("PATH_INFO", "") or "/")
        k = self.key(environ) if lim is not None else None
        if lim is None or k is None:
            return self.app(environ, start_response)
        if isinstance(k, str):
            k = k.encode()
        d = lim.hit(route.encode() + b"\0" + k, self.cost(environ) if self.cost else 1)
        environ["libratelimit.decision"] = d
        headers = header_list(d)
        if not d.allowed:
            start_response("429 Too Many Requests",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(BODY_429)))] + headers)
            return [BODY_429]

        def start(status: str, response_headers: Any, exc_info: Any = None) -> Any:
            return start_response(status, list(response_headers) + headers, exc_info)

        return self.app(environ, start)
