"""What the middleware share: a limiter from a policy or a Limiter, per-route policies, the
429 answer, the header list, the client-address key and the store key (hashed when long)."""
import functools
import hashlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _native
from ._native import KEY_MAX
from .limiter import Limiter
from .stores import Store

Spec = Union[str, Limiter]
BODY_429 = b"429 Too Many Requests: rate limit exceeded\n"


BODY_503 = b"503 Service Unavailable: the rate limiter's store cannot answer\n"


def failure_mode(fail_open: bool = False, fallback: Any = None,
                 fallback_probe: float = 1.0) -> Dict[str, Any]:
    """The Limiter arguments for a store that cannot answer (Limiter's docstring)."""
    return {"fail_open": fail_open, "fallback": fallback, "fallback_probe": fallback_probe}


def as_limiter(spec: Spec, store: Union[None, str, Store], name: Optional[str] = None,
               strategy: Optional[str] = None,
               on_error: Optional[Dict[str, Any]] = None) -> Limiter:
    if isinstance(spec, Limiter):
        return spec
    kw = dict(on_error or {})
    remote = isinstance(store, str) and not store.startswith("memory:") or \
        isinstance(store, Store) and store.kind != "memory"
    if not remote:
        kw.pop("fallback", None)
        kw.pop("fallback_probe", None)
    return Limiter(spec, store, name=name, strategy=strategy, **kw)


def refusal(d: Any) -> Tuple[int, bytes]:
    """A denied decision's status and body: 429, or 503 when the store could not answer and
    the limiter fails closed (the client is not over any limit: nobody could tell)."""
    return (503, BODY_503) if d.error else (429, BODY_429)


class Routes:
    """Per-route limiters: an exact path, or a prefix ending in '*' ("/api/*"); the longest
    match wins, then the default (None: the route is not limited)."""

    def __init__(self, routes: Optional[Mapping[str, Spec]], default: Optional[Spec],
                 store: Union[None, str, Store], strategy: Optional[str] = None,
                 on_error: Optional[Dict[str, Any]] = None) -> None:
        if store is None or isinstance(store, str):
            from .stores import MemoryStore, store_from_url
            store = MemoryStore() if store is None else store_from_url(store)
        self.store = store
        self.exact: Dict[str, Limiter] = {}
        self.prefix: List[Tuple[str, Limiter]] = []
        for path, spec in (routes or {}).items():
            lim = as_limiter(spec, store, strategy=strategy, on_error=on_error)
            if path.endswith("*"):
                self.prefix.append((path[:-1], lim))
            else:
                self.exact[path] = lim
        self.prefix.sort(key=lambda p: -len(p[0]))
        self.default = (as_limiter(default, store, strategy=strategy, on_error=on_error)
                        if default else None)

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


IPV6_SUBNET = 56


def check_subnet(ipv6_subnet: int) -> int:
    if isinstance(ipv6_subnet, bool) or not isinstance(ipv6_subnet, int) or \
            not 32 <= ipv6_subnet <= 128:
        raise ValueError("ipv6_subnet must be a prefix length in 32..128 (128: whole addresses)")
    return ipv6_subnet


def address_key(addr: Optional[str], ipv6_subnet: int = IPV6_SUBNET) -> str:
    """The key of a client address: ``"addr:"`` and the library's own rule (``rlt_addr_key``,
    the one ratelimitd, its SPOE agent and the nginx module use): IPv4 as itself, an IPv4-mapped
    IPv6 address (``::ffff:192.0.2.1``, what a dual-stack socket reports for IPv4 clients) as
    its IPv4 address, IPv6 as its /56 (``ipv6_subnet``, 32..128) in canonical form: one
    subscriber is usually given a /56 or a /48 and can pick any address in it, so a per-address
    limit would give them 2^72 fresh counts.  A zone (``fe80::1%eth0``) is no identity and is
    dropped.  What the server reports that is not an IP (a Unix socket, a test client's name) is
    kept as it is: the peer address comes from the socket, never from the client."""
    if not addr:
        return "addr:-"
    return _address_key(addr, ipv6_subnet)


@functools.lru_cache(maxsize=4096)
def _address_key(addr: str, ipv6_subnet: int) -> str:
    try:
        return "addr:" + _native.addr_key(addr.split("%", 1)[0], ipv6_subnet)
    except ValueError:
        return "addr:" + addr


# A hashed key's first byte: 0xff never starts a UTF-8 route name, so a hashed key cannot equal
# an unhashed one.
HASHED = b"\xffsha256:"


def store_key(scope: str, key: Union[str, bytes]) -> bytes:
    """The store's key for (scope, key): ``scope NUL key`` in UTF-8, or, when that is longer
    than the store's KEY_MAX (512 bytes), ``0xff "sha256:"`` and the SHA-256 of it (32 bytes):
    an over-long key (a long user name from a key function, say) still counts, apart from
    every other, and never makes ``hit`` raise."""
    k = key.encode() if isinstance(key, str) else bytes(key)
    full = scope.encode() + b"\0" + k
    if len(full) <= KEY_MAX:
        return full
    return HASHED + hashlib.sha256(full).digest()
