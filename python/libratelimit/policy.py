"""Policy text: ratelimit's notation ("gcra:100/1m,burst=20") and limits' ("100/minute",
"10 per second", "100/minute;1000/hour"), turned into ratelimit's policies."""
import re
from typing import List, Optional

from ._native import format_policy

ALGORITHMS = ("fixed_window", "sliding_log", "sliding_window", "token_bucket", "gcra",
              "leaky_bucket", "concurrency")

# limits' strategies (Flask-Limiter's RATELIMIT_STRATEGY) and the algorithm each becomes here.
STRATEGIES = {
    "fixed-window": "fixed_window",
    "fixed-window-elastic-expiry": "fixed_window",
    "moving-window": "sliding_log",
    "sliding-window-counter": "sliding_window",
}

# One item of limits' notation: "N / [K] unit" or "N per [K] unit", plural units allowed.
_ITEM = re.compile(r"^\s*([0-9]+)\s*(?:/|\s+per\s+)\s*([0-9]+)?\s*"
                   r"(second|minute|hour|day|month|year)s?\s*$", re.IGNORECASE)
# limits counts a month as 30 days and a year as 12 of those; so do we, for the same limits.
_UNIT = {"second": (1, "s"), "minute": (1, "m"), "hour": (1, "h"), "day": (1, "d"),
         "month": (30, "d"), "year": (360, "d")}
_OURS = re.compile(r"^\s*(%s)\s*:" % "|".join(ALGORITHMS))


def _algorithm(strategy: Optional[str]) -> str:
    if strategy is None:
        return "fixed_window"
    s = strategy.strip().lower()
    if s in STRATEGIES:
        return STRATEGIES[s]
    if s in ALGORITHMS:
        return s
    raise ValueError("unknown strategy %r: one of %s or an algorithm (%s)"
                     % (strategy, ", ".join(STRATEGIES), ", ".join(ALGORITHMS)))


def _limits_item(item: str, algo: str) -> str:
    m = _ITEM.match(item)
    if not m:
        raise ValueError("cannot parse rate limit %r: expected ratelimit's ALGORITHM:N/PERIOD "
                         "(e.g. gcra:100/1m) or limits' N/unit, N per K units (e.g. 100/minute)"
                         % item.strip())
    n, k, unit = m.group(1), int(m.group(2) or 1), m.group(3).lower()
    mult, u = _UNIT[unit]
    if k < 1:
        raise ValueError("rate limit %r: the period must be at least 1 %s" % (item.strip(), unit))
    return format_policy("%s:%s/%d%s" % (algo, n, k * mult, u))


def parse_policy(text: str, strategy: Optional[str] = None) -> List[str]:
    """Parses policy text into canonical ratelimit policies, one per limit.

    ``text`` is ratelimit's notation (``"gcra:100/1m,burst=20"``, every algorithm and option,
    several joined by ``;``) or limits' (``"100/minute"``, ``"10 per second"``,
    ``"100/minute;1000/hour"``, items joined by ``;``, ``,`` or ``|``), or a mix joined by
    ``;``.  limits' items become ``strategy``'s algorithm: ``fixed-window`` (the default, as in
    Flask-Limiter), ``moving-window`` (the exact sliding log), ``sliding-window-counter``, or
    any of ratelimit's algorithm names.  Raises ValueError (the C parser's message for our
    notation) or TypeError.
    """
    if not isinstance(text, str):
        raise TypeError("policy must be str, not %s" % type(text).__name__)
    algo = _algorithm(strategy)
    out: List[str] = []
    for part in text.split(";"):
        if not part.strip():
            raise ValueError("empty policy in %r" % text)
        if _OURS.match(part):
            out.append(format_policy(part.strip()))
        else:
            out.extend(_limits_item(item, algo) for item in re.split(r"[,|]", part))
    if len(out) > 16:
        raise ValueError("at most 16 policies in one limiter (%d given)" % len(out))
    return out
