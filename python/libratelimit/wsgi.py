"""WSGI middleware: a limit per route (or a default) keyed by the client address (IPv6 per /56),
or by what ``key=`` gives (remote_user_or_address: REMOTE_USER); 429 with Retry-After and the
IETF RateLimit headers when denied (503 when the store cannot answer and the limiter fails
closed), the headers added to allowed responses.

    from libratelimit.wsgi import RateLimitMiddleware
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, default="100/minute",
                                       routes={"/login": "5/minute", "/api/*": "gcra:50/1s"})
"""
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from ._web import (IPV6_SUBNET, KeyFunc, Routes, Spec, address_key, check_subnet,
                   failure_mode, header_list, refusal, store_key)
from .stores import Store

__all__ = ["RateLimitMiddleware", "default_key", "remote_user_or_address"]


def default_key(environ: Mapping[str, Any]) -> Optional[str]:
    """The client address ("addr:IP", REMOTE_ADDR as the server or a trusted proxy fixer set
    it), IPv6 as its /56.  Never a header the client chose."""
    return address_key(environ.get("REMOTE_ADDR"))


def remote_user_or_address(environ: Mapping[str, Any]) -> Optional[str]:
    """A key function for apps behind a server or auth layer that sets REMOTE_USER after
    checking the credentials: "user:NAME", else the client address."""
    user = environ.get("REMOTE_USER")
    if user:
        return "user:%s" % user
    return default_key(environ)


class RateLimitMiddleware:
    """Wraps a WSGI app.  ``default``: the policy (or Limiter) of every route not in
    ``routes`` (None: not limited); ``routes``: {path or "prefix*": policy}; ``key``: a
    callable(environ) -> key, None to let the request through unlimited; ``store``: where the
    state lives (a Store or URL; default in-process); ``cost``: a callable(environ) -> int.  ``fail_open``, ``fallback``, ``fallback_probe``: what a request
    gets when the store cannot answer (Limiter; failing closed answers 503, not 429)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], default: Optional[Spec] = None,
                 routes: Optional[Mapping[str, Spec]] = None, key: Optional[KeyFunc] = None,
                 store: Union[None, str, Store] = None,
                 cost: Optional[Callable[[Mapping[str, Any]], int]] = None,
                 strategy: Optional[str] = None, ipv6_subnet: int = IPV6_SUBNET,
                 fail_open: bool = False, fallback: Any = None,
                 fallback_probe: float = 1.0) -> None:
        self.app = app
        self.routes = Routes(routes, default, store, strategy,
                             failure_mode(fail_open, fallback, fallback_probe))
        subnet = check_subnet(ipv6_subnet)
        self.key = key or (lambda environ: address_key(environ.get("REMOTE_ADDR"), subnet))
        self.cost = cost

    def __call__(self, environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        route, lim = self.routes.find(environ.get("PATH_INFO", "") or "/")
        k = self.key(environ) if lim is not None else None
        if lim is None or k is None:
            return self.app(environ, start_response)
        d = lim.hit(store_key(route, k), self.cost(environ) if self.cost else 1)
        environ["libratelimit.decision"] = d
        headers = header_list(d)
        if not d.allowed:
            status, body = refusal(d)
            start_response("429 Too Many Requests" if status == 429 else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body)))] + headers)
            return [body]

        def start(status: str, response_headers: Any, exc_info: Any = None) -> Any:
            return start_response(status, list(response_headers) + headers, exc_info)

        return self.app(environ, start)
