"""slowapi's middleware: the default (and application) limits on routes without their own."""
from typing import Any

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from .errors import RateLimitExceeded

__all__ = ["SlowAPIMiddleware"]


class SlowAPIMiddleware(BaseHTTPMiddleware):
    """``app.add_middleware(SlowAPIMiddleware)``: ``app.state.limiter``'s default limits on every
    route that has no ``@limiter.limit`` and is not exempt; the app's exception handler for
    RateLimitExceeded answers a breach."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        limiter = request.app.state.limiter
        endpoint = None
        for route in request.app.routes:
            match, _ = route.matches(request.scope)
            if match == Match.FULL:
                endpoint = getattr(route, "endpoint", None)
                break
        if endpoint is not None and limiter.enabled and not limiter._decorated(endpoint):
            try:
                d = await limiter._acheck(request, endpoint, [])
            except RateLimitExceeded as e:
                handler = request.app.exception_handlers.get(RateLimitExceeded)
                if handler is None:
                    raise
                return await _call(handler, request, e)
            response = await call_next(request)
            limiter._inject(response, d)
            return response
        return await call_next(request)


async def _call(handler: Any, request: Request, exc: Exception) -> Response:
    r = handler(request, exc)
    if hasattr(r, "__await__"):
        r = await r
    return r
