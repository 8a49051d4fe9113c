"""Flask-Limiter's API (3.x names and meanings) over libratelimit: an app written for
Flask-Limiter runs with only its import lines changed,

    from libratelimit.flask_limiter import Limiter
    from libratelimit.flask_limiter.util import get_remote_address

and its limits are decided by libratelimit (exact, one all-or-nothing store call for every limit
of a request, Redis or in-process).  ``Limiter(key_func, app=, default_limits=,
application_limits=, storage_uri=, strategy=, headers_enabled=, swallow_errors=,
in_memory_fallback=, in_memory_fallback_enabled=, on_breach=, ...)``, ``limit``,
``shared_limit``, ``exempt`` (views and blueprints), ``request_filter``, the ``RATELIMIT_*``
config keys.  A breach raises RateLimitExceeded, a werkzeug TooManyRequests: the app's
``@app.errorhandler(429)`` renders it.  What differs is in docs/python.md."""
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import flask
from werkzeug.exceptions import TooManyRequests

from .._native import HDR_RETRY_AFTER, HDR_X
from .._web import store_key
from ..limiter import Limiter as _Limiter
from ..policy import parse_policy
from ..stores import Store, store_from_url
from .util import get_remote_address

__all__ = ["Limiter", "RateLimitExceeded", "RequestLimit", "ExemptionScope"]

LimitValue = Union[str, Callable[[], str]]


class ExemptionScope:
    """Flask-Limiter's exemption flags (``exempt(flags=...)``)."""
    NONE = 0
    APPLICATION = 1
    DEFAULT = 2
    DESCENDENTS = 4
    ANCESTORS = 8


class RequestLimit:
    """What ``on_breach`` callbacks receive: ``limit`` (the limit's text), ``key``,
    ``breached``, ``reset_at`` (Unix seconds), ``remaining`` and ``decision``."""

    def __init__(self, limit: str, key: str, decision: Any) -> None:
        import time
        self.limit, self.key, self.decision = limit, key, decision
        self.breached = not decision.allowed
        self.remaining = decision.remaining
        self.reset_at = int(time.time() + decision.reset_after)


class RateLimitExceeded(TooManyRequests):
    """Raised for a breached limit: a werkzeug 429, so ``@app.errorhandler(429)`` renders it.
    ``limit`` is the breached limit's RequestLimit; ``description`` its text (or the limit's
    error_message); Retry-After is in its headers."""

    def __init__(self, limit: RequestLimit, response: Optional[flask.Response] = None,
                 description: Optional[str] = None) -> None:
        self.limit = limit
        super().__init__(description=description or limit.limit, response=response)

    def get_headers(self, environ: Any = None, scope: Any = None) -> List[Any]:
        return super().get_headers(environ, scope) + \
            list(self.limit.decision.headers(HDR_RETRY_AFTER).items())


class _Group:
    """One decorator's (or the defaults', or the application's) limits and their options."""

    def __init__(self, limits: LimitValue, key_func: Optional[Callable[[], str]],
                 scope: Optional[Union[str, Callable[[str], str]]], shared: bool, *,
                 per_method: bool = False, methods: Optional[Sequence[str]] = None,
                 error_message: Optional[str] = None,
                 exempt_when: Optional[Callable[[], bool]] = None,
                 override_defaults: bool = True,
                 deduct_when: Optional[Callable[[flask.Response], bool]] = None,
                 on_breach: Optional[Callable[[RequestLimit], Any]] = None,
                 cost: Union[int, Callable[[], int]] = 1) -> None:
        self.limits, self.key_func, self.scope, self.shared = limits, key_func, scope, shared
        self.per_method = per_method
        self.methods = [m.lower() for m in methods] if methods else None
        self.error_message, self.exempt_when = error_message, exempt_when
        self.override_defaults, self.deduct_when = override_defaults, deduct_when
        self.on_breach, self.cost = on_breach, cost


class _Check:
    __slots__ = ("group", "text", "limiter", "key", "store_key", "cost")


class LimitDecorator:
    """What ``limit`` and ``shared_limit`` return: a decorator for a view or a blueprint, or a
    context manager limiting a block inside a view (``with limiter.limit("10/second"):``,
    RateLimitExceeded on a breach)."""

    def __init__(self, ext: "Limiter", group: _Group) -> None:
        self.ext, self.group = ext, group

    def __enter__(self) -> None:
        if self.ext.enabled:
            self.ext._decide(self.ext._checks(self.group, flask.request.endpoint or ""))

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, flask.Blueprint):
            self.ext._blueprints.setdefault(obj.name, []).append(self.group)
            return obj
        self.ext._routes.setdefault(obj, []).append(self.group)
        return obj


class Limiter:
    """Flask-Limiter's ``Limiter``; see the module's docstring and docs/python.md."""

    def __init__(self, key_func: Callable[[], str] = get_remote_address, *,
                 app: Optional[flask.Flask] = None,
                 default_limits: Optional[List[LimitValue]] = None,
                 default_limits_per_method: Optional[bool] = None,
                 default_limits_exempt_when: Optional[Callable[[], bool]] = None,
                 default_limits_deduct_when: Optional[Callable[[flask.Response], bool]] = None,
                 default_limits_cost: Optional[Union[int, Callable[[], int]]] = None,
                 application_limits: Optional[List[LimitValue]] = None,
                 application_limits_cost: Optional[Union[int, Callable[[], int]]] = None,
                 headers_enabled: Optional[bool] = None, strategy: Optional[str] = None,
                 storage_uri: Optional[Union[str, Store]] = None,
                 storage_options: Optional[Dict[str, Any]] = None, auto_check: bool = True,
                 swallow_errors: Optional[bool] = None,
                 on_breach: Optional[Callable[[RequestLimit], Any]] = None,
                 in_memory_fallback: Optional[List[str]] = None,
                 in_memory_fallback_enabled: Optional[bool] = None, key_prefix: str = "",
                 enabled: bool = True, **unsupported: Any) -> None:
        self._key_func = key_func
        self._args = dict(default_limits=default_limits,
                          default_limits_per_method=default_limits_per_method,
                          default_limits_exempt_when=default_limits_exempt_when,
                          default_limits_deduct_when=default_limits_deduct_when,
                          default_limits_cost=default_limits_cost,
                          application_limits=application_limits,
                          application_limits_cost=application_limits_cost,
                          headers_enabled=headers_enabled, strategy=strategy,
                          storage_uri=storage_uri, swallow_errors=swallow_errors,
                          in_memory_fallback=in_memory_fallback,
                          in_memory_fallback_enabled=in_memory_fallback_enabled,
                          key_prefix=key_prefix)
        if storage_options:
            raise TypeError("storage_options: use the store URL's query (prefix, timeout)")
        if unsupported:
            raise TypeError("not supported by libratelimit.flask_limiter: %s"
                            % ", ".join(sorted(unsupported)))
        self._auto_check, self._on_breach, self.enabled = auto_check, on_breach, enabled
        self._routes: Dict[Any, List[_Group]] = {}  # by view function (Flask's view_functions)
        self._blueprints: Dict[str, List[_Group]] = {}
        self._exempt: Dict[Any, int] = {}
        self._exempt_bp: Dict[str, int] = {}
        self._filters: List[Callable[[], bool]] = []
        self._limiters: Dict[str, _Limiter] = {}
        self.store: Optional[Store] = None
        if app is not None:
            self.init_app(app)

    # ---- configuration

    def init_app(self, app: flask.Flask) -> None:
        """Reads the RATELIMIT_* config (the constructor's arguments win) and hooks the app."""
        cfg, a = app.config, self._args
        self.enabled = cfg.setdefault("RATELIMIT_ENABLED", self.enabled)
        if not self.enabled:
            return

        def pick(name: str, key: str, default: Any) -> Any:
            return a[name] if a[name] is not None else cfg.get(key, default)

        self._strategy = pick("strategy", "RATELIMIT_STRATEGY", "fixed-window")
        self._headers = bool(pick("headers_enabled", "RATELIMIT_HEADERS_ENABLED", False))
        swallow = bool(pick("swallow_errors", "RATELIMIT_SWALLOW_ERRORS", False))
        fb_enabled = bool(pick("in_memory_fallback_enabled",
                               "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", False))
        fb = pick("in_memory_fallback", "RATELIMIT_IN_MEMORY_FALLBACK", None)
        self._key_prefix = a["key_prefix"] or cfg.get("RATELIMIT_KEY_PREFIX", "")
        uri = pick("storage_uri", "RATELIMIT_STORAGE_URI", "memory://")
        self.store = uri if isinstance(uri, Store) else store_from_url(uri)
        remote = self.store.kind != "memory"
        self._on_error: Dict[str, Any] = {"fail_open": swallow}
        if remote and (fb or fb_enabled):
            self._on_error["fallback"] = (";".join(fb) if isinstance(fb, (list, tuple)) else fb) \
                if fb else True
        per_method = bool(pick("default_limits_per_method", "RATELIMIT_DEFAULTS_PER_METHOD",
                               False))
        defaults = pick("default_limits", "RATELIMIT_DEFAULT", None)
        self._defaults = [_Group(";".join(defaults) if isinstance(defaults, (list, tuple))
                                 else defaults, None, None, False, per_method=per_method,
                                 exempt_when=pick("default_limits_exempt_when",
                                                  "RATELIMIT_DEFAULTS_EXEMPT_WHEN", None),
                                 deduct_when=pick("default_limits_deduct_when",
                                                  "RATELIMIT_DEFAULTS_DEDUCT_WHEN", None),
                                 cost=pick("default_limits_cost", "RATELIMIT_DEFAULTS_COST",
                                           1))] if defaults else []
        applimits = pick("application_limits", "RATELIMIT_APPLICATION", None)
        self._application = [_Group(";".join(applimits) if isinstance(applimits, (list, tuple))
                                    else applimits, None, "global", True,
                                    cost=pick("application_limits_cost",
                                              "RATELIMIT_APPLICATION_COST", 1))] \
            if applimits else []
        if self._auto_check:
            app.before_request(self.check)
        app.after_request(self._after)
        app.extensions.setdefault("limiter", set()).add(self)

    def limit(self, limit_value: LimitValue, *, key_func: Optional[Callable[[], str]] = None,
              per_method: bool = False, methods: Optional[List[str]] = None,
              error_message: Optional[str] = None,
              exempt_when: Optional[Callable[[], bool]] = None, override_defaults: bool = True,
              deduct_when: Optional[Callable[[flask.Response], bool]] = None,
              on_breach: Optional[Callable[[RequestLimit], Any]] = None,
              cost: Union[int, Callable[[], int]] = 1,
              scope: Optional[Union[str, Callable[[str], str]]] = None) -> LimitDecorator:
        """A view's (or a blueprint's) own limits, counted per view (and per ``scope``)."""
        return LimitDecorator(self, _Group(
            limit_value, key_func, scope, False, per_method=per_method, methods=methods,
            error_message=error_message, exempt_when=exempt_when,
            override_defaults=override_defaults, deduct_when=deduct_when, on_breach=on_breach,
            cost=cost))

    def shared_limit(self, limit_value: LimitValue, scope: Union[str, Callable[[str], str]], *,
                     key_func: Optional[Callable[[], str]] = None, per_method: bool = False,
                     methods: Optional[List[str]] = None, error_message: Optional[str] = None,
                     exempt_when: Optional[Callable[[], bool]] = None,
                     override_defaults: bool = True,
                     deduct_when: Optional[Callable[[flask.Response], bool]] = None,
                     on_breach: Optional[Callable[[RequestLimit], Any]] = None,
                     cost: Union[int, Callable[[], int]] = 1) -> LimitDecorator:
        """Limits shared by every view decorated with the same ``scope`` (a string, or a
        callable(endpoint) -> string)."""
        return LimitDecorator(self, _Group(
            limit_value, key_func, scope, True, per_method=per_method, methods=methods,
            error_message=error_message, exempt_when=exempt_when,
            override_defaults=override_defaults, deduct_when=deduct_when, on_breach=on_breach,
            cost=cost))

    def exempt(self, obj: Any = None, *, flags: int = ExemptionScope.APPLICATION |
               ExemptionScope.DEFAULT) -> Any:
        """A view or a blueprint without limits (``@limiter.exempt``, ``limiter.exempt(bp)``,
        ``@limiter.exempt(flags=...)``): its own decorators' limits still apply to a view."""
        def mark(o: Any) -> Any:
            if isinstance(o, flask.Blueprint):
                self._exempt_bp[o.name] = flags
            else:
                self._exempt[o] = flags
            return o
        return mark if obj is None else mark(obj)

    def request_filter(self, fn: Callable[[], bool]) -> Callable[[], bool]:
        """A callable() -> bool: a request for which it answers True is not limited."""
        self._filters.append(fn)
        return fn

    def reset(self) -> None:
        """Forgets every count (in-process store only: a Redis store is shared)."""
        if self.store is not None and self.store.kind == "memory":
            from ..stores import MemoryStore
            self.store = MemoryStore()
            self._limiters.clear()

    # ---- the check

    def _limiter(self, text: str) -> _Limiter:
        lim = self._limiters.get(text)
        if lim is None:
            lim = self._limiters[text] = _Limiter(text, self.store, **self._on_error)
        return lim

    def _checks(self, group: _Group, endpoint: str) -> List[_Check]:
        req = flask.request
        if group.methods is not None and req.method.lower() not in group.methods:
            return []
        if group.exempt_when is not None and group.exempt_when():
            return []
        texts = group.limits() if callable(group.limits) else group.limits
        key = (group.key_func or self._key_func)()
        if group.shared:
            scope = group.scope(endpoint) if callable(group.scope) else group.scope
        else:
            scope = endpoint
            if group.scope:
                scope += ":" + (group.scope(endpoint) if callable(group.scope) else group.scope)
        if group.per_method:
            scope += ":" + req.method.upper()
        cost = group.cost() if callable(group.cost) else group.cost
        out = []
        for text in parse_policy(texts, self._strategy):
            c = _Check()
            c.group, c.text, c.limiter, c.key, c.cost = group, text, self._limiter(text), key, cost
            c.store_key = store_key("%s%s\0%s" % (self._key_prefix, scope, text), key)
            out.append(c)
        return out

    def _groups(self) -> List[_Group]:
        req = flask.request
        endpoint = req.endpoint or ""
        name = flask.current_app.view_functions.get(endpoint)
        flags = self._exempt.get(name, 0)
        for bp in getattr(req, "blueprints", [req.blueprint] if req.blueprint else []):
            flags |= self._exempt_bp.get(bp, 0)
        groups = list(self._routes.get(name, ()))
        if not groups:
            for bp in getattr(req, "blueprints", [req.blueprint] if req.blueprint else []):
                if bp in self._blueprints:
                    groups = list(self._blueprints[bp])
                    break
        if (not groups or not all(g.override_defaults for g in groups)) and \
                not flags & ExemptionScope.DEFAULT:
            groups += self._defaults
        if not flags & ExemptionScope.APPLICATION:
            groups += self._application
        return groups

    def check(self) -> None:
        """Decides the request's limits (the before_request hook; call it yourself with
        ``auto_check=False``): every limit without ``deduct_when`` in one all-or-nothing call;
        raises RateLimitExceeded for a breach."""
        req = flask.request
        if not self.enabled or req.endpoint is None or \
                req.endpoint == "static" or any(f() for f in self._filters):
            return
        endpoint = req.endpoint
        checks = [c for g in self._groups() for c in self._checks(g, endpoint)]
        if not checks:
            return
        now = [c for c in checks if c.group.deduct_when is None]
        later = [c for c in checks if c.group.deduct_when is not None]
        shown = self._decide(now)
        for c in later:  # deducted after the response, if deduct_when says so: tested now
            d = c.limiter.peek(c.store_key)
            if d.remaining < c.cost:
                self._breach(c, d)
        flask.g._libratelimit_fl = (shown, later)

    def _decide(self, checks: List[_Check]) -> Any:
        """Charges every check in one all-or-nothing call; raises for a breach."""
        if not checks:
            return None
        if len(checks) == 1:
            d = checks[0].limiter.hit(checks[0].store_key, checks[0].cost)
        else:
            d = checks[0].limiter.multi([(c.limiter, c.store_key, c.cost) for c in checks])
        if not d.allowed:
            self._breach(checks[d.refused or 0] if len(checks) > 1 else checks[0], d)
        return d

    def _breach(self, c: _Check, d: Any) -> None:
        rl = RequestLimit(c.text, c.key, d)
        response = None
        for cb in (c.group.on_breach, self._on_breach):
            if cb is not None:
                r = cb(rl)
                if isinstance(r, flask.Response) and response is None:
                    response = r
        if d.error and not d.allowed:  # failing closed: nobody is over a limit
            from werkzeug.exceptions import ServiceUnavailable
            raise ServiceUnavailable("the rate limiter's store cannot answer")
        msg = c.group.error_message
        raise RateLimitExceeded(rl, response, msg() if callable(msg) else msg)

    def _after(self, response: flask.Response) -> flask.Response:
        shown, later = flask.g.get("_libratelimit_fl", (None, []))
        for c in later:
            if c.group.deduct_when(response):
                c.limiter.hit(c.store_key, c.cost)
        if self._headers and shown is not None:
            for name, value in shown.headers(HDR_X | HDR_RETRY_AFTER).items():
                response.headers.setdefault(name, value)
        return response

    @property
    def limiter(self) -> "Limiter":
        return self


__all__ += ["LimitDecorator"]
