"""slowapi's key function, under the name its users import."""
from starlette.requests import Request

from .._web import address_key

__all__ = ["get_remote_address"]


def get_remote_address(request: Request) -> str:
    """The client address (request.client, as the server or a trusted proxy middleware set
    it), "127.0.0.1" when there is none, as slowapi's function of the same name; but an IPv6
    address as its /56 and an IPv4-mapped one as IPv4 (docs/python.md, "Keys")."""
    return address_key(request.client.host if request.client else "127.0.0.1")[len("addr:"):]
