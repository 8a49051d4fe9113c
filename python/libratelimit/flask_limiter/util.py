"""Flask-Limiter's key functions, under the names its users import."""
import flask

__all__ = ["get_remote_address", "get_ipaddr"]


def get_remote_address() -> str:
    """The client address as Flask reports it (REMOTE_ADDR, or what a trusted ProxyFix set),
    "127.0.0.1" when there is none: Flask-Limiter's key function of the same name."""
    return flask.request.remote_addr or "127.0.0.1"


get_ipaddr = get_remote_address
