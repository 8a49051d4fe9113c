"""A FastAPI / Starlette dependency: ``Depends(RateLimit("10/minute"))`` on a route or a router
limits it per user (or client address), raising 429 with Retry-After and the IETF headers and
adding the headers to allowed responses.

    from libratelimit.fastapi import RateLimit
    @app.get("/search", dependencies=[Depends(RateLimit("10/minute"))])
    async def search(): ...
"""
from typing import Callable, Optional, Union

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ._web import Spec, as_limiter, user_key
from .stores import Store

__all__ = ["RateLimit", "default_key"]


def default_key(request: Request) -> Optional[str]:
    """request.user where an AuthenticationMiddleware authenticated one, else the client."""
    user = user_key(request.scope.get("user"))
    if user:
        return user
    return "addr:%s" % (request.client.host if request.client else "-")


class RateLimit:
    """A dependency: ``RateLimit(policy, key=default_key, store=None, strategy=None,
    name=None)``; ``key`` takes the Request (None: not limited).  Each RateLimit counts its
    own routes apart unless ``scope`` names a shared one."""

    def __init__(self, policy: Spec, key: Callable[[Request], Optional[str]] = default_key,
                 store: Union[None, str, Store] = None, strategy: Optional[str] = None,
                 name: Optional[str] = None, scope: Optional[str] = None) -> None:
        self.limiter = as_limiter(policy, store, name=name, strategy=strategy)
        self.key = key
        self.scope = scope

    async def __call__(self, request: Request, response: Response) -> None:
        k = self.key(request)
        if k is None:
            return
        route = self.scope
        if route is None:  # the route's endpoint, not its path: /items/1 and /items/2 share
            ep = request.scope.get("endpoint")
            route = ("%s.%s" % (ep.__module__, ep.__qualname__) if ep is not None
                     else request.scope.get("path", ""))
        d = await self.limiter.ahit("%s\0%s" % (route, k))
        request.state.libratelimit_decision = d
        if not d.allowed:
            raise HTTPException(429, "rate limit exceeded", headers=d.headers())
        for name, value in d.headers().items():
            response.headers[name] = value
