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

from ._web import BODY_429, Spec, as_limiter
from .limiter import Limiter
from .stores import Store, store_from_url, MemoryStore

__all__ = ["FlaskLimiter", "default_key"]

F = TypeVar("F", bound=Callable[..., Any])


def default_key() -> str:
    """The authenticated user where the app has one (flask.g.user's ``id`` or the user
    itself, as flask-login style apps set it; else HTTP auth's username), else the client
    address."""
    user = flask.g.get("user")
    if user is not None:
        return "user:%s" % getattr(user, "id", user)
    auth = flask.request.authorization
    if auth and auth.username:
        return "user:%s" % auth.username
    return "addr:%s" % flask.request.remote_addr


class FlaskLimiter:
    """``FlaskLimiter(app=None, default=None, key=default_key, store=None, strategy=None)``.

    ``default``: limits of every view without its own (each view counted apart, as
    Flask-Limiter's default_limits); ``app_limit``: one limit shared by the whole app.
    ``key``: a callable() -> key (None: not limited).  ``store``: a Store or URL
    (``redis://``...); default in-process.  ``init_app`` for the app-factory pattern.
    The check runs as a before_request hook: register the app's authentication hook first
    (before init_app) so that the key sees the user, as with Flask-Limiter.
    """

    def __init__(self, app: Optional[flask.Flask] = None, default: Optional[Spec] = None,
                 key: Callable[[], Optional[str]] = default_key,
                 store: Union[None, str, Store] = None, strategy: Optional[str] = None,
                 app_limit: Optional[Spec] = None) -> None:
        self.store = MemoryStore() if store is None else (
            store_from_url(store) if isinstance(store, str) else store)
        self.strategy = strategy
        self.key = key
        self.default = as_limiter(default, self.store, strategy=strategy) if default else None
        self.app_limit = as_limiter(app_limit, self.store, strategy=strategy) if app_limit else None
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
        lim = as_limiter(policy, self.store, name=name, strategy=self.strategy)

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
        shown = None
        for lim, keyf in checks:
            k = keyf()
            if k is None:
                continue
            route = "" if lim is self.app_limit else flask.request.endpoint
            d = lim.hit("%s\0%s" % (route, k))
            if not d.allowed:
                resp = flask.Response(BODY_429, status=429, mimetype="text/plain")
                resp.headers.extend(d.headers())
                return resp
            if shown is None or d.remaining < shown.remaining:
                shown = d
        flask.g.libratelimit_decision = shown
        return None

    def _headers(self, response: flask.Response) -> flask.Response:
        d = flask.g.get("libratelimit_decision")
        if d is not None and response.status_code != 429:
            for name, value in d.headers().items():
                response.headers[name] = value
        return response
