"""Flask-Limiter's key functions, under the names its users import."""
import flask

from .._web import address_key

__all__ = ["get_remote_address", "get_ipaddr"]


def get_remote_address() -> str:
    """The client address as Flask reports it (REMOTE_ADDR, or what a trusted ProxyFix set),
    "127.0.0.1" when there is none, as Flask-Limiter's function of the same name; but an IPv6
    address as its /56 and an IPv4-mapped one as IPv4 (docs/python.md, "Keys"), so a client
    cannot take a fresh count per address of its subnet."""
    return address_key(flask.request.remote_addr or "127.0.0.1")[len("addr:"):]


get_ipaddr = get_remote_address
