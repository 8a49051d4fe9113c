"""limits' storage names over libratelimit's stores: ``storage_from_string(url)``,
``MemoryStorage()``, ``RedisStorage(url)``.  They return libratelimit Stores (in-process,
Redis, a ratelimitd), which the strategies of libratelimit.limits decide with."""
from typing import Any

from ..stores import MemoryStore, RedisStore, Store, store_from_url

__all__ = ["storage_from_string", "MemoryStorage", "RedisStorage", "Storage"]

Storage = Store


def storage_from_string(storage_string: str, **options: Any) -> Store:
    """The store a URL names: ``memory://``, ``redis://[:password@]host:port``,
    ``redis+cluster://h:p,h:p``, ``redis+sentinel://h:p/master``, ``ratelimitd://host:port``
    (query options ``prefix``, ``timeout``, ``engine``: see libratelimit.store_from_url).
    ConfigurationError (a ValueError) for a URL naming no store of ours; keyword options
    (limits passes them to its storage class) are refused with TypeError."""
    from . import ConfigurationError
    if options:
        raise TypeError("storage options are not supported (%s): give them in the URL's query "
                        "(prefix, timeout, engine)" % ", ".join(sorted(options)))
    try:
        return store_from_url(storage_string)
    except ValueError as e:
        raise ConfigurationError(str(e)) from e


def MemoryStorage() -> MemoryStore:  # noqa: N802  (limits' class name)
    """A new in-process store (libratelimit's MemoryStore)."""
    return MemoryStore()


def RedisStorage(uri: str) -> Store:  # noqa: N802  (limits' class name)
    """A Redis store from a ``redis://`` (or ``redis+cluster://``, ``redis+sentinel://``) URL."""
    s = storage_from_string(uri)
    if not isinstance(s, RedisStore):
        raise ValueError("RedisStorage needs a redis URL, not %r" % (uri,))
    return s
