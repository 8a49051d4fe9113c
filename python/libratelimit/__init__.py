"""libratelimit: exact rate limits for Python, over the C library libratelimit.

    from libratelimit import Limiter
    lim = Limiter("100/minute")                  # limits' notation, or ours: "gcra:100/1m,burst=20"
    d = lim.hit(user_id)
    if not d.allowed:
        return 429, d.headers()

A Limiter keeps its state in a store: in-process (the default, libratelimit's sharded store),
Redis (``redis://``, ``redis+cluster://``, ``redis+sentinel://``) or a ratelimitd
(``ratelimitd://host:port``).  Decisions are the C library's, exactly.
"""
from ._native import BackendError, Decision, StoreFullError, format_policy
from ._native import HDR_IETF, HDR_LEGACY, HDR_RETRY_AFTER, HDR_X, KEY_MAX
from .limiter import Lease, Limiter, RateLimitExceeded
from .policy import parse_policy
from .stores import DaemonStore, MemoryStore, RedisStore, Store, store_from_url

__all__ = ["Limiter", "Decision", "Lease", "RateLimitExceeded", "BackendError", "StoreFullError",
           "Store", "MemoryStore", "RedisStore", "DaemonStore", "store_from_url", "parse_policy",
           "format_policy", "HDR_IETF", "HDR_LEGACY", "HDR_RETRY_AFTER", "HDR_X", "KEY_MAX"]
__version__ = "0.1.0"
