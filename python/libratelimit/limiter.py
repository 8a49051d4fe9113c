"""libratelimit.Limiter: policies (ours or limits' notation) over a store, with context-managed
concurrency leases and async twins of every call."""
import asyncio
import functools
import logging
import threading
import time
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import _native
from .policy import parse_policy
from .stores import MemoryStore, Store, store_from_url

Key = Union[str, bytes]
log = logging.getLogger("libratelimit")


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
    ``name``: the policy's name in the IETF headers.

    When Redis or the daemon cannot answer, a decision follows the mode chosen here, and every
    switch (store lost, store back) is logged once on the ``libratelimit`` logger and counted
    (``health()``): ``fail_open=False`` (default) denies, ``fail_open=True`` allows, both with
    the decision's ``error`` saying why; ``fallback=True`` (or other policy text) decides in an
    in-process store with the same policies (or those) while the store is down, and hands back
    to it when it answers again (tried at most every ``fallback_probe`` seconds; 0: on every
    call).  The fallback covers hit, peek, multi (each item in turn: not all-or-nothing while
    down) and their async twins.
    """

    def __init__(self, policy: Union[str, Sequence[str]], store: Union[None, str, Store] = None,
                 *, name: Optional[str] = None, strategy: Optional[str] = None,
                 fail_open: bool = False, max_keys: int = 0, max_bytes: int = 0,
                 reservation_timeout: Optional[float] = None,
                 fallback: Union[None, bool, str, Sequence[str]] = None,
                 fallback_probe: float = 1.0) -> None:
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
        self._fallback: Optional[_native.Limiter] = None
        if fallback is not None and fallback is not False:
            if not self._remote:
                raise ValueError("fallback applies to a Redis or daemon store")
            if isinstance(fallback_probe, bool) or not isinstance(fallback_probe, (int, float)) \
                    or fallback_probe < 0:
                raise ValueError("fallback_probe must be a number of seconds >= 0")
            fb_texts = texts if fallback is True else (
                parse_policy(fallback, strategy) if isinstance(fallback, str)
                else [t for p in fallback for t in parse_policy(p, strategy)])
            self._fallback = _native.Limiter(fb_texts, MemoryStore(), name=name)
            self._probe_ns = int(fallback_probe * 1e9)
        self._mode = "fallback" if self._fallback else ("open" if fail_open else "closed")
        self._health_mu = threading.Lock()
        self._down_since: Optional[float] = None
        self._last_try_ns = 0
        self._counts = {"outages": 0, "recoveries": 0, "failed_decisions": 0,
                        "fallback_decisions": 0}
        if self._remote:  # an instance attribute: the in-process store's calls stay direct
            self.hit = self._guarded_hit  # type: ignore[method-assign]
            self.peek = self._guarded_peek  # type: ignore[method-assign]
            self.multi = self._guarded_multi  # type: ignore[method-assign]

    # ---- the store's failures: the chosen mode, every switch logged once and counted

    def health(self) -> Dict[str, Any]:
        """The store as the limiter last found it: ``up``, ``mode`` (closed, open, fallback),
        ``down_since`` (time.time() of the switch, None when up) and the counts ``outages``
        (up -> down switches), ``recoveries``, ``failed_decisions`` (answered by the fail
        mode), ``fallback_decisions`` (answered by the in-process fallback)."""
        with self._health_mu:
            return dict(self._counts, up=self._down_since is None, mode=self._mode,
                        down_since=self._down_since)

    def _note(self, error: Optional[str]) -> None:
        """Records what the store's last answer says (error None: it answered); logs a switch."""
        with self._health_mu:
            if error is None:
                if self._down_since is None:
                    return
                self._down_since = None
                self._counts["recoveries"] += 1
                log.warning("libratelimit: %s store is back; decisions go to it again (%s)",
                            self.store.kind, self._mode)
                return
            if self._fallback is None:
                self._counts["failed_decisions"] += 1
            if self._down_since is not None:
                return
            self._down_since = time.time()
            self._counts["outages"] += 1
            what = {"closed": "denying every request (fail closed)",
                    "open": "allowing every request (fail open)",
                    "fallback": "deciding in-process until it answers (fallback)"}[self._mode]
            log.error("libratelimit: %s store cannot answer (%s): %s", self.store.kind, error,
                      what)

    def _should_try(self) -> bool:
        """While down with a fallback: whether this call tries the store (every probe)."""
        if self._down_since is None:
            return True
        now = time.monotonic_ns()
        with self._health_mu:
            if now - self._last_try_ns < self._probe_ns:
                return False
            self._last_try_ns = now
            return True

    def _guarded(self, call: Any, fb_call: Any, *args: Any) -> "_native.Decision":
        if self._fallback is not None and not self._should_try():
            with self._health_mu:
                self._counts["fallback_decisions"] += 1
            return fb_call(*args)
        d = call(*args)
        err = d.error
        if err is None and self._down_since is None:
            return d
        self._note(err)
        if err is not None and self._fallback is not None:
            with self._health_mu:
                self._last_try_ns = time.monotonic_ns()
                self._counts["fallback_decisions"] += 1
            return fb_call(*args)
        return d

    def _guarded_hit(self, key: Key, cost: int = 1,
                     now_ns: Optional[int] = None) -> "_native.Decision":
        return self._guarded(super().hit, self._fallback.hit if self._fallback else None,
                             key, cost, now_ns)

    def _guarded_multi(self, items: Sequence[Tuple[Any, ...]],
                       now_ns: Optional[int] = None) -> "_native.Decision":
        """multi(), its failures noted; with a fallback, while the store is down each item is
        decided in its limiter's fallback in turn (not all-or-nothing: the fallbacks are
        separate in-process stores), stopping at the first refusal."""
        d = super().multi(items, now_ns)
        if d.error is None and self._down_since is None:
            return d
        self._note(d.error)
        if d.error is None or self._fallback is None:
            return d
        for item in items:
            lim, key, cost = (self, item[0], item[1]) if len(item) == 2 else item
            fb = getattr(lim, "_fallback", None) or lim
            with self._health_mu:
                self._counts["fallback_decisions"] += 1
            d = fb.hit(key, cost, now_ns)
            if not d.allowed:
                break
        return d

    def _guarded_peek(self, key: Key, now_ns: Optional[int] = None) -> "_native.Decision":
        return self._guarded(super().peek, self._fallback.peek if self._fallback else None,
                             key, now_ns)

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
