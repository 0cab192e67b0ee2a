"""Redis Sentinel: pools of connections to the primary the sentinels name, and
watchers that move them as soon as a failover shows.

redis-py asks the sentinels for the primary's address only when a connection
dials. After a failover, connections that stay open keep talking to the old
primary, and the old primary keeps accepting writes until a sentinel demotes it
(about ten seconds later): jobs pushed or fetched there in between are lost, or
run twice, when it resyncs from the new primary. The sentinels' own
``+switch-master`` comes late too: the sentinel leading the failover announces it
only once the other replicas follow the new primary (a second or more after the
promotion, up to ``failover-timeout``). So each process listens to every
sentinel (the leader of a failover is any one of them) and acts on three events:

* ``+failover-state-send-slaveof-noone``: the leader is about to promote a
  replica. The old primary is *fenced*: connections to it are closed before they
  send anything more, and no new one is made to it, until the new primary is
  known or ``FENCE_SECONDS`` pass (``-failover-abort-*`` lifts it at once). A push
  meanwhile waits in the push buffer, a worker's fetch waits as in an outage;
* ``+promoted-slave``: the leader saw the replica answer as a primary. Every pool
  of the service moves to it, and while the sentinels still name the old primary
  (until they announce the switch) a new connection dials the new one instead;
* ``+switch-master``, from every sentinel: the sentinels are asked again (the
  fallback when the leader's events were missed). Every sentinel is asked, and
  the answer with the newest configuration epoch wins: one that did not lead
  learns of a failover seconds later, so its announcement may come late.

Each watcher also asks the sentinels every ``RECHECK_INTERVAL`` seconds, in case
all of that was missed. A connection to another server than the primary its
pool last heard of is closed the next time it is checked out or used
(:func:`follow_primary`), and each new connection asks the server its ``ROLE``
before it is used: one that answers as a replica is refused (a demoted primary
the sentinels still name). A connection that still meets a demoted or isolated
primary gets ``READONLY`` or ``NOREPLICAS`` and is closed then
(:func:`wurk_django.redis.connection.send_on`).

This process cannot fence what it does not hear: another client of the same
Redis, or a primary cut off from the sentinels together with some clients, is
bounded only by the server's own ``min-replicas-to-write`` (docs/redis.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from typing import Any

import redis
from redis.sentinel import (
    MasterNotFoundError,
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)

from ..text import to_text
from . import pools, wire
from .targets import RedisTarget

logger = logging.getLogger("wurk_django.redis")

#: Seconds between two direct questions to the sentinels when no announcement came.
RECHECK_INTERVAL = 5.0
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.5
#: Longest a primary stays fenced when the promotion that fenced it is never confirmed.
FENCE_SECONDS = 5.0
#: Longest this process prefers a promotion it heard to the sentinels' older answer.
PROMOTION_SECONDS = 60.0
#: The sentinels' announcements a watcher acts on (see the module's docstring).
EVENTS = ("+failover-state-send-slaveof-noone", "+promoted-slave", "+switch-master")
ABORTS = "-failover-abort-*"

Address = tuple[str, int]


class ServiceState:
    """What this process heard about one service's failovers, newer than the
    sentinels' answers may be."""

    def __init__(self) -> None:
        #: The primary being promoted away from, and until when it stays fenced.
        self.fenced: Address | None = None
        self.fenced_until = 0.0
        #: The primary this process heard promoted, the one it replaces, when, and the
        #: configuration epoch of that failover.
        self.promoted: Address | None = None
        self.replaced: Address | None = None
        self.promoted_at = 0.0
        self.promoted_epoch = 0
        #: The newest configuration epoch the sentinels answered with.
        self.epoch = 0
        #: The primary this process's pools last moved to.
        self.following: Address | None = None
        #: Counts the announcements acted on (a fence, its lifting, a promotion): an
        #: answer of the sentinels asked for before the count moved is older than what
        #: this process heard since, and must not undo it (see :func:`_ask`).
        self.heard = 0

    def fence(self, old: Address) -> None:
        self.fenced, self.fenced_until = old, time.monotonic() + FENCE_SECONDS
        self.heard += 1

    def lift(self) -> None:
        self.fenced = None
        self.heard += 1

    def is_fenced(self, address: Address) -> bool:
        if self.fenced is None or self.fenced != address:
            return False
        if time.monotonic() >= self.fenced_until:
            logger.warning("Redis Sentinel: no promotion confirmed in %gs; %s:%s is the primary again",
                           FENCE_SECONDS, *address)
            self.fenced = None
            return False
        return True

    def promote(self, new: Address, old: Address, epoch: int) -> None:
        """``new`` replaces ``old`` in the failover of configuration ``epoch`` (the
        leader counts it as the new configuration's from the promotion on, and names
        ``new`` in it only when it announces the switch)."""
        self.promoted, self.replaced = new, old
        self.promoted_at, self.promoted_epoch = time.monotonic(), epoch
        self.fenced = None
        self.heard += 1

    def forget(self, address: Address) -> None:
        """``address`` answered as a replica: stop preferring it."""
        if self.promoted == address:
            self.promoted = self.replaced = None

    def resolve(self, named: Address, epoch: int) -> Address:
        """The primary to dial when the sentinels' newest configuration (``epoch``)
        names ``named``: the one heard promoted while they still name the one it
        replaces, until they announce the switch (or a later failover)."""
        self.epoch = max(self.epoch, epoch)
        if self.promoted is None:
            return named
        if (named == self.promoted or epoch > self.promoted_epoch
                or time.monotonic() - self.promoted_at >= PROMOTION_SECONDS):
            self.promoted = self.replaced = None  # the sentinels caught up, or moved on since
            return named
        return self.promoted if named == self.replaced else named


#: Seconds a sentinel that did not answer is left out of the questions.
SENTINEL_DOWN_SECONDS = 5.0


class WatchedSentinel(Sentinel):
    """The sentinels of one target, answering with what this process heard: no
    primary while the old one is fenced, the promoted one while the sentinels
    still name the one it replaced.

    Every sentinel that answers is asked, and the answer with the newest
    configuration epoch wins: a sentinel that did not lead a failover learns of
    it up to seconds later, and redis-py's first answer may be its old one."""

    def __init__(self, target: RedisTarget, **kwargs: Any) -> None:
        super().__init__(list(target.sentinels), **kwargs)
        self.identity = target.identity
        self._down: dict[int, float] = {}

    def discover_master(self, service_name: str) -> Address:
        epoch, named = self.newest(service_name)
        resolved = state_for(self.identity)
        primary = resolved.resolve(named, epoch)
        if resolved.is_fenced(primary):
            raise MasterNotFoundError(f"{service_name}: a failover is promoting a replica; writes wait for it")
        return primary

    def newest(self, service_name: str) -> tuple[int, Address]:
        """The sentinels' newest configuration: its epoch and the primary it names."""
        answers: list[tuple[int, bool, Address]] = []
        errors: list[str] = []
        now = time.monotonic()
        for index, each in enumerate(self.sentinels):
            if self._down.get(index, 0.0) > now:
                continue
            try:
                masters = each.sentinel_masters()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                self._down[index] = now + SENTINEL_DOWN_SECONDS
                errors.append(f"{each}: {exc!r}")
                continue
            state = masters.get(service_name)
            if state and self.check_master_state(state, service_name):
                # The leader of a failover counts the new epoch from the promotion on but
                # names the new primary only when it announces the switch; the others
                # name it as soon as they hear of that epoch. So at one epoch, an answer
                # from a sentinel not in the middle of a failover is the newer.
                settled = "failover_in_progress" not in str(state.get("flags", ""))
                answers.append((int(state.get("config-epoch") or 0), settled, (str(state["ip"]), int(state["port"]))))
        if not answers:
            if self._down and not errors:
                self._down.clear()  # every sentinel left out: ask them all next time
            raise MasterNotFoundError(f"No master found for {service_name!r}: {', '.join(errors)}")
        epoch, _settled, named = max(answers)
        return epoch, named


class _RoleChecked:
    """A Sentinel-managed connection that asks ``ROLE`` after it dials the primary and
    refuses a server that answers as a replica (before anything else is sent)."""

    def connect_to(self, address: Any) -> None:
        super().connect_to(address)  # type: ignore[misc]
        side = pools.sentinel_primary(self)
        if side is None:  # a connection to a replica: no role to check
            return
        self.send_command("ROLE")  # type: ignore[attr-defined]
        reply = self.read_response()  # type: ignore[attr-defined]
        role = reply[0] if isinstance(reply, (list, tuple)) and reply else reply
        if isinstance(role, bytes):
            role = role.decode()
        if role != "master":
            self.disconnect()  # type: ignore[attr-defined]
            manager = side.manager
            if isinstance(manager, WatchedSentinel):
                state_for(manager.identity).forget((address[0], int(address[1])))
            raise redis.ConnectionError(f"Redis at {address[0]}:{address[1]} answers as a {role}, not the primary "
                                        f"of {side.service}")


class RoleCheckedConnection(_RoleChecked, SentinelManagedConnection):
    pass


class RoleCheckedSSLConnection(_RoleChecked, SentinelManagedSSLConnection):
    pass


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """A pool of connections to the primary a Redis Sentinel names, with the checkout
    timeout and fixed size of :class:`redis.BlockingConnectionPool`. Each new
    connection asks the sentinels for the primary's address, then the server its role."""

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        if "connection_class" not in kwargs:
            kwargs["connection_class"] = RoleCheckedSSLConnection if kwargs.pop("ssl", False) else RoleCheckedConnection
        super().__init__(service_name, sentinel_manager, **kwargs)

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        conn = super().get_connection(*args, **kwargs)
        follow_primary(conn)
        return conn

    def disconnect(self, inuse_connections: bool = True) -> None:
        if inuse_connections:
            redis.BlockingConnectionPool.disconnect(self)
            return
        # redis-py 5.x's BlockingConnectionPool.disconnect() has no inuse_connections argument.
        for conn in pools.free_connections(self):
            conn.disconnect()


def follow_primary(conn: Any) -> None:
    """Close ``conn`` if it is connected to another server than the primary its pool
    last heard of (none while a failover fences the old one); it dials on its next
    command. Free for other connection classes."""
    side = pools.sentinel_primary(conn)
    if side is None or not wire.maybe_connected(conn):
        return
    if (conn.host, conn.port) != side.primary:
        conn.disconnect()


_lock = threading.Lock()
_managers: dict[tuple[int, str], Sentinel] = {}
_pools: dict[str, weakref.WeakSet[BlockingSentinelPool]] = {}
_watchers: dict[tuple[int, str], list[threading.Thread]] = {}
# Each watcher's current sentinel connection, so stop_watchers() can cut a blocked read.
_listening: dict[threading.Thread, redis.Redis] = {}
_stopped: set[threading.Thread] = set()
_states: dict[str, ServiceState] = {}
_asked: dict[str, float] = {}
# Held while an answer or an announcement moves the pools: a check that no announcement
# came since the question, then the move, with no announcement acted on in between.
_switching = threading.RLock()


def state_for(identity: str) -> ServiceState:
    found = _states.get(identity)
    if found is None:
        with _lock:
            found = _states.setdefault(identity, ServiceState())
    return found


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
                found = _managers[key] = WatchedSentinel(target, sentinel_kwargs=sentinel_options(target))
    return found


def pool(target: RedisTarget, kwargs: dict[str, Any]) -> BlockingSentinelPool:
    """A new pool for ``target``'s primary, followed by this process's watchers."""
    built = BlockingSentinelPool(target.service, manager(target), **kwargs)
    with _lock:
        _pools.setdefault(target.identity, weakref.WeakSet()).add(built)
        key = (os.getpid(), target.identity)
        watchers = _watchers.get(key)
        if watchers is None or not all(w.is_alive() for w in watchers):
            # One per sentinel: the leader of a failover, whose events fence the old
            # primary, may be any of them.
            watchers = _watchers[key] = [
                threading.Thread(target=_watch, args=(target, host, port), daemon=True,
                                 name=f"wurk-sentinel-{target.service}-{port}")
                for host, port in target.sentinels]
            for watcher in watchers:
                watcher.start()
    return built


def _pools_of(target: RedisTarget) -> list[BlockingSentinelPool]:
    return list(_pools.get(target.identity, ()))


#: Called with a pool whose idle connections were just closed, for the connections
#: kept idle outside it (:func:`wurk_django.redis.connection.send_commands` keeps two).
idle_closers: list[Any] = []


def _close_idle(each: BlockingSentinelPool) -> None:
    each.disconnect(inuse_connections=False)
    for close in idle_closers:
        close(each)


def _fence(target: RedisTarget, old: Address) -> None:
    """A replica is being promoted away from ``old``: nothing more goes to it."""
    state = state_for(target.identity)
    with _switching:
        if state.fenced == old:
            return
        state.fence(old)
        for each in _pools_of(target):
            if pools.heard_primary(each) == old:
                pools.hear_primary(each, None)
                _close_idle(each)
    logger.warning("Redis Sentinel: %s is failing over from %s:%s; writes wait for the new primary",
                   target.service, *old)


def _switch(target: RedisTarget, primary: Address, old: Address | None = None, *,
            asked_at: int | None = None) -> None:
    """Record ``primary`` on every pool of ``target`` and close their idle connections
    to any other server; busy ones are closed at their next use. ``old``: the primary
    ``primary`` was heard promoted away from. ``asked_at``: the state's count of
    announcements when the sentinels were asked for ``primary``; if one was acted on
    since, the answer is older than it and changes nothing."""
    state = state_for(target.identity)
    epoch = 0
    if old is not None:
        # Asked before the lock is taken: the sentinels may take a while to answer.
        try:
            epoch = manager(target).newest(target.service)[0]
        except redis.RedisError:
            epoch = state.epoch + 1  # at least the configuration after the last one heard
    with _switching:
        if asked_at is not None and state.heard != asked_at:
            logger.debug("Redis Sentinel: an answer naming %s:%s came after a newer announcement; ignored", *primary)
            return
        if old is not None:
            state.promote(primary, old, max(epoch, state.epoch))
        elif state.fenced is not None and state.fenced != primary:
            state.lift()
        previous, state.following = state.following, primary
        for each in _pools_of(target):
            if pools.heard_primary(each) != primary:
                pools.hear_primary(each, primary)
                _close_idle(each)
    if previous is not None and previous != primary:
        logger.warning("Redis Sentinel: %s moved from %s:%s to %s:%s", target.service, *previous, *primary)


def _ask(target: RedisTarget) -> None:
    """Ask the sentinels for the primary and move the pools to it, unless an
    announcement was acted on while the question was out. Three watchers and the
    recheck run at once, and on a loaded machine a thread can sit for tens of
    milliseconds between the answer and the move: an answer read before the
    leader's fence or promotion, applied after it, moved every pool back to the
    old primary (undoing the fence) until the next recheck."""
    state = state_for(target.identity)
    asked_at = state.heard
    try:
        host, port = manager(target).discover_master(target.service)
    except redis.RedisError as exc:
        logger.warning("Redis Sentinel: no primary for %s: %s", target.service, exc)
        return
    _switch(target, (host, int(port)), asked_at=asked_at)


def on_event(target: RedisTarget, channel: str, data: str) -> None:
    """Act on one sentinel announcement (see the module's docstring)."""
    words = data.split()
    if channel == "+switch-master":
        # The sentinels that did not lead the failover announce it up to seconds later,
        # maybe after the next one began: ask them all, the newest configuration wins.
        if words and words[0] == target.service:
            _ask(target)
        return
    if channel.startswith("-failover-abort"):
        # "master <name> <ip> <port>"
        if len(words) >= 2 and words[1] == target.service and state_for(target.identity).fenced is not None:
            with _switching:
                state_for(target.identity).lift()
            logger.warning("Redis Sentinel: the failover of %s was aborted (%s)", target.service, channel)
            _ask(target)
        return
    # "slave <ip:port> <ip> <port> @ <name> <primary ip> <primary port>"
    if len(words) < 8 or words[0] != "slave" or words[4] != "@" or words[5] != target.service:
        return
    replica, primary = (words[2], int(words[3])), (words[6], int(words[7]))
    if channel == "+failover-state-send-slaveof-noone":
        _fence(target, primary)
    elif channel == "+promoted-slave":
        _switch(target, replica, primary)


def _watch(target: RedisTarget, host: str, port: int) -> None:
    """Listen to one sentinel's announcements, forever; ask the sentinels directly when
    nobody did for ``RECHECK_INTERVAL`` seconds."""
    pid = os.getpid()
    me = threading.current_thread()
    options = {**sentinel_options(target), "socket_timeout": None}
    while os.getpid() == pid and me not in _stopped:
        client = redis.Redis(host, port, **options)
        _listening[me] = client
        try:
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(*EVENTS)
            pubsub.psubscribe(ABORTS)
            _ask(target)  # a switch may have happened while nobody listened
            _asked[target.identity] = time.monotonic()
            while True:
                message = pubsub.get_message(timeout=RECHECK_INTERVAL)
                if message is not None:
                    on_event(target, to_text(message["channel"]), to_text(message["data"]))
                if time.monotonic() - _asked.get(target.identity, 0.0) >= RECHECK_INTERVAL:
                    _asked[target.identity] = time.monotonic()
                    _ask(target)
        except (redis.RedisError, OSError, ValueError, AttributeError):
            pass  # this sentinel is gone or said something odd: listen again in a second
        except TypeError:
            # stop_watchers() closed the socket under the read: redis-py 8's hiredis parser
            # then polls the socket it already forgot (None). Anything else is a bug.
            if me not in _stopped:
                raise
        finally:
            _listening.pop(me, None)
            client.close()
        if me in _stopped:
            break
        time.sleep(1.0)
    _stopped.discard(me)


def stop_watchers(timeout: float = 3.0) -> None:
    """Stop this process's sentinel watchers and wait for them (bounded). A swarm
    supervisor forks only while no other thread runs: a thread's locks would stay
    locked forever in the child. The next pool this process builds starts them again."""
    pid = os.getpid()
    with _lock:
        keys = [key for key in _watchers if key[0] == pid]
        threads = [thread for key in keys for thread in _watchers.pop(key)]
    for thread in threads:
        _stopped.add(thread)
        client = _listening.get(thread)
        if client is not None:
            # Close the sockets under its blocked read: the read fails and the loop ends.
            with contextlib.suppress(Exception):
                client.connection_pool.disconnect(inuse_connections=True)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))


def _after_fork_in_child() -> None:
    global _switching
    # Threads do not survive a fork: the child starts its own watchers with its first pool.
    _switching = threading.RLock()  # another thread may have held it at the fork
    _managers.clear()
    _watchers.clear()
    _listening.clear()
    _stopped.clear()
    _pools.clear()
    _asked.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
