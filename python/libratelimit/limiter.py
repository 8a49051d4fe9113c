"""libratelimit.Limiter: policies (ours or limits' notation) over a store, with context-managed
concurrency leases and async twins of every call."""
import asyncio
import functools
from typing import Any, Optional, Sequence, Tuple, Union

from . import _native
from .policy import parse_policy
from .stores import MemoryStore, Store, store_from_url

Key = Union[str, bytes]


class RateLimitExceeded(Exception):
    """Raised by ``with limiter.acquire(key):`` when no slot is free, and by the middleware's
    helpers; ``decision`` is the denied Decision."""

    def __init__(self, decision: "_native.Decision") -> None:
        super().__init__("rate limit exceeded: retry after %.3f s" % decision.retry_after)
        self.decision = decision


class Lease:
    """A concurrency slot taken by ``Limiter.acquire``: ``allowed``, ``decision``; released by
    ``release()`` or at the end of a ``with`` block (entering a denied lease raises
    RateLimitExceeded, so the block runs only with a slot)."""

    __slots__ = ("limiter", "key", "decision", "_released")

    def __init__(self, limiter: "Limiter", key: Key, decision: "_native.Decision") -> None:
        self.limiter, self.key, self.decision = limiter, key, decision
        self._released = not decision.allowed or decision.lease == 0

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    def release(self, now_ns: Optional[int] = None) -> bool:
        """Gives the slot back (once); False when it had expired or was never taken."""
        if self._released:
            return False
        self._released = True
        return self.limiter.release(self.key, self.decision.lease, now_ns)

    def __enter__(self) -> "Lease":
        if not self.decision.allowed:
            raise RateLimitExceeded(self.decision)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    async def __aenter__(self) -> "Lease":
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        if self.limiter._remote:
            await self.limiter._run(self.release)
        else:
            self.release()


class Limiter(_native.Limiter):
    """A rate limiter: ``Limiter(policy, store=None)``.

    ``policy``: ratelimit's notation (``"gcra:100/1m,burst=20"``, any algorithm, ``block=``,
    ``jitter=``, calendar periods ``/1mo``), limits' (``"100/minute"``, ``"10 per second"``),
    or several joined by ``;`` (``"100/minute;1000/hour"``: all-or-nothing), or a list of such.
    ``strategy`` picks the algorithm of limits-notation items (default ``fixed-window``, as
    Flask-Limiter; ``moving-window`` is the exact sliding log).
    ``store``: None (a new in-process MemoryStore with ``max_keys``/``max_bytes``), a Store,
    or a URL (``redis://...``, ``redis+cluster://``, ``redis+sentinel://``, ``ratelimitd://``).
    ``name``: the policy's name in the IETF headers.  ``fail_open``: when Redis or the daemon
    cannot answer, allow (default: deny); the decision's ``error`` then says why.
    """

    def __init__(self, policy: Union[str, Sequence[str]], store: Union[None, str, Store] = None,
                 *, name: Optional[str] = None, strategy: Optional[str] = None,
                 fail_open: bool = False, max_keys: int = 0, max_bytes: int = 0,
                 reservation_timeout: Optional[float] = None) -> None:
        if isinstance(policy, str):
            texts = parse_policy(policy, strategy)
        elif isinstance(policy, (list, tuple)):
            texts = [t for p in policy for t in parse_policy(p, strategy)]
        else:
            raise TypeError("policy must be str or a list of str, not %s" % type(policy).__name__)
        if store is None:
            store = MemoryStore(max_keys=max_keys, max_bytes=max_bytes)
        elif isinstance(store, str):
            store = store_from_url(store)
        elif not isinstance(store, Store):
            raise TypeError("store must be None, a Store or a URL, not %s" % type(store).__name__)
        if (max_keys or max_bytes) and store.kind != "memory":
            raise ValueError("max_keys and max_bytes apply to the in-process store only")
        rt = 0
        if reservation_timeout is not None:
            if not isinstance(reservation_timeout, (int, float)) or reservation_timeout <= 0:
                raise ValueError("reservation_timeout must be a positive number of seconds")
            rt = int(reservation_timeout * 1e9)
        super().__init__(texts, store, name=name, fail_open=fail_open, reservation_timeout_ns=rt)
        self._remote = store.kind != "memory"

    def __repr__(self) -> str:
        return "Limiter(%r, store=%s)" % (";".join(self.policies), self.store.kind)

    def acquire(self, key: Key, now_ns: Optional[int] = None) -> Lease:
        """Takes a slot of a concurrency policy (``"concurrency:10/30s"``): a Lease, to use as
        ``with lim.acquire(key):`` (RateLimitExceeded when none is free) or to release()."""
        return Lease(self, key, self._acquire(key, now_ns))

    # ---- async twins: in-process calls answer at once; Redis and daemon calls run in the
    # default executor, the GIL released for the network round trip.

    async def _run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        if not self._remote:
            return fn(*args, **kw)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))

    async def ahit(self, key: Key, cost: int = 1, now_ns: Optional[int] = None) -> "_native.Decision":
        """``await``-able hit()."""
        return await self._run(self.hit, key, cost, now_ns)

    async def apeek(self, key: Key, now_ns: Optional[int] = None) -> "_native.Decision":
        """``await``-able peek()."""
        return await self._run(self.peek, key, now_ns)

    async def areset(self, key: Key) -> None:
        """``await``-able reset()."""
        return await self._run(self.reset, key)

    async def amulti(self, items: Sequence[Tuple[Any, ...]],
                     now_ns: Optional[int] = None) -> "_native.Decision":
        """``await``-able multi()."""
        return await self._run(self.multi, items, now_ns)

    async def aacquire(self, key: Key, now_ns: Optional[int] = None) -> Lease:
        """``await``-able acquire(): ``async with await lim.aacquire(key):``."""
        return await self._run(self.acquire, key, now_ns)

    async def arelease(self, key: Key, lease: int, now_ns: Optional[int] = None) -> bool:
        """``await``-able release()."""
        return await self._run(self.release, key, lease, now_ns)

    async def areserve(self, key: Key, estimate: int, timeout_ns: Optional[int] = None,
                       now_ns: Optional[int] = None) -> "_native.Decision":
        """``await``-able reserve()."""
        return await self._run(self.reserve, key, estimate, timeout_ns, now_ns)

    async def asettle(self, key: Key, reservation: int, real_cost: int,
                      now_ns: Optional[int] = None) -> "_native.Decision":
        """``await``-able settle()."""
        return await self._run(self.settle, key, reservation, real_cost, now_ns)
