"""A FastAPI / Starlette dependency: ``Depends(RateLimit("10/minute"))`` on a route or a router
limits it per client address (IPv6 per /56; ``key=user_or_address`` for the authenticated
user), raising 429 with Retry-After and the IETF headers (503 when the store cannot answer and
the limiter fails closed) and adding the headers to allowed responses.

    from libratelimit.fastapi import RateLimit
    @app.get("/search", dependencies=[Depends(RateLimit("10/minute"))])
    async def search(): ...
"""
from typing import Callable, Optional, Union

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ._web import (IPV6_SUBNET, Spec, address_key, as_limiter, check_subnet, failure_mode,
                   store_key, user_key)
from .stores import Store

__all__ = ["RateLimit", "default_key", "user_or_address"]


def default_key(request: Request) -> Optional[str]:
    """The client address (request.client, as the server or a trusted proxy middleware set
    it), IPv6 as its /56.  Never a header the client chose."""
    return address_key(request.client.host if request.client else None)


def user_or_address(request: Request) -> Optional[str]:
    """A key function for apps with an AuthenticationMiddleware: the authenticated user,
    else the client address."""
    return user_key(request.scope.get("user")) or default_key(request)


class RateLimit:
    """A dependency: ``RateLimit(policy, key=None, store=None, strategy=None, name=None,
    scope=None, ipv6_subnet=56)``; ``key`` takes the Request (its None: not limited; default
    the client address, IPv6 as its /``ipv6_subnet``; a key too long is hashed).  Each RateLimit counts its
    own routes apart unless ``scope`` names a shared one."""

    def __init__(self, policy: Spec, key: Optional[Callable[[Request], Optional[str]]] = None,
                 store: Union[None, str, Store] = None, strategy: Optional[str] = None,
                 name: Optional[str] = None, scope: Optional[str] = None,
                 ipv6_subnet: int = IPV6_SUBNET, fail_open: bool = False,
                 fallback: object = None, fallback_probe: float = 1.0) -> None:
        self.limiter = as_limiter(policy, store, name=name, strategy=strategy,
                                  on_error=failure_mode(fail_open, fallback, fallback_probe))
        subnet = check_subnet(ipv6_subnet)
        self.key = key or (lambda request: address_key(
            request.client.host if request.client else None, subnet))
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
        d = await self.limiter.ahit(store_key(route, k))
        request.state.libratelimit_decision = d
        if not d.allowed:
            if d.error:  # failing closed: the store could not answer, nobody is over a limit
                raise HTTPException(503, "rate limiter unavailable", headers=d.headers())
            raise HTTPException(429, "rate limit exceeded", headers=d.headers())
        for name, value in d.headers().items():
            response.headers[name] = value
