"""limits' strategies over libratelimit's limiters: each (item, identifiers) is decided by a
libratelimit Limiter with the item's policy, under a store key no other item, identifiers or
strategy shares.  ``hit`` charges when allowed (a refused hit charges nothing), ``test``
charges nothing, ``clear`` resets the count.

Beyond limits: every method takes ``now_ns=`` (integer nanoseconds, the store's clock: Unix
time for the in-process store and Redis) for tests and replays, as libratelimit.Limiter does."""
import hashlib
import threading
import time
from typing import Dict, Optional, Tuple, Union

from .._native import KEY_MAX, BackendError, Decision
from ..limiter import Limiter
from ..stores import Store
from . import RateLimitItem, WindowStats

__all__ = ["RateLimiter", "FixedWindowRateLimiter", "MovingWindowRateLimiter",
           "SlidingWindowCounterRateLimiter"]

Ident = Union[str, bytes, int]


def _part(value: Ident) -> bytes:
    b = value if isinstance(value, bytes) else str(value).encode()
    return b"%d:%s" % (len(b), b)


class RateLimiter:
    """The strategies' base: ``hit``, ``test``, ``get_window_stats``, ``clear`` over a store
    (from ``storage_from_string``, ``MemoryStorage()``, or any libratelimit Store)."""

    ALGORITHM = ""

    def __init__(self, storage: Store) -> None:
        if not isinstance(storage, Store):
            raise TypeError("storage must be a libratelimit store (storage_from_string(...)), "
                            "not %s" % type(storage).__name__)
        self.storage = storage
        self._limiters: Dict[Tuple[int, int], Limiter] = {}
        self._mu = threading.Lock()

    def _limiter(self, item: RateLimitItem) -> Limiter:
        if not isinstance(item, RateLimitItem):
            raise TypeError("item must be a RateLimitItem, not %s" % type(item).__name__)
        spec = (item.amount, item.get_expiry())
        lim = self._limiters.get(spec)
        if lim is None:
            with self._mu:
                lim = self._limiters.get(spec)
                if lim is None:
                    lim = Limiter("%s:%d/%ds" % (self.ALGORITHM, spec[0], spec[1]),
                                  self.storage)
                    self._limiters[spec] = lim
        return lim

    def _key(self, item: RateLimitItem, identifiers: Tuple[Ident, ...]) -> bytes:
        """Length-prefixed parts: the strategy, the item (namespace, amount, multiples, unit),
        then each identifier; so no two (strategy, item, identifiers) share a key.  Longer than
        the store's 512 bytes: 0xff "sha256:" and the SHA-256 of it."""
        k = b"limits" + b"".join(_part(p) for p in (
            self.ALGORITHM, item.namespace, item.amount, item.multiples,
            item.GRANULARITY.name, len(identifiers)) + identifiers)
        if len(k) <= KEY_MAX:
            return k
        return b"\xffsha256:" + hashlib.sha256(k).digest()

    @staticmethod
    def _checked(d: Decision) -> Decision:
        if d.error is not None:
            raise BackendError(d.error)
        return d

    def hit(self, item: RateLimitItem, *identifiers: Ident, cost: int = 1,
            now_ns: Optional[int] = None) -> bool:
        """Charges ``cost`` to (item, identifiers) if it fits: True; else False, charging
        nothing.  BackendError when the store cannot answer."""
        lim = self._limiter(item)
        return self._checked(lim.hit(self._key(item, identifiers), cost, now_ns)).allowed

    def test(self, item: RateLimitItem, *identifiers: Ident, cost: int = 1,
             now_ns: Optional[int] = None) -> bool:
        """Whether a hit of ``cost`` would be allowed now; charges nothing.  (A hit of cost 0
        is allowed when one of cost 1 would be, as ratelimit decides it.)"""
        if isinstance(cost, bool) or not isinstance(cost, int):
            raise TypeError("cost must be an int")
        if cost < 0:
            raise ValueError("cost must be >= 0")
        lim = self._limiter(item)
        d = self._checked(lim.peek(self._key(item, identifiers), now_ns))
        return d.allowed if cost == 0 else d.remaining >= cost

    def get_window_stats(self, item: RateLimitItem, *identifiers: Ident,
                         now_ns: Optional[int] = None) -> WindowStats:
        """``WindowStats(reset_time, remaining)``: ``reset_time`` the Unix time (seconds) at
        which the count is whole again, ``remaining`` the cost-1 hits allowed now."""
        lim = self._limiter(item)
        d = self._checked(lim.peek(self._key(item, identifiers), now_ns))
        if now_ns is None:
            return WindowStats(time.time() + d.reset_after, d.remaining)
        return WindowStats((now_ns + d.reset_after_ns) / 1e9, d.remaining)

    def clear(self, item: RateLimitItem, *identifiers: Ident) -> None:
        """Forgets (item, identifiers)' count."""
        self._limiter(item).reset(self._key(item, identifiers))


class FixedWindowRateLimiter(RateLimiter):
    """limits' fixed window: ratelimit's ``fixed_window`` (windows on the clock's whole
    multiples of the period: a minute's start on a whole UTC minute)."""
    ALGORITHM = "fixed_window"


class MovingWindowRateLimiter(RateLimiter):
    """limits' moving window: ratelimit's ``sliding_log``, exact to the nanosecond."""
    ALGORITHM = "sliding_log"


class SlidingWindowCounterRateLimiter(RateLimiter):
    """limits' sliding window counter: ratelimit's ``sliding_window`` (the previous window's
    count weighted by its overlap, in integer arithmetic)."""
    ALGORITHM = "sliding_window"
