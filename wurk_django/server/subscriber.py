"""The process's one subscribed connection: push-watch notices, schedule wake-ups and revokes share it.

Why one: a connection that has subscribed can do nothing else (RESP2), and every
connection is a client Redis carries. A worker listens on three channels:
``__redis__:invalidate``, where Redis's key tracking says a watched queue was written
(push_watch.py), ``wake-schedule:<db>``, where pushes into the retry and schedule
sets announce their earliest due time (scheduler.py), and ``wurk-revoke:<db>``,
where a revoke announces itself (stopping/revoke_channel.py). The first two used to
hold a connection each; one per process and Redis serves all, so an idle ``-c 1``
worker holds two connections in all, this one and its pool's one, as many as an
idle Sidekiq.

Contract: :meth:`Subscriber.listen` adds a channel with three callbacks, all called on
the subscriber's own thread, which must not wait on Redis: ``on_message(data)`` for each
message, ``on_change(up, client_id)`` each time the subscription is made or lost (a
listener added later is told the current state at once, from the calling thread), and
``on_tick()`` about once a ``TICK`` (the push watch checks its armed connections there).
``client_id`` is the connection's ``CLIENT ID``, for ``CLIENT TRACKING ... REDIRECT``;
None where Redis refuses ``CLIENT`` (a listener of the tracking channel then knows
tracking cannot work here, while the other channels still do).

While idle nothing is sent: the thread looks at its socket locally once a ``TICK``. A
dropped connection, a Redis restart, a ``CLIENT KILL`` or a Sentinel failover (seen
locally through :func:`wurk_django.redis.sentinel.follow_primary`) ends the subscription: every
listener hears ``on_change(False, None)``, and the thread dials again every
``RETRY_SECONDS`` until it can. The thread ends once the last listener has left.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis as redis_lib

from ..conf import Config
from ..redis import pools, sentinel
from ..redis.connection import disconnect_quietly, get_redis
from .threads import spawn

logger = logging.getLogger("wurk_django.worker")

#: Seconds between the thread's local looks at its socket (no Redis command).
TICK = 1.0
#: Seconds between two attempts to dial again after the connection was lost.
RETRY_SECONDS = 1.0


class _Redialed(redis_lib.ConnectionError):
    """The subscribed connection dialed again on its own: its subscriptions are gone."""


@dataclass(eq=False)
class _Listener:
    channel: str
    on_message: Callable[[Any], None]
    on_change: Callable[[bool, int | None], None] | None
    on_tick: Callable[[], None] | None


class Subscriber:
    """One subscribed connection for every listener of a process on one Redis."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._listeners: list[_Listener] = []
        self._conn: Any = None
        self._subscribed: set[str] = set()
        self._client_id: int | None = None
        self._up = False
        self._thread: threading.Thread | None = None
        self._redial = False
        self._ticked = 0.0

    # -- listeners -------------------------------------------------------------

    def listen(self, channel: str, on_message: Callable[[Any], None],
               on_change: Callable[[bool, int | None], None] | None = None,
               on_tick: Callable[[], None] | None = None) -> _Listener:
        """Hear ``channel``; returns the handle :meth:`leave` takes. Starts the thread."""
        listener = _Listener(channel, on_message, on_change, on_tick)
        with self._lock:
            self._listeners.append(listener)
            # Read with the append, in one section: the thread tells the listeners it finds in
            # the list when it marks a channel subscribed, so each is told exactly once.
            up, client_id = self._up and channel in self._subscribed, self._client_id
            if self._thread is None:
                self._thread = spawn("redis-subscriber", self._run)
        if up and on_change is not None:
            on_change(True, client_id)
        return listener

    def leave(self, listener: _Listener) -> None:
        """Stop hearing ``listener``'s channel; the thread ends with the last one (within a ``TICK``)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def redial(self) -> None:
        """Drop the connection at the next look and dial again: a listener found it stale
        (a ``CLIENT TRACKING`` redirect to its id was refused: it is on another server)."""
        self._redial = True

    @property
    def client_id(self) -> int | None:
        return self._client_id if self._up else None

    # -- the thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                listeners = list(self._listeners)
                if not listeners:
                    # Cleared under the lock: a listener arriving now starts a new thread,
                    # which dials its own connection.
                    conn, self._conn, self._client_id, self._up = self._conn, None, None, False
                    self._subscribed = set()
                    self._thread = None
                    break
            try:
                conn = self._conn or self._dial(listeners)
                self._catch_up(conn, listeners)
                if self._redial:
                    self._redial = False
                    raise redis_lib.ConnectionError("a listener found the subscription stale")
                # A subscribed connection sends no command: after a Sentinel failover it
                # would stay on the demoted primary. Dropped here, the next read raises.
                sentinel.follow_primary(conn)
                if conn.can_read(timeout=TICK):
                    self._dispatch(conn.read_response())
            except Exception as exc:
                self._lose(exc)
                time.sleep(RETRY_SECONDS)
                continue
            now = time.monotonic()
            if now - self._ticked >= TICK:
                self._ticked = now
                for listener in listeners:
                    if listener.on_tick is not None:
                        _call(listener.on_tick)
        disconnect_quietly(conn)

    def _dial(self, listeners: list[_Listener]) -> Any:
        conn = pools.new_connection(get_redis("watch", pool_size=2, config=self.config).connection_pool)
        try:
            conn.connect()
            conn.send_command("CLIENT", "ID")
            try:
                client_id: int | None = int(conn.read_response())
            except redis_lib.ResponseError:
                client_id = None  # CLIENT refused (renamed away): no tracking, channels still work
            channels = sorted({listener.channel for listener in listeners})
            conn.send_command("SUBSCRIBE", *channels)
            for _ in channels:
                conn.read_response()
        except BaseException:
            disconnect_quietly(conn)
            raise
        # From now on a connection that dials again has lost its subscriptions.
        conn.register_connect_callback(self._redialed)
        with self._lock:
            self._conn, self._client_id, self._up = conn, client_id, True
            self._subscribed = set(channels)
            told = self._on_channels(self._subscribed)
        for listener in told:
            _call(listener.on_change, True, client_id)
        return conn

    def _catch_up(self, conn: Any, listeners: list[_Listener]) -> None:
        """Subscribe the channels listeners added since the connection was made."""
        missing = sorted({listener.channel for listener in listeners} - self._subscribed)
        if not missing:
            return
        conn.send_command("SUBSCRIBE", *missing)
        # The confirmations arrive in order with any message: the read loop skips them.
        with self._lock:
            self._subscribed.update(missing)
            told, client_id = self._on_channels(set(missing)), self._client_id
        for listener in told:
            _call(listener.on_change, True, client_id)

    def _on_channels(self, channels: set[str]) -> list[_Listener]:
        """The listeners to tell the subscription is up on ``channels``; called holding the
        lock, in the same section that marks them subscribed. Read from the list as it is
        then, not from the thread's copy: one added since the copy saw the channel down
        in listen() and was not told, and one added after this section tells itself."""
        return [listener for listener in self._listeners
                if listener.channel in channels and listener.on_change is not None]

    def _redialed(self, conn: Any) -> None:
        raise _Redialed("the subscribed connection dialed again")

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, list) or len(message) < 3 or message[0] != b"message":
            return  # a subscribe confirmation
        channel = message[1].decode() if isinstance(message[1], bytes) else str(message[1])
        # The listeners as they are now, not as they were when the wait began: one added
        # during the wait was already told the subscription is up, so it hears this too.
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            if listener.channel == channel:
                _call(listener.on_message, message[2])

    def _lose(self, why: object) -> None:
        with self._lock:
            conn, was_up = self._conn, self._up
            self._conn, self._client_id, self._up = None, None, False
            # Those on a subscribed channel: each was told it is up, by the thread or by listen().
            told = self._on_channels(self._subscribed) if was_up else []
            self._subscribed = set()
        disconnect_quietly(conn)
        if was_up:
            logger.debug("redis subscriber lost (%s); dialing again every %gs", why, RETRY_SECONDS)
            for listener in told:
                _call(listener.on_change, False, None)
        else:
            logger.debug("redis subscriber could not dial (%s); trying again in %gs", why, RETRY_SECONDS)


def _call(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:  # a listener's mistake must not end everybody's subscription
        logger.exception("a redis subscriber callback failed")


_registry: dict[tuple[int, str], Subscriber] = {}
_registry_lock = threading.Lock()


def for_config(config: Config) -> Subscriber:
    """This process's subscriber for ``config``'s Redis (a shard's worker gets its shard's)."""
    key = (os.getpid(), config.redis_target.identity)
    found = _registry.get(key)
    if found is None:
        with _registry_lock:
            found = _registry.get(key)
            if found is None:
                if any(pid != key[0] for pid, _ in _registry):
                    # Forked: the parent's threads and sockets are not ours.
                    for stale in [k for k in _registry if k[0] != key[0]]:
                        del _registry[stale]
                found = _registry[key] = Subscriber(config)
    return found
