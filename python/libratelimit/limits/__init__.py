"""limits' API (its names and meanings) over libratelimit: code written for limits runs with
only its import lines changed,

    from libratelimit.limits import storage, strategies, parse    # was: from limits import ...

``parse``, ``parse_many``, ``RateLimitItem`` and its ``PerSecond`` .. ``PerYear`` classes,
``storage_from_string`` / ``storage.MemoryStorage`` / ``storage.RedisStorage``, and the
strategies ``FixedWindowRateLimiter``, ``MovingWindowRateLimiter`` (ratelimit's exact sliding
log) and ``SlidingWindowCounterRateLimiter`` (its sliding window counter) with ``hit``, ``test``
(charges nothing), ``get_window_stats`` (a ``WindowStats``) and ``clear``.  Every decision is the
C library's, exact; what differs from limits is in docs/python.md."""
import re
from functools import total_ordering
from typing import Dict, List, NamedTuple, Optional, Type, Union

__all__ = ["RateLimitItem", "RateLimitItemPerYear", "RateLimitItemPerMonth",
           "RateLimitItemPerDay", "RateLimitItemPerHour", "RateLimitItemPerMinute",
           "RateLimitItemPerSecond", "Granularity", "WindowStats", "ConfigurationError",
           "parse", "parse_many", "storage_from_string", "storage", "strategies",
           "FixedWindowRateLimiter", "MovingWindowRateLimiter",
           "SlidingWindowCounterRateLimiter"]


class Granularity(NamedTuple):
    """A limit's unit: its length in seconds and its name."""
    seconds: int
    name: str


class WindowStats(NamedTuple):
    """What ``get_window_stats`` returns: ``reset_time`` (Unix seconds, a float: when the count
    is back to the whole amount) and ``remaining`` (how many cost-1 hits would be allowed now)."""
    reset_time: float
    remaining: int


class ConfigurationError(ValueError):
    """A storage URL that names no store of ours (limits' ``ConfigurationError``; here also a
    ValueError)."""


_DAY = 86400
GRANULARITIES: Dict[str, Type["RateLimitItem"]] = {}


def _text(value: Union[str, bytes, int]) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@total_ordering
class RateLimitItem:
    """One limit: ``amount`` per ``multiples`` of the class's GRANULARITY (``namespace`` starts
    its ``key_for``).  Use a subclass (``RateLimitItemPerMinute(10)``) or ``parse("10/minute")``.
    """

    __slots__ = ("namespace", "amount", "multiples")
    GRANULARITY: Granularity

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if "GRANULARITY" in cls.__dict__:
            GRANULARITIES[cls.GRANULARITY.name] = cls

    def __init__(self, amount: int, multiples: Optional[int] = 1,
                 namespace: str = "LIMITER") -> None:
        self.namespace = namespace
        self.amount = int(amount)
        self.multiples = int(multiples or 1)

    @classmethod
    def check_granularity_string(cls, granularity_string: str) -> bool:
        """Whether ``granularity_string`` ("minute", "minutes"...) names this class's unit."""
        return granularity_string.lower() in cls.GRANULARITY.name

    def get_expiry(self) -> int:
        """The window's length in seconds."""
        return self.GRANULARITY.seconds * self.multiples

    def key_for(self, *identifiers: Union[str, bytes, int]) -> str:
        """limits' key text: ``namespace/identifiers.../amount/multiples/granularity``.  (The
        strategies store under a key of their own that no other item or identifiers share.)"""
        parts = [_text(i) for i in identifiers]
        parts += [str(self.amount), str(self.multiples), self.GRANULARITY.name]
        return self.namespace + "/" + "/".join(parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RateLimitItem):
            return False
        return (self.amount, self.multiples, self.GRANULARITY) == \
            (other.amount, other.multiples, other.GRANULARITY)

    def __lt__(self, other: "RateLimitItem") -> bool:
        return self.GRANULARITY.seconds < other.GRANULARITY.seconds

    def __hash__(self) -> int:
        return hash((self.namespace, self.amount, self.multiples, self.GRANULARITY))

    def __repr__(self) -> str:
        return "%d per %d %s" % (self.amount, self.multiples, self.GRANULARITY.name)


class RateLimitItemPerYear(RateLimitItem):
    """Per year: 12 months of 30 days, as limits counts it."""
    GRANULARITY = Granularity(360 * _DAY, "year")


class RateLimitItemPerMonth(RateLimitItem):
    """Per month: 30 days, as limits counts it."""
    GRANULARITY = Granularity(30 * _DAY, "month")


class RateLimitItemPerDay(RateLimitItem):
    """Per day."""
    GRANULARITY = Granularity(_DAY, "day")


class RateLimitItemPerHour(RateLimitItem):
    """Per hour."""
    GRANULARITY = Granularity(3600, "hour")


class RateLimitItemPerMinute(RateLimitItem):
    """Per minute."""
    GRANULARITY = Granularity(60, "minute")


class RateLimitItemPerSecond(RateLimitItem):
    """Per second."""
    GRANULARITY = Granularity(1, "second")


# "N/unit", "N per unit", "N/K units", "N per K units"; items joined by , ; or |.
_ONE = r"\s*([0-9]+)\s*(?:/|per)\s*([0-9]+)?\s*(second|minute|hour|day|month|year)s?\s*"
_ONE_RE = re.compile("^" + _ONE + "$", re.IGNORECASE)
_MANY_RE = re.compile("^%s(?:[,;|]%s)*$" % (_ONE, _ONE), re.IGNORECASE)


def parse_many(limit_string: str) -> List[RateLimitItem]:
    """The limits of ``"10/hour;100/day, 500 per 7 days"`` (separators ``,`` ``;`` ``|``);
    ValueError for anything else."""
    if not isinstance(limit_string, str) or not _MANY_RE.match(limit_string):
        raise ValueError("couldn't parse rate limit string %r" % (limit_string,))
    out = []
    for part in re.split(r"[,;|]", limit_string):
        m = _ONE_RE.match(part)
        assert m is not None
        amount, multiples, unit = m.groups()
        out.append(GRANULARITIES[unit.lower()](int(amount), int(multiples) if multiples
                                               else None))
    return out


def parse(limit_string: str) -> RateLimitItem:
    """The first limit of ``limit_string`` (``"1/minute"``, ``"5 per 2 hours"``); ValueError
    for malformed text."""
    return parse_many(limit_string)[0]


from . import storage, strategies  # noqa: E402  (they use the names above)
from .storage import storage_from_string  # noqa: E402
from .strategies import (FixedWindowRateLimiter, MovingWindowRateLimiter,  # noqa: E402
                         SlidingWindowCounterRateLimiter)
