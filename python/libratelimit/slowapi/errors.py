"""slowapi's exception, under the name its users import."""
from typing import Any

from starlette.exceptions import HTTPException

__all__ = ["RateLimitExceeded"]


class RateLimitExceeded(HTTPException):
    """A breached limit: an HTTP 429 whose ``detail`` is the limit's text (or its
    error_message) and ``decision`` libratelimit's denied Decision (Retry-After in
    ``headers``)."""

    def __init__(self, detail: str, decision: Any) -> None:
        super().__init__(429, detail, headers=decision.headers())
        self.decision = decision
        self.limit = detail
