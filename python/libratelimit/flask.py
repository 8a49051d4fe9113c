"""A Flask extension: app-wide default limits, a decorator per view, the IETF headers on every
limited response and 429 with Retry-After when denied.

    from libratelimit.flask import FlaskLimiter
    limiter = FlaskLimiter(app, default="200/day;50/hour")

    @app.route("/login", methods=["POST"])
    @limiter.limit("5/minute")
    def login(): ...
"""
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

import flask

from ._web import (IPV6_SUBNET, Spec, address_key, as_limiter, check_subnet, failure_mode,
                   refusal, store_key)
from .limiter import Limiter
from .stores import Store, store_from_url, MemoryStore

__all__ = ["FlaskLimiter", "default_key", "user_or_address"]

F = TypeVar("F", bound=Callable[..., Any])


def default_key() -> str:
    """The client address as Flask sees it (``request.remote_addr``: REMOTE_ADDR, or what
    werkzeug's ProxyFix set from the trusted proxy's headers), IPv6 as its /56 (address_key).
    Never a header the client chose: a user identity is the application's to give, with
    ``key=`` (user_or_address below)."""
    return address_key(flask.request.remote_addr)


def user_or_address() -> str:
    """A key function for apps whose authentication hook sets ``flask.g.user``: "user:ID"
    (its ``id``, or the user itself), else the client address.  Register the hook before
    init_app so the limiter runs after it."""
    user = flask.g.get("user")
    if user is not None:
        return "user:%s" % getattr(user, "id", user)
    return default_key()


class FlaskLimiter:
    """``FlaskLimiter(app=None, default=None, key=default_key, store=None, strategy=None)``.

    ``default``: limits of every view without its own (each view counted apart, as
    Flask-Limiter's default_limits); ``app_limit``: one limit shared by the whole app.
    ``key``: a callable() -> key (None: not limited); default the client address, IPv6 as
    its /``ipv6_subnet`` (56).  Keys longer than the store takes are hashed (store_key).
    ``store``: a Store or URL
    (``redis://``...); default in-process.  ``init_app`` for the app-factory pattern.
    ``fail_open``, ``fallback``, ``fallback_probe``: what a request gets when the store cannot
    answer (Limiter; failing closed answers 503, not 429).
    The check runs as a before_request hook: register the app's authentication hook first
    (before init_app) so that the key sees the user, as with Flask-Limiter.
    """

    def __init__(self, app: Optional[flask.Flask] = None, default: Optional[Spec] = None,
                 key: Optional[Callable[[], Optional[str]]] = None,
                 store: Union[None, str, Store] = None, strategy: Optional[str] = None,
                 app_limit: Optional[Spec] = None, ipv6_subnet: int = IPV6_SUBNET,
                 fail_open: bool = False, fallback: Any = None,
                 fallback_probe: float = 1.0) -> None:
        self.store = MemoryStore() if store is None else (
            store_from_url(store) if isinstance(store, str) else store)
        self.strategy = strategy
        self.on_error = failure_mode(fail_open, fallback, fallback_probe)
        subnet = check_subnet(ipv6_subnet)
        self.key = key or (lambda: address_key(flask.request.remote_addr, subnet))
        self.default = (as_limiter(default, self.store, strategy=strategy, on_error=self.on_error)
                        if default else None)
        self.app_limit = (as_limiter(app_limit, self.store, strategy=strategy,
                                     on_error=self.on_error) if app_limit else None)
        self._views: Dict[Callable[..., Any], List[Tuple[Limiter, Callable[[], Any]]]] = {}
        self._exempt: set = set()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        app.before_request(self._check)
        app.after_request(self._headers)
        app.extensions["libratelimit"] = self

    def limit(self, policy: Spec, key: Optional[Callable[[], Optional[str]]] = None,
              name: Optional[str] = None) -> Callable[[F], F]:
        """Decorator: this view's own limit (replacing the defaults), optionally keyed by its
        own callable.  Stack several for several limits."""
        lim = as_limiter(policy, self.store, name=name, strategy=self.strategy,
                         on_error=self.on_error)

        def wrap(view: F) -> F:
            self._views.setdefault(view, []).append((lim, key or self.key))
            return view

        return wrap

    def exempt(self, view: F) -> F:
        """Decorator: no limit on this view, not even the defaults."""
        self._exempt.add(view)
        return view

    def _check(self) -> Optional[flask.Response]:
        view = flask.current_app.view_functions.get(flask.request.endpoint or "")
        if view is None or view in self._exempt:
            return None
        checks = list(self._views.get(view, ()))
        if not checks and self.default is not None:
            checks = [(self.default, self.key)]
        if self.app_limit is not None:
            checks.append((self.app_limit, self.key))
        items = []
        for lim, keyf in checks:
            k = keyf()
            if k is not None:
                route = "" if lim is self.app_limit else flask.request.endpoint
                items.append((lim, store_key(route, k), 1))
        if not items:
            return None
        # every limit of the request in one all-or-nothing call: a refused request is charged
        # to none of them
        d = items[0][0].hit(items[0][1]) if len(items) == 1 else items[0][0].multi(items)
        if not d.allowed:
            status, body = refusal(d)
            resp = flask.Response(body, status=status, mimetype="text/plain")
            resp.headers.extend(d.headers())
            return resp
        flask.g.libratelimit_decision = d
        return None

    def _headers(self, response: flask.Response) -> flask.Response:
        d = flask.g.get("libratelimit_decision")
        if d is not None and response.status_code != 429:
            for name, value in d.headers().items():
                response.headers[name] = value
        return response
