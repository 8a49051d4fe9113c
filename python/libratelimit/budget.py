"""One reservation over several limits (docs/llm.md): a user's tokens, an organisation's
money budget and a model's output tokens reserved at once, all or nothing, then settled once
with the real usage, each limit charged its own cost by its integer weighting.  The same on
every store (in-process, Redis, ratelimitd); every limit's Limiter on one store, each of one
policy that can settle.

    user = Limiter("fixed_window:100000/1d", store)
    usd = Limiter("fixed_window:100000000/1mo,tz=Europe/Paris", store)
    r = reserve_limits([(user, "user:bob", "in+cached+out"),
                        (usd, "org:acme", "in*3+out*15+cached*1")], {"in": 1200, "out": 4096})
    if r.allowed:
        ...                                   # call the model
        r.settle({"in": 1000, "cached": 200, "out": 350})
"""
import asyncio
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native

__all__ = ["Reservation", "Settled", "reserve_limits", "usage_text"]

UsageLike = Union[None, str, Mapping[str, int]]


def usage_text(usage: UsageLike) -> str:
    """A usage as the C parser reads it: "in=1200,out=4096" ("-" for none)."""
    if usage is None:
        return "-"
    if isinstance(usage, str):
        return usage
    for k, v in usage.items():
        if not isinstance(k, str) or not isinstance(v, int) or isinstance(v, bool):
            raise ValueError("a usage maps names to int counts: %r" % (usage,))
    return ",".join("%s=%d" % (k, v) for k, v in usage.items()) or "-"


class Settled:
    """What a settle left: each limit's Decision (a peek after it) and what it charged beyond
    what the reservation held."""

    def __init__(self, decisions: List["_native.Decision"], charged: List[int]) -> None:
        self.limits = decisions
        self.charged = charged

    def __repr__(self) -> str:
        return "Settled(remaining=%r, charged=%r)" % ([d.remaining for d in self.limits],
                                                       self.charged)


class Reservation:
    """A reserve_limits() answer: allowed (then ``id`` is non-zero), ``refused`` (the index of
    the first limit that refused, else -1), ``limits`` (each limit's Decision).  settle() it
    exactly once (partial=True for a streamed chunk, then a final one)."""

    def __init__(self, limits: Sequence[Tuple[Any, Any, str]], rid: int, refused: int,
                 decisions: List["_native.Decision"]) -> None:
        self._keys = [(lim, key) for lim, key, _ in limits]
        self.id = rid
        self.refused = refused
        self.limits = decisions
        self.allowed = rid != 0

    @property
    def decision(self) -> "_native.Decision":
        """The Decision to answer with: the refusing limit's, else the one with least left."""
        if self.refused >= 0:
            return self.limits[self.refused]
        return min(self.limits, key=lambda d: d.remaining)

    def settle(self, usage: UsageLike, partial: bool = False,
               now_ns: Optional[int] = None) -> Settled:
        """Charges each limit its cost of ``usage`` (a dict or "in=..,out=.."); KeyError when
        the reservation is unknown (settled, expired, never made)."""
        if not self.id:
            raise ValueError("a denied reservation has nothing to settle")
        d, charged = _native.settle_limits(self.id, self._keys, usage_text(usage), not partial,
                                           now_ns)
        return Settled(d, charged)

    async def asettle(self, usage: UsageLike, partial: bool = False,
                      now_ns: Optional[int] = None) -> Settled:
        """``await``-able settle() (a worker thread: the store call may wait on the network)."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.settle(usage, partial, now_ns))

    def __repr__(self) -> str:
        return "Reservation(allowed=%r, id=%016x, refused=%d)" % (self.allowed, self.id,
                                                                 self.refused)


def reserve_limits(limits: Sequence[Tuple[Any, Any, str]], estimate: UsageLike,
                   timeout_ns: Optional[int] = None, now_ns: Optional[int] = None) -> Reservation:
    """Reserves ``estimate`` (typically the prompt's tokens as ``in`` and max_tokens as
    ``out``) on 1..16 (Limiter, key, weighting) limits at once, all or nothing.  Denied:
    nothing charged.  An unsettled reservation expires after ``timeout_ns`` (default: the
    first Limiter's reservation timeout) charged as estimated."""
    limits = list(limits)
    rid, refused, decisions = _native.reserve_limits(limits, usage_text(estimate), timeout_ns,
                                                     now_ns)
    return Reservation(limits, rid, refused, decisions)


async def areserve_limits(limits: Sequence[Tuple[Any, Any, str]], estimate: UsageLike,
                          timeout_ns: Optional[int] = None) -> Reservation:
    """``await``-able reserve_limits()."""
    return await asyncio.get_running_loop().run_in_executor(
        None, lambda: reserve_limits(limits, estimate, timeout_ns))


__all__.append("areserve_limits")
