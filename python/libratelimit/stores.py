"""Where a limiter's state lives: in-process (MemoryStore), Redis (RedisStore) or a ratelimitd
(DaemonStore), and the URLs that name them."""
from typing import Optional
from urllib.parse import parse_qs, unquote

from ._native import Store

__all__ = ["Store", "MemoryStore", "RedisStore", "DaemonStore", "store_from_url"]

_ENGINES = {"auto": 0, "scripts": 1, "module": 2}


class MemoryStore(Store):
    """The in-process sharded store (libratelimit's rlt_store): exact, thread-safe, bounded.

    ``max_keys`` / ``max_bytes`` cap it (0: none); when full it evicts the least recently used
    key, or with ``fail_closed=True`` refuses new keys (StoreFullError).  The store's clock
    is the monotonic clock shifted at creation to read the Unix time minus ``origin_ns``
    (default 0): fixed windows start on the wall clock's whole minutes and hours, as limits
    counts them, in every process alike; an explicit ``now_ns`` is taken as it is, the Unix time
    at ``origin_ns + now_ns`` for calendar windows.  Idle keys are swept on clock-driven calls.
    Several limiters may share one store (and so one memory budget).
    """

    def __init__(self, *, max_keys: int = 0, max_bytes: int = 0, fail_closed: bool = False,
                 shards: int = 0, origin_ns: Optional[int] = None, sweep: bool = True) -> None:
        super().__init__("memory", max_keys=max_keys, max_bytes=max_bytes,
                         fail_closed=fail_closed, shards=shards, origin_ns=origin_ns, sweep=sweep)


def _timeout_ns(timeout: float) -> int:
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise TypeError("timeout must be seconds as a number")
    if not 0 < timeout <= 3600:
        raise ValueError("timeout must be in (0, 3600] seconds")
    return int(timeout * 1e9)


class RedisStore(Store):
    """Redis through libratelimit_redis: one Lua script (or the module's RL.DECIDE, detected
    per connection) per decision, exact and atomic; time from Redis unless now_ns is given.

    ``servers``: "host:port[,host:port...]" (the server, or a Cluster's seeds with
    ``cluster=True``); ``sentinels`` + ``master_name``: Redis Sentinel.  ``timeout``: seconds
    per call (default 0.05).  ``engine``: "auto", "scripts" or "module".  One connection per
    thread that uses the store at once (pooled); a child process after fork() opens its own.
    ``backoff_min`` / ``backoff_max``: seconds a server that failed is left alone before a
    trial call, doubling per failed trial (the C client's circuit breaker; default 0.1 and 5):
    how soon a restarted Redis is used again.
    """

    def __init__(self, servers: Optional[str] = None, *, cluster: bool = False,
                 password: Optional[str] = None, prefix: Optional[str] = None,
                 timeout: float = 0.05, sentinels: Optional[str] = None,
                 master_name: Optional[str] = None, engine: str = "auto",
                 backoff_min: float = 0.1, backoff_max: float = 5.0) -> None:
        if engine not in _ENGINES:
            raise ValueError("engine must be one of auto, scripts, module")
        for b in (backoff_min, backoff_max):
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 3600:
                raise ValueError("backoff_min and backoff_max must be in (0, 3600] seconds")
        super().__init__("redis", servers=servers, cluster=cluster, password=password,
                         prefix=prefix, timeout_ns=_timeout_ns(timeout), sentinels=sentinels,
                         master_name=master_name, engine=_ENGINES[engine],
                         backoff_min_ns=max(1, int(backoff_min * 1e9)),
                         backoff_max_ns=max(1, int(backoff_max * 1e9)))


class DaemonStore(Store):
    """A ratelimitd over RESP (RL.CHECK, RL.MULTI, RL.ACQUIRE, RL.RESERVE...): the daemon keeps
    the state and reads its own clock; its waits come in milliseconds rounded up."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6380, *,
                 password: Optional[str] = None, timeout: float = 0.05) -> None:
        super().__init__("daemon", host=host, port=port, password=password,
                         timeout_ns=_timeout_ns(timeout))


def _hosts(netloc: str, default_port: int) -> str:
    out = []
    for h in netloc.split(","):
        if not h:
            raise ValueError("empty host in %r" % netloc)
        host, sep, port = h.rpartition(":")
        if not sep:
            host, port = h, str(default_port)
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("bad port in %r" % h)
        out.append("%s:%s" % (host or "127.0.0.1", port))
    return ",".join(out)


def store_from_url(url: str) -> Store:
    """A store from a URL, in limits' notation where it has one:

    ``memory://``; ``redis://[:password@]host[:port][/0]``; ``redis+cluster://host:port[,...]``;
    ``redis+sentinel://[:password@]host:port[,...]/master_name``;
    ``ratelimitd://[:password@]host:port`` (also ``resp://``).  Query options: ``prefix``,
    ``timeout`` (seconds), ``engine`` (Redis).  ``rediss://`` (TLS) is refused: the C library
    has no TLS.
    """
    if not isinstance(url, str):
        raise TypeError("store URL must be str")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("not a store URL: %r" % url)
    scheme = scheme.lower()
    if scheme == "memory":
        return MemoryStore()
    if scheme == "rediss":
        raise ValueError("rediss:// (TLS) is not supported: libratelimit_redis has no TLS; use a "
                         "TLS tunnel (stunnel) and redis:// to it")
    rest, _, query = rest.partition("?")
    q = {k: v[-1] for k, v in parse_qs(query).items()}
    netloc, _, path = rest.partition("/")
    password = None
    if "@" in netloc:
        auth, _, netloc = netloc.rpartition("@")
        password = unquote(auth.partition(":")[2] if ":" in auth else auth) or None
    timeout = float(q["timeout"]) if "timeout" in q else 0.05
    if scheme in ("ratelimitd", "resp"):
        hp = _hosts(netloc or "127.0.0.1:6380", 6380)
        if "," in hp:
            raise ValueError("a ratelimitd URL names one host")
        host, _, port = hp.rpartition(":")
        return DaemonStore(host, int(port), password=password, timeout=timeout)
    common = dict(password=password, prefix=q.get("prefix"), timeout=timeout,
                  engine=q.get("engine", "auto"))
    if scheme == "redis":
        if path not in ("", "0"):
            raise ValueError("only database 0 is supported (the URL names %r)" % path)
        return RedisStore(_hosts(netloc or "127.0.0.1:6379", 6379), **common)
    if scheme == "redis+cluster":
        return RedisStore(_hosts(netloc, 6379), cluster=True, **common)
    if scheme == "redis+sentinel":
        if not path:
            raise ValueError("redis+sentinel:// needs the master's name: "
                             "redis+sentinel://host:26379/mymaster")
        return RedisStore(sentinels=_hosts(netloc, 26379), master_name=unquote(path), **common)
    raise ValueError("unknown store scheme %r: memory, redis, redis+cluster, redis+sentinel, "
                     "ratelimitd" % scheme)
