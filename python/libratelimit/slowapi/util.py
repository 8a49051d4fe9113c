"""slowapi's key function, under the name its users import."""
from starlette.requests import Request

__all__ = ["get_remote_address"]


def get_remote_address(request: Request) -> str:
    """The client address (request.client, as the server or a trusted proxy middleware set
    it), "127.0.0.1" when there is none: slowapi's key function of the same name."""
    return request.client.host if request.client else "127.0.0.1"
