"""Type stubs of libratelimit._native, the C extension (the public names are re-exported by
libratelimit)."""
from typing import Dict, Optional, Sequence, Tuple, Union

Key = Union[str, bytes]

KEY_MAX: int
HDR_RETRY_AFTER: int
HDR_IETF: int
HDR_LEGACY: int
HDR_X: int

class BackendError(RuntimeError):
    """Redis or the ratelimitd could not answer."""

class StoreFullError(RuntimeError):
    """A fail-closed store at its cap refused a new key, or the reservation table is full."""

def addr_key(addr: str, prefix: int = ...) -> str: ...
def format_policy(text: str) -> str:
    """The canonical form of policy text in ratelimit's notation; ValueError if invalid."""

class Decision:
    """The answer to one request."""
    @property
    def allowed(self) -> bool: ...
    @property
    def limit(self) -> int: ...
    @property
    def remaining(self) -> int: ...
    @property
    def retry_after(self) -> float: ...
    @property
    def reset_after(self) -> float: ...
    @property
    def delay(self) -> float: ...
    @property
    def retry_after_ns(self) -> int: ...
    @property
    def reset_after_ns(self) -> int: ...
    @property
    def delay_ns(self) -> int: ...
    @property
    def lease(self) -> int: ...
    @property
    def reservation(self) -> int: ...
    @property
    def refused(self) -> Optional[int]: ...
    @property
    def error(self) -> Optional[str]: ...
    @property
    def policy(self) -> str: ...
    def headers(self, which: int = ...) -> Dict[str, str]:
        """RateLimit-Policy, RateLimit and (denied) Retry-After, as the C library writes them."""
    def __bool__(self) -> bool: ...

class Store:
    """Where limiter state lives."""
    def __init__(self, kind: str, **options: object) -> None: ...
    @property
    def kind(self) -> str: ...
    def stats(self) -> Dict[str, int]:
        """The store's counters."""

class Limiter:
    """The C limiter; use libratelimit.Limiter."""
    def __init__(self, policies: Union[str, Sequence[str]], store: Store, *,
                 name: Optional[str] = ..., fail_open: bool = ...,
                 reservation_timeout_ns: int = ...) -> None: ...
    @property
    def policies(self) -> Tuple[str, ...]: ...
    @property
    def store(self) -> Store: ...
    @property
    def name(self) -> str: ...
    def hit(self, key: Key, cost: int = 1, now_ns: Optional[int] = None) -> Decision:
        """Decides one request of `cost` for `key`; charges it when allowed."""
    def peek(self, key: Key, now_ns: Optional[int] = None) -> Decision:
        """What a cost-1 request would get; charges nothing."""
    def reset(self, key: Key) -> None:
        """Forgets `key`."""
    def multi(self, items: Sequence[Union[Tuple[Key, int], Tuple["Limiter", Key, int]]],
              now_ns: Optional[int] = None) -> Decision:
        """All-or-nothing over several limits."""
    def _acquire(self, key: Key, now_ns: Optional[int] = None) -> Decision: ...
    def release(self, key: Key, lease: int, now_ns: Optional[int] = None) -> bool:
        """Gives a concurrency lease back."""
    def reserve(self, key: Key, estimate: int, timeout_ns: Optional[int] = None,
                now_ns: Optional[int] = None) -> Decision:
        """Charge after the response: reserves `estimate`."""
    def settle(self, key: Key, reservation: int, real_cost: int,
               now_ns: Optional[int] = None) -> Decision:
        """Settles a reservation at its real cost."""
