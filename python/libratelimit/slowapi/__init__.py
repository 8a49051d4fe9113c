"""slowapi's API over libratelimit: a Starlette or FastAPI app written for slowapi runs with
only its import lines changed (``from libratelimit.slowapi import Limiter,
_rate_limit_exceeded_handler``; ``libratelimit.slowapi.util``, ``.errors``, ``.middleware``).
``Limiter(key_func, default_limits=, application_limits=, headers_enabled=, strategy=,
storage_uri=, swallow_errors=, in_memory_fallback=, in_memory_fallback_enabled=, key_prefix=,
enabled=)``, ``@limiter.limit(...)`` and ``@limiter.shared_limit(...)`` on endpoints that take
a ``request`` argument, ``@limiter.exempt``, SlowAPIMiddleware for the default limits.  A
request's limits are decided in one all-or-nothing call."""
import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._native import HDR_RETRY_AFTER, HDR_X
from .._web import store_key
from ..limiter import Limiter as _Limiter
from ..policy import parse_policy
from ..stores import Store, store_from_url
from .errors import RateLimitExceeded

__all__ = ["Limiter", "_rate_limit_exceeded_handler"]

LimitValue = Union[str, Callable[..., str]]


def _rate_limit_exceeded_handler(request: Request, exc: RateLimitExceeded) -> Response:
    """slowapi's handler: 429, ``{"error": "Rate limit exceeded: <limit>"}``, Retry-After."""
    response = JSONResponse({"error": "Rate limit exceeded: %s" % exc.detail}, status_code=429)
    for name, value in exc.decision.headers(HDR_RETRY_AFTER).items():
        response.headers[name] = value
    return response


class _Group:
    def __init__(self, limits: LimitValue, key_func: Optional[Callable[[Request], str]],
                 scope: Optional[str], per_method: bool, methods: Optional[Sequence[str]],
                 error_message: Optional[str], exempt_when: Optional[Callable[..., bool]],
                 cost: Union[int, Callable[[Request], int]]) -> None:
        self.limits, self.key_func, self.scope, self.per_method = limits, key_func, scope, per_method
        self.methods = [m.upper() for m in methods] if methods else None
        self.error_message, self.exempt_when, self.cost = error_message, exempt_when, cost


class Limiter:
    """slowapi's ``Limiter``; see the module's docstring and docs/python.md."""

    def __init__(self, key_func: Callable[[Request], str],
                 default_limits: Optional[List[LimitValue]] = None,
                 application_limits: Optional[List[LimitValue]] = None,
                 headers_enabled: bool = False, strategy: Optional[str] = None,
                 storage_uri: Optional[Union[str, Store]] = None,
                 storage_options: Optional[Dict[str, Any]] = None, auto_check: bool = True,
                 swallow_errors: bool = False,
                 in_memory_fallback: Optional[List[str]] = None,
                 in_memory_fallback_enabled: bool = False, retry_after: Optional[str] = None,
                 key_prefix: str = "", enabled: bool = True,
                 config_filename: Optional[str] = None) -> None:
        if storage_options or config_filename or retry_after:
            raise TypeError("storage_options, config_filename and retry_after are not "
                            "supported by libratelimit.slowapi")
        self.key_func, self.enabled, self._headers = key_func, enabled, headers_enabled
        self._strategy, self._prefix = strategy or "fixed-window", key_prefix
        uri = storage_uri or "memory://"
        self.store = uri if isinstance(uri, Store) else store_from_url(uri)
        self._on_error: Dict[str, Any] = {"fail_open": swallow_errors}
        if self.store.kind != "memory" and (in_memory_fallback or in_memory_fallback_enabled):
            self._on_error["fallback"] = ";".join(in_memory_fallback) if in_memory_fallback \
                else True
        join = lambda v: ";".join(v) if isinstance(v, (list, tuple)) else v  # noqa: E731
        self._defaults = [_Group(join(default_limits), None, None, False, None, None, None, 1)] \
            if default_limits else []
        self._application = [_Group(join(application_limits), None, "global", False, None,
                                    None, None, 1)] if application_limits else []
        self._routes: Dict[str, List[_Group]] = {}
        self._exempt: set = set()
        self._limiters: Dict[str, _Limiter] = {}

    def _name(self, fn: Any) -> str:
        fn = inspect.unwrap(fn)
        return "%s.%s" % (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", ""))

    def _decorated(self, endpoint: Any) -> bool:
        name = self._name(endpoint)
        return name in self._routes or name in self._exempt

    def _limiter(self, text: str) -> _Limiter:
        lim = self._limiters.get(text)
        if lim is None:
            lim = self._limiters[text] = _Limiter(text, self.store, **self._on_error)
        return lim

    def _items(self, request: Request, name: str, groups: List[_Group]) -> List[Any]:
        out = []
        for g in groups:
            if g.methods is not None and request.method.upper() not in g.methods:
                continue
            if g.exempt_when is not None and g.exempt_when():
                continue
            texts = g.limits(request) if callable(g.limits) and \
                len(inspect.signature(g.limits).parameters) else \
                (g.limits() if callable(g.limits) else g.limits)
            key = (g.key_func or self.key_func)(request)
            scope = g.scope or name
            if g.per_method:
                scope += ":" + request.method
            cost = g.cost(request) if callable(g.cost) else g.cost
            for text in parse_policy(texts, self._strategy):
                out.append((text, g, self._limiter(text),
                            store_key("%s%s\0%s" % (self._prefix, scope, text), key), cost))
        return out

    def _checks(self, request: Request, endpoint: Any, groups: List[_Group]) -> List[Any]:
        name = self._name(endpoint)
        return self._items(request, name, (groups or self._defaults) + self._application)

    @staticmethod
    def _raise(items: List[Any], d: Any) -> None:
        text, g = items[d.refused or 0][:2] if len(items) > 1 else items[0][:2]
        if d.error:  # failing closed: the store could not answer, nobody is over a limit
            raise HTTPException(503, "the rate limiter's store cannot answer",
                                headers=d.headers(HDR_RETRY_AFTER))
        raise RateLimitExceeded(g.error_message or text, d)

    async def _acheck(self, request: Request, endpoint: Any, groups: List[_Group]) -> Any:
        items = self._checks(request, endpoint, groups)
        if not items:
            return None
        if len(items) == 1:
            d = await items[0][2].ahit(items[0][3], items[0][4])
        else:
            d = await items[0][2].amulti([(lim, k, c) for _, _, lim, k, c in items])
        if not d.allowed:
            self._raise(items, d)
        request.state.view_rate_limit = d
        return d

    def _check(self, request: Request, endpoint: Any, groups: List[_Group]) -> Any:
        items = self._checks(request, endpoint, groups)
        if not items:
            return None
        if len(items) == 1:
            d = items[0][2].hit(items[0][3], items[0][4])
        else:
            d = items[0][2].multi([(lim, k, c) for _, _, lim, k, c in items])
        if not d.allowed:
            self._raise(items, d)
        request.state.view_rate_limit = d
        return d

    def _inject(self, response: Any, d: Any) -> None:
        if self._headers and d is not None and isinstance(response, Response):
            for name, value in d.headers(HDR_X).items():
                response.headers.setdefault(name, value)

    def limit(self, limit_value: LimitValue, key_func: Optional[Callable[[Request], str]] = None,
              per_method: bool = False, methods: Optional[List[str]] = None,
              error_message: Optional[str] = None,
              exempt_when: Optional[Callable[..., bool]] = None,
              cost: Union[int, Callable[[Request], int]] = 1,
              override_defaults: bool = True, scope: Optional[str] = None) -> Callable[[Any], Any]:
        """The endpoint's own limits (it must take ``request: Request``); stack several."""
        return self._decorator(_Group(limit_value, key_func, None, per_method, methods,
                                      error_message, exempt_when, cost), override_defaults)

    def shared_limit(self, limit_value: LimitValue, scope: str,
                     key_func: Optional[Callable[[Request], str]] = None,
                     error_message: Optional[str] = None,
                     exempt_when: Optional[Callable[..., bool]] = None,
                     cost: Union[int, Callable[[Request], int]] = 1,
                     override_defaults: bool = True) -> Callable[[Any], Any]:
        """Limits shared by every endpoint decorated with the same ``scope``."""
        return self._decorator(_Group(limit_value, key_func, scope, False, None, error_message,
                                      exempt_when, cost), override_defaults)

    def _decorator(self, group: _Group, override_defaults: bool) -> Callable[[Any], Any]:
        def wrap(fn: Any) -> Any:
            name = self._name(fn)
            groups = self._routes.setdefault(name, [])
            groups.append(group)
            if not override_defaults:
                groups.extend(g for g in self._defaults if g not in groups)
            if getattr(fn, "_libratelimit_wrapped", None) is self:
                return fn  # stacked: the outer wrapper already checks every group
            params = inspect.signature(fn).parameters
            if "request" not in params and "websocket" not in params:
                raise TypeError('no "request" or "websocket" argument on function "%s"' % name)

            def request_of(args: Any, kwargs: Any) -> Request:
                r = kwargs.get("request") or kwargs.get("websocket")
                if r is None:
                    r = next(a for a in args if isinstance(a, Request))
                return r

            if inspect.iscoroutinefunction(fn):
                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    request = request_of(args, kwargs)
                    d = await self._acheck(request, fn, groups) if self.enabled else None
                    response = await fn(*args, **kwargs)
                    self._inject(response if isinstance(response, Response)
                                 else kwargs.get("response"), d)
                    return response
                wrapper: Any = async_wrapper
            else:
                @functools.wraps(fn)
                def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                    request = request_of(args, kwargs)
                    d = self._check(request, fn, groups) if self.enabled else None
                    response = fn(*args, **kwargs)
                    self._inject(response if isinstance(response, Response)
                                 else kwargs.get("response"), d)
                    return response
                wrapper = sync_wrapper
            wrapper._libratelimit_wrapped = self
            return wrapper
        return wrap

    def exempt(self, fn: Any) -> Any:
        """No limits on this endpoint, not even the defaults."""
        self._exempt.add(self._name(fn))
        return fn
