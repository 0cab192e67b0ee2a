"""Redis connections: the one place clients are built, always from a :class:`Config`.

Three constructors, all taking the config explicitly (without one they use
:func:`wurk_django.context.config`: ``via()``, the running job's, the settings'):

* :func:`get_redis`: the process-wide client for a purpose (``main``,
  ``fetch``, ``ack``), its pool sized from the config's concurrency and
  rebuilt after a fork;
* :func:`async_redis`: the ``redis.asyncio`` client for the running event loop;
* :func:`probe_redis`: a private one-connection client with short timeouts,
  for health and liveness checks that must never wait on a busy pool.

Payloads are read as bytes (``decode_responses=False``) so a job can later be
removed by its exact stored bytes (CORE-004). redis-py's own command retries
are switched off: replaying a command whose reply was lost can duplicate a
push (RUN-831), so callers decide what may be retried.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from time import monotonic
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .. import context
from ..conf import Config
from ..errors import RedisClusterError, RedisEvictionError, RedisVersionError
from . import blocked, cluster, eviction, pools, sentinel, wire
from .errors import NotSent, is_failover, refused
from .wire import state_of

logger = logging.getLogger("wurk_django.redis")

MIN_VERSION = (7, 0)
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.5
CHECKOUT_TIMEOUT = 1.0

_lock = threading.Lock()
_clients: dict[tuple[int, str, str], redis.Redis] = {}
#: Bumped whenever a client in ``_clients`` may have been replaced or forgotten (a bigger
#: pool, :func:`reset`, a fork): what :func:`client_for` remembered under another is stale.
_generation = 0


#: Connections a ``main`` pool holds beyond one per processor thread: the heartbeat,
#: the scheduler, the reaper, the metrics flush and a client push from the side.
MAIN_POOL_EXTRAS = 5
MIN_MAIN_POOL = 10
MIN_APP_POOL = 20
PROBE_TIMEOUT = 0.5


def _options(config: Config, *, socket_timeout: float, retry: Any, pool_size: int) -> dict[str, Any]:
    """Pool options: ours, then the config's ``OPTIONS`` over them; the pool size and
    bytes replies are not negotiable (wurk sizes its pools from the config)."""
    target = config.redis_target
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": socket_timeout,
        "socket_keepalive": True,
        "retry": retry,
        "timeout": CHECKOUT_TIMEOUT,
        # RESP2 unless OPTIONS or the URL ask for 3 (redis-py 8 defaults to RESP3): the
        # per-job batches then run on the socket directly (wire.py, RUN-706).
        "protocol": 2,
    }
    if target.url.startswith("unix:"):
        del kwargs["socket_keepalive"]  # a TCP option: redis-py's Unix connection refuses it
    if target.tls:
        # The certificate chain is checked by default in every redis-py release; the
        # host name only from redis-py 6 on. Check both unless the settings say otherwise.
        kwargs["ssl_check_hostname"] = True
    kwargs.update(config.redis_options)
    kwargs["max_connections"] = pool_size
    kwargs["decode_responses"] = False
    return kwargs


def _pool(config: Config, kwargs: dict[str, Any]) -> redis.BlockingConnectionPool:
    """A blocking pool for ``config``'s Redis: from its URL, or through its sentinels."""
    target = config.redis_target
    if target.is_sentinel:
        return sentinel.pool(target, kwargs)
    pool = redis.BlockingConnectionPool.from_url(target.url, **kwargs)
    pools.wrap_connections(pool, _redialing_after_readonly)
    return pool


_redialing: dict[type, type] = {}


def _redialing_after_readonly(cls: type) -> type:
    """``cls`` with one change: after a ``READONLY`` reply the connection dials again
    before its next command. A failover behind a DNS name leaves connections open
    to the demoted primary, which answers every write with ``READONLY``; without
    this a pooled connection would meet it again on every checkout. The redial
    waits for the next command so that a pipeline's remaining replies are still
    read from the same socket."""
    found = _redialing.get(cls)
    if found is None:

        class Redialing(cls):  # type: ignore[misc, valid-type]
            def read_response(self, *args: Any, **kwargs: Any) -> Any:
                try:
                    return super().read_response(*args, **kwargs)
                except redis.ReadOnlyError:
                    wire.state_of(self).demoted = True
                    raise

            def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
                state = wire.known_state(self)
                if state is not None and state.demoted:
                    state.demoted = False
                    self.disconnect()
                super().send_packed_command(*args, **kwargs)

        Redialing.__name__ = Redialing.__qualname__ = f"Redialing{cls.__name__}"
        found = _redialing[cls] = Redialing
    return found


def _build(config: Config, *, pool_size: int, socket_timeout: float, options: dict[str, Any]) -> redis.Redis:
    kwargs = _options(config, socket_timeout=socket_timeout, retry=Retry(NoBackoff(), 0), pool_size=pool_size)
    kwargs.update(options)
    pool = _pool(config, kwargs)
    pools.set_class(pool, _sharing_the_idle_stack(type(pool)))
    return redis.Redis(connection_pool=pool)


_sharing: dict[type, type] = {}


def _sharing_the_idle_stack(cls: type) -> type:
    """``cls`` with one change: redis-py's own checkout (a client method, a pipeline)
    takes a connection :func:`send_commands` keeps aside before it would dial a new
    one. The kept one counts as checked out to the pool, so without this every
    redis-py call that meets it there opens a second connection, closed again at the
    next trim: an idle worker's reaper and paused-queue reads dialed one every few
    seconds. The kept connection goes back through ``release`` and is checked out
    again through the pool's own ``get_connection``, its readiness checks and its
    bookkeeping included; only public methods are called."""
    found = _sharing.get(cls)
    if found is None:

        class Sharing(cls):  # type: ignore[misc, valid-type]
            def get_connection(self, *args: Any, **kwargs: Any) -> Any:
                kept = _take_idle(self)
                if kept is not None:
                    self.release(kept)  # on top of the free ones: the checkout below takes it
                return super().get_connection(*args, **kwargs)

        Sharing.__name__ = Sharing.__qualname__ = f"Sharing{cls.__name__}"
        found = _sharing[cls] = Sharing
    return found


def cached_client(purpose: str, config: Config, build: Callable[[], redis.Redis]) -> redis.Redis:
    """The process-wide client for ``purpose`` on ``config``'s Redis, made by ``build``
    on first use; forgotten, like every pool here, by :func:`reset` and in a forked child."""
    key = (os.getpid(), purpose, config.redis_target.identity)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = build()
    return client


def app_pool(config: Config, decode_responses: bool = False) -> redis.BlockingConnectionPool:
    """The pool behind :func:`wurk_django.redis_client`: application code's own."""
    kwargs = _options(config, socket_timeout=READ_TIMEOUT, retry=Retry(NoBackoff(), 0),
                      pool_size=pool_size_for(config, "app"))
    kwargs["decode_responses"] = decode_responses
    return _pool(config, kwargs)


def pool_size_for(config: Config, purpose: str = "main") -> int:
    """Connections the ``purpose`` pool gets for ``config``: one per processor thread
    plus the fixed extras (the fetch and ack pools: plus 2; main: plus
    ``MAIN_POOL_EXTRAS``, at least ``MIN_MAIN_POOL``), or the ``POOL_SIZE`` of the
    ``REDIS`` dict (or of the shard's dict in ``SHARDS``)
    when that is more: a smaller pool would leave processor threads waiting."""
    # The pools are the process's: a capsule's config counts the threads of every capsule.
    threads = config.concurrency if config.capsule is None else config.capsule.process_concurrency
    if purpose == "main":
        size = max(threads + MAIN_POOL_EXTRAS, MIN_MAIN_POOL)
    elif purpose == "app":
        # Job code and web requests share it: a web server's threads count too.
        size = max(threads + MAIN_POOL_EXTRAS, MIN_APP_POOL)
    else:
        size = threads + 2
    # The POOL_SIZE of this config's own REDIS-style dict: a shard's, for a shard.
    return max(size, config.redis_target.pool_size or 0)


def get_redis(purpose: str = "main", *, pool_size: int | None = None, block_seconds: float = 0,
              config: Config | None = None) -> redis.Redis:
    """The process-wide client for ``purpose``, built from ``config``.

    ``purpose="fetch"`` is for blocking reads: its socket timeout covers the
    block time plus the normal read timeout (RUN-832). The pool holds
    :func:`pool_size_for` connections unless ``pool_size`` says otherwise; when a
    config asks for more than the pool already built for the same URL holds
    (``manage.py wurk -c 50`` after a settings-sized check), a bigger pool takes
    its place, so pools only grow.
    """
    config = context.config(config)
    key = (os.getpid(), purpose, config.redis_target.identity)
    size = pool_size or pool_size_for(config, purpose)
    client = _clients.get(key)
    if client is not None and client.connection_pool.max_connections >= size:
        if _unprobed and key in _unprobed:
            return _probed(key, config, client)
        return client  # never a cluster's: one is dropped as soon as it is found (below)
    if cluster.known(config.redis_target):
        raise cluster.not_yet(ENGINE, config.redis_url)
    with _lock:
        client = _clients.get(key)
        if client is None or client.connection_pool.max_connections < size:
            options: dict[str, Any] = {}
            wanted = READ_TIMEOUT + block_seconds
            configured = config.redis_options.get("socket_timeout")
            if block_seconds and configured and configured < wanted:
                # A cache's short socket_timeout would cut every blocking fetch short (DJ-003).
                options["socket_timeout"] = wanted
            if purpose == "fetch":
                # Named, so that a stop can end this process's blocks at once (blocked.py).
                options.update(blocked.name_option(config.redis_options))
            # Holders of a replaced (smaller) client keep using it until they ask again;
            # trim_idle closes what it holds unused from now on.
            if client is not None:
                _retired.add(client.connection_pool)
            client = _build(config, pool_size=size, socket_timeout=wanted, options=options)
            _clients[key] = client
            _forget_remembered()
    if cluster.known(config.redis_target) is None:
        return _probed(key, config, client)
    return client


#: Clients whose server could not be asked yet whether it is a Redis Cluster node (it
#: was down). Empty in a healthy process, so the fast path of :func:`get_redis` pays one
#: truthiness test for it.
_unprobed: set[tuple[int, str, str]] = set()


def _probed(key: tuple[int, str, str], config: Config, client: redis.Redis) -> redis.Redis:
    """``client`` once its server is known not to be a cluster node, or while it cannot
    be asked (asked again at most every :data:`cluster.ASK_AGAIN_EVERY` seconds, and
    :func:`client_for` does not remember it meanwhile: a cluster node would take the
    pushes whose keys hash to its own slots, in the one-server layout). A cluster's
    client is dropped and :func:`cluster.not_yet` raised. Called outside the lock: a
    probe of an unreachable host waits for its connect timeout."""
    target = config.redis_target
    if cluster.is_cluster(target, client):
        _unprobed.discard(key)
        with _lock:
            if _clients.get(key) is client:
                del _clients[key]
                _forget_remembered()
        client.connection_pool.disconnect()
        raise cluster.not_yet(ENGINE, config.redis_url)
    if cluster.known(target) is None:
        _unprobed.add(key)
    else:
        _unprobed.discard(key)
    return client


#: What :func:`get_redis` refuses on a Redis Cluster (issue 46 stage 2: pushes go through
#: wurk_django.client.cluster_writer instead; the rest is not converted yet).
ENGINE = ("wurk_django's job engine beyond what runs on a cluster today (the admin's "
          "background bulk actions, features not converted yet, the engine's asyncio client)")


def cluster_for(config: Config) -> Any | None:
    """The process's redis-py ``RedisCluster`` for the engine's steps already converted to
    the cluster layout (issue 46 stage 2: pushes, the scheduler's promotion) when
    ``config``'s Redis is a cluster node, else ``None``. Asks the server once per
    process (building the one-server pool probes it); afterwards one dictionary lookup."""
    target = config.redis_target
    known = cluster.known(target)
    if known is None:
        try:
            get_redis(config=config)
        except RedisClusterError:
            pass  # a cluster node: the one-server client is refused, the answer remembered
        known = cluster.known(target)
    if not known:
        return None
    return cached_client("engine-cluster", config, lambda: cluster.cluster_client(config))


def engine_client(config: Config) -> Any:
    """The client of ``config``'s Redis for a feature converted to the cluster layout
    (issue 46 item 3: leader election, periodic loops): the ``RedisCluster`` of
    :func:`cluster_for` on a cluster, else :func:`get_redis`'s client. The feature then
    names its keys with :func:`~wurk_django.redis.cluster_layout.layout_of` that client."""
    clustered = cluster_for(config)
    return clustered if clustered is not None else get_redis(config=config)


def client_for(config: Config) -> redis.Redis:
    """``get_redis(config=config)``, remembered on ``config`` for the push path, which
    asks once per push: the lookup's key, pool size and lock cost more than the rest of
    choosing a connection (see :func:`remembered`)."""
    return remembered(config, "main_redis", _main_for, config)


def _main_for(config: Config) -> tuple[redis.Redis, bool]:
    client = get_redis(config=config)
    return client, not _unprobed  # else: asked again by the next push (see _probed)


def remembered(config: Config, name: str, look_up: Callable[..., tuple[Any, bool]], *args: Any) -> Any:
    """The client ``look_up(*args)`` finds for ``config``, kept in ``config.memo[name]``
    for the next call, which then costs a dictionary lookup. What was kept is forgotten
    whenever a lookup could answer otherwise: a pool replaced by a bigger one,
    :func:`reset`, a fork (the child's generation moves on, so it never writes on its
    parent's sockets), a config pointed at another Redis. ``look_up`` returns the
    client and whether it may be kept: not while the answer can still change (a
    server not probed yet)."""
    kept = config.memo.get(name)
    # The target too: what was kept is for the Redis the config pointed at then.
    if kept is not None and kept[0] == _generation and kept[1] is config.redis_target:
        return kept[2]
    generation = _generation
    client, final = look_up(*args)
    if final:
        config.memo[name] = (generation, config.redis_target, client)
    return client


def _forget_remembered() -> None:
    global _generation
    _generation += 1


cluster.forgetters.append(_forget_remembered)  # a client chosen by a cluster answer goes with it


_async_lock = threading.Lock()
_async_clients: dict[tuple[int, str], tuple[Any, str, Any]] = {}


def async_redis(config: Config | None = None) -> Any:
    """The ``redis.asyncio`` client for the running event loop and ``config``'s Redis
    (an asyncio client cannot cross loops): the options of :func:`get_redis`, in an
    unbounded pool."""
    import asyncio

    import redis.asyncio as aredis
    from redis.asyncio.retry import Retry as AsyncRetry

    config = context.config(config)
    _refuse_cluster_async(config)
    loop = asyncio.get_running_loop()
    with _async_lock:
        for ident, (other, _url, _client) in list(_async_clients.items()):
            if other.is_closed():
                del _async_clients[ident]
        target = config.redis_target
        key = (id(loop), target.identity)
        entry = _async_clients.get(key)
        if entry is None or entry[0] is not loop:
            kwargs = _options(config, socket_timeout=READ_TIMEOUT, retry=AsyncRetry(NoBackoff(), 0), pool_size=0)
            # Unbounded, as redis.asyncio's own default: coroutines of a busy ASGI server
            # must not queue for a connection behind a checkout timeout.
            del kwargs["timeout"], kwargs["max_connections"]
            if target.is_sentinel:
                from redis.asyncio.sentinel import Sentinel
                from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool

                manager = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel.sentinel_options(target))
                pool = AsyncSentinelPool(target.service, manager, **kwargs)
            else:
                pool = aredis.ConnectionPool.from_url(target.url, **kwargs)
            entry = _async_clients[key] = (loop, target.identity, aredis.Redis(connection_pool=pool))
        return entry[2]


def _refuse_cluster_async(config: Config) -> None:
    """Raise :func:`cluster.not_yet` when ``config``'s Redis is a cluster: asked once per
    process, on a short-lived synchronous client (redis.asyncio has no probe of its own here)."""
    target = config.redis_target
    answer = cluster.known(target)
    if answer is None and not target.is_sentinel and cluster.due(target):
        client = probe_redis(config, timeout=CONNECT_TIMEOUT)
        try:
            answer = cluster.is_cluster(target, client)
        finally:
            client.connection_pool.disconnect()
    if answer:
        raise cluster.not_yet(ENGINE, config.redis_url)


def probe_redis(config: Config | None = None, *, timeout: float = PROBE_TIMEOUT) -> redis.Redis:
    """A new one-connection client with ``timeout``-second connect, read and checkout
    timeouts, owned by the caller (close it with ``connection_pool.disconnect()``,
    e.g. before a fork): health and liveness probes get a quick no, never a wait."""
    config = context.config(config)
    kwargs = _options(config, socket_timeout=timeout, retry=Retry(NoBackoff(), 0), pool_size=1)
    kwargs.update(socket_timeout=timeout, socket_connect_timeout=timeout, timeout=timeout)
    return redis.Redis(connection_pool=_pool(config, kwargs))


# Pools get_redis replaced by bigger ones, for trim_idle.
_retired: weakref.WeakSet[Any] = weakref.WeakSet()

#: Connections each pool keeps checked out for :func:`send_commands` between calls.
IDLE_PER_POOL = 2
# The idle stacks, by the id of their pool; each goes when its pool is collected. Not a
# WeakKeyDictionary: its lookup builds a weak reference on every call, and this one is
# made twice per command of job code.
_idle_stacks: dict[int, list[Any]] = {}
_stack_refs: dict[int, weakref.ref[Any]] = {}
_stacks_lock = threading.Lock()


def idle_stack(pool: Any) -> list[Any] | None:
    """The connections :func:`send_commands` keeps checked out of ``pool`` (None: none yet)."""
    return _idle_stacks.get(id(pool))


def _take_idle(pool: Any) -> Any | None:
    """A connection off ``pool``'s idle stack, or None: none kept, or another thread
    took the last one between the look and the pop."""
    stack = _idle_stacks.get(id(pool))
    if stack:
        try:
            return stack.pop()
        except IndexError:
            pass
    return None


def _new_idle_stack(pool: Any) -> list[Any]:
    key = id(pool)
    with _stacks_lock:
        stack = _idle_stacks.get(key)
        if stack is None:
            def forget(_ref: Any, key: int = key) -> None:
                _idle_stacks.pop(key, None)
                _stack_refs.pop(key, None)

            _stack_refs[key] = weakref.ref(pool, forget)  # a pool that cannot be referenced raises, as before
            stack = _idle_stacks[key] = []
    return stack


def send_commands(client: redis.Redis, commands: list[tuple[Any, ...]], *, raise_errors: bool = True,
                  keep: int = IDLE_PER_POOL, check_idle_after: float = 0.0, hold_gil: bool = False,
                  spin: float = 0.0) -> list[Any]:
    """Send ``commands`` in one round trip on a pooled connection; see :func:`send_on`.

    Up to ``keep`` connections stay checked out between calls, on a
    per-pool stack: redis-py's checkout and release cost about 30 us a push
    (a locked queue, metrics hooks, a readiness poll), a third of a one-at-a-time
    enqueue (RUN-706). A connection taken from the stack gets the same readiness
    check redis-py makes (closed by the server, or holding stray bytes: it
    reconnects); any other is checked out and released through the pool.
    ``check_idle_after`` skips that check for a connection used less than that
    many seconds ago (the check is a system call that lets go of the GIL).
    ``hold_gil`` is passed on to :func:`wurk_django.redis.wire.exchange`: for callers
    that wait for the reply at once (job code's commands, ``app_redis``), and
    ``spin`` (seconds to poll for the reply before sleeping) for pushes.
    """
    conn = borrow(client, check_idle_after)
    try:
        return send_on(conn, commands, raise_errors=raise_errors, hold_gil=hold_gil, spin=spin)
    finally:
        give_back(client, conn, keep, check_idle_after)


def send_one(client: redis.Redis, command: tuple[Any, ...], keep: int, check_idle_after: float) -> Any:
    """``command``'s raw reply (an error reply in its place), as
    ``send_commands(client, [command], raise_errors=False, keep=keep,
    check_idle_after=check_idle_after, hold_gil=True)[0]`` gives it, for a pool that is
    not Sentinel-managed (this does not follow a moving primary).

    Job code's single commands: a connection from the idle stack that the fast path
    used within ``check_idle_after`` seconds takes :func:`wire.round_trip` and goes
    straight back; any other goes back on the stack untouched, and
    :func:`send_commands` sends the full way (checking, dialling, or through redis-py)."""
    conn = _take_idle(client.connection_pool)
    if conn is not None:
        try:
            reply = wire.round_trip(conn, command, check_idle_after)
            if isinstance(reply, redis.ResponseError):
                _close_if_demoted(conn, [reply])  # before another thread can take it
        finally:
            give_back(client, conn, keep)  # round_trip noted the use itself
        if reply is not wire.NOT_SERVED:
            return reply
    return send_commands(client, [command], raise_errors=False, keep=keep, check_idle_after=check_idle_after,
                         hold_gil=True)[0]


def borrow(client: redis.Redis, check_idle_after: float = 0.0) -> Any:
    """A connection of ``client``'s pool for a few commands, the one :func:`send_commands`
    would use (its idle stack first); hand it back with :func:`give_back`. Raises
    :class:`NotSent` when no connection can be made."""
    pool = client.connection_pool
    conn = _take_idle(pool)
    if conn is None:
        try:
            return pool.get_connection()  # connects (or fails to) before anything is sent
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise NotSent(f"could not connect to Redis: {exc}") from exc
    if (not check_idle_after or monotonic() - state_of(conn).used_at >= check_idle_after) \
            and wire.stale(conn):
        conn.disconnect()  # the next write reconnects it
    return conn


def give_back(client: redis.Redis, conn: Any, keep: int = IDLE_PER_POOL, check_idle_after: float = 0.0) -> None:
    """Return a connection :func:`borrow` lent: onto the idle stack, or to the pool."""
    pool = client.connection_pool
    stack = _idle_stacks.get(id(pool))
    if stack is None:
        stack = _new_idle_stack(pool)
    if len(stack) < keep:
        if check_idle_after:
            state_of(conn).used_at = monotonic()
        stack.append(conn)
    else:
        pool.release(conn)


#: Connections each pool of the worker keeps open while nobody uses them, after a
#: :func:`trim_idle`: the rest are closed and dial again when next needed.
KEEP_IDLE = 1
#: A connection given back with :func:`set_aside` and not taken since for this many
#: seconds is closed by :func:`trim_idle` even when it is the last open one of its pool.
UNUSED_SECONDS = 60.0


def set_aside(pool: Any, conn: Any) -> None:
    """Give ``conn`` back to ``pool``, noting when; whoever takes it again calls
    :func:`taken_back`. Only for pools whose every release goes through here: the
    note is then true, and :func:`trim_idle` may close a connection nobody wanted
    for ``UNUSED_SECONDS`` (an idle worker's fetch-slot connection, say)."""
    wire.state_of(conn).set_aside_at = monotonic()
    pool.release(conn)


def taken_back(conn: Any) -> Any:
    """``conn``, checked out again after a :func:`set_aside`: no longer unused."""
    state = wire.known_state(conn)
    if state is not None:
        state.set_aside_at = None
    return conn


def keep_open_first(conn: Any, first: bool = True) -> None:
    """Have :func:`trim_idle` keep ``conn`` open before any other connection of its pool
    (``first=False``: no longer). For the connection the push watch armed: closed, it
    would make the waiting thread arm again on another (server/fetch/push_watch.py)."""
    if first:
        wire.state_of(conn).armed = True
    else:
        state = wire.known_state(conn)
        if state is not None:
            state.armed = False


def _kept_first(conn: Any) -> bool:
    state = wire.known_state(conn)
    return state is not None and state.armed


def _unused_for(conn: Any, now: float, seconds: float) -> bool:
    """True when ``conn`` was set aside at least ``seconds`` ago; a connection given back
    any other way has no note, and counts as used."""
    state = wire.known_state(conn)
    aside = None if state is None else state.set_aside_at
    return aside is not None and now - aside >= seconds


def trim_idle(keep: int = KEEP_IDLE) -> int:
    """Close the connections this process's pools hold unused beyond ``keep`` each;
    returns how many were closed.

    A redis-py pool never closes a connection it made: a process keeps as many as its
    threads ever used at once (every thread fetching at boot, say), however long it
    then sits idle, and each is a client Redis carries. The worker calls this once a
    heartbeat, so an idle process holds a few connections, not one per thread, while
    a busy one, whose connections are checked out, loses none it is using. The most
    recently used stay open (a last-in first-out pool hands them out first); closed
    ones go below them and dial again only when the open ones are all taken. A
    connection known to have been unused for ``UNUSED_SECONDS`` (see :func:`set_aside`)
    is closed even when it would be the one kept."""
    closed = 0
    pid = os.getpid()
    trimmed = [(client.connection_pool, keep) for key, client in list(_clients.items()) if key[0] == pid]
    # A pool replaced by a bigger one (get_redis) keeps whatever it had open, and its
    # holders may still use it now and then: its idle connections are all closed.
    trimmed += [(pool, 0) for pool in list(_retired) if pools.built_here(pool)]
    for pool, keep in trimmed:
        stack = _idle_stacks.get(id(pool))
        while stack:  # send_commands's own idle connections count too: back to the pool first
            try:
                conn = stack.pop()
            except IndexError:  # a sender took the last one
                break
            pool.release(conn)
        taken = pools.take_free(pool)  # top first: the most recently released first
        if taken is None:  # a pool whose free connections cannot be taken: left as it is
            continue
        open_ = [conn for conn in taken if conn is not None and wire.maybe_connected(conn)]
        # A connection the push watch armed is kept before any other (keep_open_first).
        open_.sort(key=lambda conn: not _kept_first(conn))
        now = monotonic()
        kept = [conn for conn in open_[:keep] if not _unused_for(conn, now, UNUSED_SECONDS)]
        kept_ids = {id(conn) for conn in kept}
        surplus = [conn for conn in open_ if id(conn) not in kept_ids]
        for conn in surplus:
            disconnect_quietly(conn)
        closed += len(surplus)
        rest = [conn for conn in taken if id(conn) not in kept_ids]
        pools.put_free(pool, [*reversed(rest), *reversed(kept)])  # bottom first: the open ones end on top
    return closed


def disconnect_quietly(conn: Any) -> None:
    """Close ``conn`` (None: nothing); a broken socket may fail to close, and is dropped anyway."""
    if conn is None:
        return
    try:
        conn.disconnect()
    except Exception:  # closing a broken socket may fail; it is closed either way
        pass


def _close_idle_stack(pool: Any) -> None:
    """Close the connections kept idle for ``pool`` (its primary moved). Each is taken
    off the stack first, so no other thread is using it; it goes back to the pool."""
    stack = _idle_stacks.get(id(pool))
    while stack:
        try:
            conn = stack.pop()
        except IndexError:  # another thread took the last one
            return
        conn.disconnect()
        pool.release(conn)


sentinel.idle_closers.append(_close_idle_stack)


def _forget_idle_stacks() -> None:
    # A forked child must not write on its parent's sockets; it checks out its own.
    for stack in list(_idle_stacks.values()):
        stack.clear()


def send_on(conn: Any, commands: list[tuple[Any, ...]], *, raise_errors: bool = True, hold_gil: bool = False,
            spin: float = 0.0) -> list[Any]:
    """Send ``commands`` in one round trip on ``conn`` and return their raw replies.

    The same bytes on the wire as a non-transactional pipeline, without building a
    ``Pipeline`` object per call: this runs once per job on the fetch path, through
    :mod:`wurk_django.redis.wire` where the connection allows it. Every reply is read even
    after an error reply, so the connection stays in sync; the first error is raised
    afterwards (or, with ``raise_errors=False``, left in its place in the list). A connection that failed mid-way is closed (it reconnects on its
    next use). A refusal of a server that is not a writable primary (``READONLY``,
    ``NOREPLICAS``...) closes the connection and raises
    :class:`~wurk_django.redis.errors.PrimaryRefused` whatever ``raise_errors`` says:
    none of the round trip's writes was applied, and the caller must treat it as
    the primary going away, not as one bad command.
    """
    fast = _connected(conn)
    if fast:
        replies = wire.exchange(conn, commands, hold_gil, spin)
        _close_if_demoted(conn, replies)
        if raise_errors:
            for reply in replies:
                if isinstance(reply, redis.ResponseError):
                    raise reply
        return replies
    replies: list[Any] = []
    error: redis.ResponseError | None = None
    owed = wire.take_owed(conn)
    try:
        conn.send_packed_command(conn.pack_commands(commands), False)
        for _ in range(owed):  # the replies send_unanswered left: read in order, dropped
            try:
                conn.read_response()
            except redis.ResponseError:
                pass
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
                error = error or exc
            except redis.ConnectionError as exc:
                if str(exc) != _SENTINEL_DEMOTED:
                    raise
                # redis-py's Sentinel connection turns READONLY into this error after
                # closing itself; the rest of the replies are lost with the socket.
                raise refused(redis.ReadOnlyError("READONLY the primary was demoted (Sentinel)")) from exc
    except BaseException:
        conn.disconnect()
        raise
    _close_if_demoted(conn, replies)
    if error is not None and raise_errors:
        raise error
    return replies


def _address(conn: Any) -> str:
    """``host:port`` of ``conn``'s server, for a message."""
    return f"{getattr(conn, 'host', '?')}:{getattr(conn, 'port', '?')}"


def _connected(conn: Any) -> bool:
    """Point ``conn`` at the current primary and connect it, first and on its own: a
    failure here provably sent nothing, which is what allows the write path to try
    again (wurk_django.redis.errors). Returns whether the fast path serves it."""
    sentinel.follow_primary(conn)
    try:
        return wire.ready(conn)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        conn.disconnect()
        raise NotSent(f"could not connect to Redis: {exc}") from exc


def send_unanswered(conn: Any, commands: list[tuple[Any, ...]], *, more: bool = False) -> None:
    """Send ``commands`` on ``conn`` without waiting for their replies, which the next
    :func:`send_on` on ``conn`` reads and drops first. Where the fast path does not
    serve ``conn`` this is a plain round trip (same effect, one wait). Before ``conn``
    goes back to its pool, :func:`settle` it."""
    fast = _connected(conn)
    if fast:
        wire.send_unanswered(conn, commands, more=more)
    elif wire.can_owe(conn):
        try:
            conn.send_packed_command(conn.pack_commands(commands), False)
        except BaseException:
            conn.disconnect()
            raise
        wire.note_owed(conn, len(commands))
    else:
        send_on(conn, commands, raise_errors=False)


#: One packed command written unanswered, for a per-job write on a connection the fast
#: path has just used (a worker's "running" marker): True when sent, False when the
#: connection is not such a one (nothing sent: use :func:`send_unanswered`).
send_packed_unanswered = wire.send_packed_unanswered
#: A command packed for :func:`send_packed_unanswered` (None without hiredis).
packed = wire.packed


def settle(conn: Any) -> None:
    """Read the replies :func:`send_unanswered` left on ``conn``, so it can be handed
    to anyone; a connection that cannot be read is closed instead."""
    if wire.owes(conn):
        try:
            # A PING, not an empty write: writes sent as "more follows" wait in the
            # socket's buffer until a real write pushes them out.
            send_on(conn, [("PING",)])
        except redis.RedisError:
            conn.disconnect()


_SENTINEL_DEMOTED = "The previous master is now a slave"


def _close_if_demoted(conn: Any, replies: list[Any]) -> None:
    """A ``READONLY`` reply means this socket reaches a replica: a primary demoted by
    a failover, or a DNS name that now points elsewhere; ``NOREPLICAS``, a primary
    cut off from its replicas, which is about to be. Close it, so the next use
    dials again (and asks the sentinels, for a Sentinel pool) instead of meeting
    the same server, and raise :class:`~wurk_django.redis.errors.PrimaryRefused`.
    A cluster's ``MOVED``/``ASK``/``CROSSSLOT``/``CLUSTERDOWN`` raises
    :class:`~wurk_django.errors.RedisClusterError` (:func:`cluster.moved_refusal`)."""
    for reply in replies:
        if isinstance(reply, redis.ResponseError):
            if is_failover(reply):
                conn.disconnect()
                raise refused(reply)
            # A cluster's redirection: this server is not where the key lives; whatever
            # raise_errors says, as for a demoted primary (issue 46, RUN-606).
            redirected = cluster.moved_refusal(reply, _address(conn), ENGINE)
            if redirected is not None:
                raise redirected


def reset() -> None:
    """Forget every pool (after a fork, or when a worker stops in-process)."""
    with _lock:
        pid = os.getpid()
        for key, client in list(_clients.items()):
            if key[0] == pid:
                try:
                    client.connection_pool.disconnect()
                except Exception:  # closing a dead socket may fail; it is gone either way
                    pass
        _clients.clear()
        _unprobed.clear()
        _forget_remembered()
    with _async_lock:
        _async_clients.clear()
    cluster.forget()


def _after_fork_in_child() -> None:
    global _lock, _async_lock
    # Another thread of the parent may have held them at the fork (a co-hosted respawn forks
    # while host threads run): the child's copies would stay held.
    _lock = threading.Lock()
    _async_lock = threading.Lock()
    _clients.clear()
    _unprobed.clear()
    _forget_remembered()
    _async_clients.clear()
    _forget_idle_stacks()


os.register_at_fork(after_in_child=_after_fork_in_child)


def server_version(client: redis.Redis) -> tuple[int, ...]:
    info = client.info("server")
    return tuple(int(p) for p in str(info.get("redis_version", "0")).split(".")[:3] if p.isdigit())


def cluster_enabled(client: redis.Redis) -> bool:
    """True when ``client``'s server is a Redis Cluster node (see :func:`cluster.probe`)."""
    return bool(cluster.probe(client))


def check_server(client: redis.Redis, config: Config | None = None) -> str:
    """Refuse Redis < 7.0 (CORE-002), Redis Cluster (RUN-606; issue 46 stage 1: not yet) and, unless
    ``ALLOW_EVICTION`` is True, a ``maxmemory-policy`` that may evict keys (issue 43
    item 3). A policy the server does not tell is warned about. Returns the version."""
    config = context.config(config)
    url = config.redis_url
    if cluster_enabled(client):
        raise cluster.not_yet("The worker", url)
    version = server_version(client)
    shown = ".".join(map(str, version))
    if version < MIN_VERSION:
        raise RedisVersionError(f"wurk_django needs Redis 7.0 or newer; the server at {url} is {shown}.")
    policy = eviction_policy(client)
    if policy is None:
        logger.warning(eviction.unknown_policy(url))
    elif eviction.evicting(policy):
        if not config.allow_eviction:
            raise RedisEvictionError(eviction.refusal(policy, url))
        logger.warning("Redis at %s has maxmemory-policy %s: keys may be evicted, queues with them "
                       "(running anyway: WURK['ALLOW_EVICTION'] is True)", url, policy)
    return shown


def eviction_policy(client: redis.Redis) -> str | None:
    """The server's ``maxmemory-policy``, or ``None`` if it does not say: from ``INFO
    memory``, which most managed Redis services answer while they disable ``CONFIG``,
    then from ``CONFIG GET`` (:func:`wurk_django.redis.eviction.policy`)."""
    return eviction.policy(client)
