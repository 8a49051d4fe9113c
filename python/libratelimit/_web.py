"""What the middleware share: a limiter from a policy or a Limiter, per-route policies, the
429 answer and the header list."""
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .limiter import Limiter
from .stores import Store

Spec = Union[str, Limiter]
BODY_429 = b"429 Too Many Requests: rate limit exceeded\n"


def as_limiter(spec: Spec, store: Union[None, str, Store], name: Optional[str] = None,
               strategy: Optional[str] = None) -> Limiter:
    if isinstance(spec, Limiter):
        return spec
    return Limiter(spec, store, name=name, strategy=strategy)


class Routes:
    """Per-route limiters: an exact path, or a prefix ending in '*' ("/api/*"); the longest
    match wins, then the default (None: the route is not limited)."""

    def __init__(self, routes: Optional[Mapping[str, Spec]], default: Optional[Spec],
                 store: Union[None, str, Store], strategy: Optional[str] = None) -> None:
        if store is None or isinstance(store, str):
            from .stores import MemoryStore, store_from_url
            store = MemoryStore() if store is None else store_from_url(store)
        self.store = store
        self.exact: Dict[str, Limiter] = {}
        self.prefix: List[Tuple[str, Limiter]] = []
        for path, spec in (routes or {}).items():
            lim = as_limiter(spec, store, strategy=strategy)
            if path.endswith("*"):
                self.prefix.append((path[:-1], lim))
            else:
                self.exact[path] = lim
        self.prefix.sort(key=lambda p: -len(p[0]))
        self.default = as_limiter(default, store, strategy=strategy) if default else None

    def find(self, path: str) -> Tuple[str, Optional[Limiter]]:
        """(the route's name, its limiter): the route name keeps routes' counters apart."""
        if path in self.exact:
            return path, self.exact[path]
        for p, lim in self.prefix:
            if path.startswith(p):
                return p + "*", lim
        return "", self.default


def header_list(d: Any) -> List[Tuple[str, str]]:
    return list(d.headers().items())


KeyFunc = Callable[..., Optional[Union[str, bytes]]]


def user_key(user: Any) -> Optional[str]:
    """"user:ID" for an authenticated Starlette-style user (its identity, else display_name;
    SimpleUser has no identity), None for anonymous."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    for attr in ("identity", "display_name"):
        try:
            ident = getattr(user, attr, None)
        except NotImplementedError:
            ident = None
        if ident:
            return "user:%s" % ident
    return None
