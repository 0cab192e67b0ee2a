"""redis-py's pools, as wurk uses them: the one module besides :mod:`wire` that reaches
into their undocumented parts.

wurk builds its pools with redis-py's public constructors and checks connections out
and in with ``get_connection`` / ``release``. A few things it needs have no public
call: the options a pool gives its connections (``connection_kwargs``: the database a
client talks to, its protocol), a connection made outside the pool's count
(``make_connection``, for the subscription and the push watch), the queue of free
connections of a ``BlockingConnectionPool`` (the idle trim), the class a pool makes
its connections from, and, for Sentinel, the primary address a pool last heard
(``proxy.master_address``). Each reach is one function here with a plain answer when
redis-py no longer has the part: the database asked of the server, a checked-out
connection, nothing trimmed, the class left as it is. So a redis-py release that moves
one of them breaks this file (and tests/redis/test_pools.py), not the callers.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Callable
from typing import Any

Address = tuple[str, int]


# -- what a pool gives its connections ---------------------------------------------------------

def options_of(pool: Any) -> dict[str, Any]:
    """The options ``pool`` builds its connections with (host, port, path, db, protocol,
    encoding...), or ``{}`` when it does not say."""
    options = getattr(pool, "connection_kwargs", None)
    return options if isinstance(options, dict) else {}


def database_of(client: Any) -> int:
    """The database number ``client`` talks to: from its pool's options, else asked of
    the server (``CLIENT INFO``, one round trip)."""
    options = getattr(client.connection_pool, "connection_kwargs", None)
    if isinstance(options, dict):  # once per push: no more than a look at the pool's options
        return int(options.get("db") or 0)
    return int(client.client_info().get("db", 0) or 0)


def server_of(client: Any) -> tuple[Any, ...]:
    """What tells ``client``'s server from another's: host, port, socket path, database
    and Sentinel service, as far as its pool's options say (all None and 0 when they do not)."""
    options = options_of(getattr(client, "connection_pool", None))
    return (options.get("host"), options.get("port"), options.get("path"), options.get("db", 0),
            options.get("service_name"))


def protocol_of(pool: Any) -> Any:
    """The protocol ``pool``'s connections speak: the one its options name, else the one a
    connection object built from them has (it does not connect: redis-py's own default
    answers, 2 up to redis-py 7 and 3 from 8); None when neither can be told."""
    options = options_of(pool)
    protocol = options.get("protocol")
    if protocol is not None:
        return protocol
    make = getattr(pool, "connection_class", None)
    if make is None:
        return None
    try:
        return getattr(make(**options), "protocol", 2)
    except Exception:  # a pool whose connections cannot be built idle: leave it to redis-py
        return None


def caches_replies(pool: Any) -> bool:
    """Whether ``pool`` answers some reads from redis-py's client-side cache (``cache_config``)."""
    return getattr(pool, "cache", None) is not None


# -- connections outside the pool's count ------------------------------------------------------

def new_connection(pool: Any) -> Any:
    """A connection built with ``pool``'s options that its owner keeps (and closes) itself,
    not yet connected. Where redis-py has no ``make_connection`` it is checked out of the
    pool instead and never given back: the pool then has one fewer to lend."""
    make = getattr(pool, "make_connection", None)
    if make is not None:
        return make()
    return pool.get_connection()


# -- the classes a pool is made of -------------------------------------------------------------

def wrap_connections(pool: Any, wrap: Callable[[type], type]) -> None:
    """Make ``pool``'s new connections from ``wrap(its connection class)``; nothing
    changes on a pool that does not say which class it uses."""
    cls = getattr(pool, "connection_class", None)
    if isinstance(cls, type):
        pool.connection_class = wrap(cls)


def set_class(pool: Any, cls: type) -> None:
    """Give ``pool`` the subclass ``cls`` of its class (one wurk built for it)."""
    if issubclass(cls, type(pool)):
        pool.__class__ = cls


def built_here(pool: Any) -> bool:
    """False when ``pool`` was built by another process (a forked child's parent): its
    connections are not this process's to close. True when it cannot be told."""
    return getattr(pool, "pid", None) in (None, os.getpid())


# -- the free connections of a BlockingConnectionPool ------------------------------------------

def _free_queue(pool: Any) -> Any:
    waiting = getattr(pool, "pool", None)  # a BlockingConnectionPool's queue of free connections
    return waiting if hasattr(waiting, "get_nowait") and hasattr(waiting, "put_nowait") else None


def take_free(pool: Any) -> list[Any] | None:
    """Every slot of ``pool``'s free queue, top (the most recently released) first: a
    connection, or None for one not made yet. None when the pool keeps no such queue
    (not a ``BlockingConnectionPool``, or a redis-py that moved it): then nothing is
    taken. Give them back with :func:`put_free`."""
    waiting = _free_queue(pool)
    if waiting is None:
        return None
    taken: list[Any] = []
    while True:
        try:
            taken.append(waiting.get_nowait())
        except queue.Empty:
            return taken


def put_free(pool: Any, slots: list[Any]) -> None:
    """Put back what :func:`take_free` took, bottom first (so the last one ends on top)."""
    waiting = _free_queue(pool)
    for slot in slots:
        waiting.put_nowait(slot)


def free_connections(pool: Any) -> list[Any]:
    """The connections ``pool`` holds free right now (a snapshot; none when it cannot be told)."""
    waiting = _free_queue(pool)
    items = getattr(waiting, "queue", None)
    return [conn for conn in list(items or ()) if conn is not None]


# -- Sentinel: the primary a pool last heard of ------------------------------------------------

def _proxy(pool: Any) -> Any:
    # redis-py 5.1 on keeps the address on a proxy its connections share with the pool.
    return getattr(pool, "proxy", pool)


def heard_primary(pool: Any) -> Address | None:
    """The primary address a Sentinel pool last heard of (None: none, or not a Sentinel pool)."""
    return getattr(_proxy(pool), "master_address", None)


def hear_primary(pool: Any, address: Address | None) -> None:
    """Make ``address`` the primary a Sentinel pool's connections dial and are checked against."""
    _proxy(pool).master_address = address


def sentinel_primary(conn: Any) -> Any:
    """The Sentinel side of ``conn`` when it is a connection to a service's primary, as
    :class:`SentinelSide`; None for any other connection."""
    proxy = getattr(conn, "connection_pool", None)
    if proxy is None or not getattr(proxy, "is_master", False):
        return None
    return SentinelSide(proxy)


class SentinelSide:
    """What a Sentinel-managed connection's pool knows: the service, the sentinels asked
    about it, and the primary address last heard."""

    __slots__ = ("_proxy",)

    def __init__(self, proxy: Any) -> None:
        self._proxy = proxy

    @property
    def service(self) -> str:
        return str(getattr(self._proxy, "service_name", ""))

    @property
    def manager(self) -> Any:
        return getattr(self._proxy, "sentinel_manager", None)

    @property
    def primary(self) -> Address | None:
        return getattr(self._proxy, "master_address", None)
