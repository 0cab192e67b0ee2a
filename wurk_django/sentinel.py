"""Redis Sentinel: pools of connections to the primary the sentinels name, and a
watcher that moves them when the sentinels switch to another primary.

redis-py asks the sentinels for the primary's address only when a connection
dials. After a failover, connections that stay open keep talking to the old
primary, and the old primary keeps accepting writes until a sentinel demotes it
(seconds later): jobs pushed or fetched there in between are lost when it resyncs
from the new primary. So each process subscribes to the sentinels'
``+switch-master`` announcements (and asks again every few seconds, in case an
announcement is missed); the new address is recorded on every pool of that
service, and a connection whose address is not the primary's is closed the next
time it is checked out or used (:func:`follow_primary`), before it sends
anything. A connection that still meets a demoted primary gets ``READONLY`` and
is closed then (:func:`wurk_django.connection.send_on`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool

from . import wire
from .redis_target import RedisTarget

logger = logging.getLogger("wurk_django.redis")

#: Seconds between two direct questions to the sentinels when no announcement came.
RECHECK_INTERVAL = 5.0
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.5


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """A pool of connections to the primary a Redis Sentinel names, with the checkout
    timeout and fixed size of :class:`redis.BlockingConnectionPool`. Each new
    connection asks the sentinels for the primary's address."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        conn = super().get_connection(*args, **kwargs)
        follow_primary(conn)
        return conn

    def disconnect(self, inuse_connections: bool = True) -> None:
        if inuse_connections:
            redis.BlockingConnectionPool.disconnect(self)
            return
        # redis-py 5.x's BlockingConnectionPool.disconnect() has no inuse_connections argument.
        for conn in [c for c in list(self.pool.queue) if c is not None]:
            conn.disconnect()


def follow_primary(conn: Any) -> None:
    """Close ``conn`` if it is connected to another server than the primary its pool
    last heard of; it dials the primary on its next command. Free for other
    connection classes."""
    proxy = getattr(conn, "connection_pool", None)
    if proxy is None or not wire.maybe_connected(conn):
        return
    primary = getattr(proxy, "master_address", None)
    if primary is not None and proxy.is_master and (conn.host, conn.port) != primary:
        conn.disconnect()


_lock = threading.Lock()
_managers: dict[tuple[int, str], Sentinel] = {}
_pools: dict[str, weakref.WeakSet[BlockingSentinelPool]] = {}
_watchers: dict[tuple[int, str], threading.Thread] = {}


def sentinel_options(target: RedisTarget) -> dict[str, Any]:
    return {"socket_connect_timeout": CONNECT_TIMEOUT, "socket_timeout": READ_TIMEOUT, **target.sentinel_options}


def manager(target: RedisTarget) -> Sentinel:
    """This process's :class:`redis.sentinel.Sentinel` for ``target``'s sentinels."""
    key = (os.getpid(), target.identity)
    found = _managers.get(key)
    if found is None:
        with _lock:
            found = _managers.get(key)
            if found is None:
                found = _managers[key] = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_options(target))
    return found


def pool(target: RedisTarget, kwargs: dict[str, Any]) -> BlockingSentinelPool:
    """A new pool for ``target``'s primary, followed by this process's watcher."""
    built = BlockingSentinelPool(target.service, manager(target), **kwargs)
    with _lock:
        _pools.setdefault(target.identity, weakref.WeakSet()).add(built)
        key = (os.getpid(), target.identity)
        watcher = _watchers.get(key)
        if watcher is None or not watcher.is_alive():
            watcher = _watchers[key] = threading.Thread(target=_watch, args=(target,), daemon=True,
                                                        name=f"wurk-sentinel-{target.service}")
            watcher.start()
    return built


def _switch(target: RedisTarget, primary: tuple[str, int]) -> None:
    """Record ``primary`` on every pool of ``target`` and close their idle connections
    to any other server; busy ones are closed at their next use."""
    for each in list(_pools.get(target.identity, ())):
        if each.proxy.master_address != primary:
            if each.proxy.master_address is not None:
                logger.warning("Redis Sentinel: %s moved from %s:%s to %s:%s", target.service,
                               *each.proxy.master_address, *primary)
            each.proxy.master_address = primary
            each.disconnect(inuse_connections=False)


def _ask(target: RedisTarget) -> None:
    try:
        host, port = manager(target).discover_master(target.service)
    except redis.RedisError as exc:
        logger.warning("Redis Sentinel: no primary for %s: %s", target.service, exc)
        return
    _switch(target, (host, int(port)))


def _watch(target: RedisTarget) -> None:
    """Listen for ``+switch-master`` on one sentinel after another, forever."""
    pid = os.getpid()
    options = {**sentinel_options(target), "socket_timeout": None}
    while os.getpid() == pid:
        for host, port in target.sentinels:
            client = redis.Redis(host, port, **options)
            try:
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe("+switch-master")
                _ask(target)  # a switch may have happened while nobody listened
                last_check = time.monotonic()
                while True:
                    message = pubsub.get_message(timeout=RECHECK_INTERVAL)
                    if message is not None:
                        data = message["data"].decode() if isinstance(message["data"], bytes) else message["data"]
                        name, _old_host, _old_port, new_host, new_port = data.split()
                        if name == target.service:
                            _switch(target, (new_host, int(new_port)))
                    if time.monotonic() - last_check >= RECHECK_INTERVAL:
                        _ask(target)
                        last_check = time.monotonic()
            except (redis.RedisError, OSError, ValueError):
                pass  # this sentinel is gone or said something odd: try the next one
            finally:
                client.close()
        time.sleep(1.0)


def _after_fork_in_child() -> None:
    # Threads do not survive a fork: the child starts its own watcher with its first pool.
    _managers.clear()
    _watchers.clear()
    _pools.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
