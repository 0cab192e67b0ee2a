"""``redis_client()``: the Redis client for application code (jobs, views), and
``FastRedis``, its class, for code that builds its own client (redis-py's
``from_url``, django-redis's ``REDIS_CLIENT_CLASS`` option).

Sidekiq gives its jobs ``Sidekiq.redis``; this is ours. It is a full redis-py
``Redis`` (every command method, pipelines, locks, scripts, pub/sub), on a pool
of its own sized from the config, so job code never waits behind the worker's
fetch and heartbeat connections.

What differs from a plain ``redis.Redis.from_url(...)`` is the cost of a
single command. redis-py spends about 70 us of Python on each one (pool
checkout and release, argument encoding, retry and observability wrappers,
one parser call per reply). Here a command with plain arguments is packed by
hiredis and written on an idle connection kept out of the pool, the path the
worker's own fetch takes (``wire.py``): ten threads ran 2.5 times as many
``INCR``s a second this way (``bench/ceiling.py``). Anything else (a ``bool``
or ``None`` argument, which redis-py refuses with its own message;
``NEVER_DECODE``; a connection speaking RESP3; a process where the fast path
is switched off or does not fit the installed redis-py, see ``wire.py``) goes
through redis-py unchanged, so callers cannot tell the two paths apart except
by speed.

A command is never sent twice. A connection that Redis closed while it was
idle for a second or more (a restart, the server's ``timeout``) is found
before the command is written and dialled again. A connection that breaks
after the command was written, or that was closed within a second of its
last use (by ``CLIENT KILL``, say), raises ``ConnectionError``: the command
may have run, and a replay could count an ``INCR`` twice. redis-py's own
default is to replay; set up your own client if that is what you want. With
the fast path off, redis-py's pool checks every connection it hands out, so a
connection closed just after its last use is found before writing too.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import redis
import redis.sentinel

from .. import context
from ..conf import Config
from . import cluster, pools, wire
from .connection import app_pool, cached_client, remembered, send_commands, send_one

if TYPE_CHECKING:
    from redis.cluster import RedisCluster

_PLAIN = frozenset({bytes, str, int, float})
#: A connection idle this long (seconds) is checked before use: Redis may have closed
#: it (a restart, the server's ``timeout``). One used more recently is not: the check
#: is a system call that, with many threads, cost a third of a command.
IDLE_CHECK = 1.0


#: The most idle connections a client keeps out of its pool for single commands. A pool
#: sized by someone else (django-redis, redis-py's default of 2**31 or 100) could otherwise
#: lend half of itself; the stack only ever holds as many as threads used it at once.
KEEP_MAX = 64


_protocols: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _speaks_resp2(pool: Any) -> bool:
    """Whether ``pool``'s connections speak RESP2: the protocol its options name, else
    the one a connection object built from them has (it does not connect), so that
    redis-py's default (2 up to redis-py 7, 3 from 8) is what answers."""
    try:
        return _protocols[pool]
    except (KeyError, TypeError):
        pass
    answer = str(pools.protocol_of(pool)) == "2"
    try:
        _protocols[pool] = answer
    except TypeError:  # a pool that cannot be weakly referenced: asked again next time
        pass
    return answer


class FastRedis(redis.Redis):
    """A redis-py ``Redis`` whose single commands skip redis-py's per-call overhead.

    A drop-in: every method, pipelines, locks, scripts and pub/sub behave as on
    ``redis.Redis``; single commands with plain arguments (bytes, str, int, float)
    take the socket fast path of :func:`redis_client` (this module's docstring).
    Build it like ``redis.Redis`` (``FastRedis.from_url(url)``,
    ``FastRedis(connection_pool=pool)``), or name it in django-redis's
    ``REDIS_CLIENT_CLASS`` option. Without a pool of its own choosing it speaks
    RESP2, which the fast path needs (redis-py 8 defaults to RESP3); on a pool that
    speaks RESP3, uses client-side caching or an encoding other than UTF-8, every
    command goes through redis-py unchanged (:attr:`fast_path` says which).

    Unlike ``redis.Redis``, a command whose connection breaks after it was written
    is never sent again (redis-py's default ``Retry`` would); a connection Redis
    closed while it sat idle is dialled again before writing.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("connection_pool") is None and "protocol" not in kwargs:
            kwargs["protocol"] = 2  # a pool built here: speak what the fast path reads
        super().__init__(*args, **kwargs)
        pool = self.connection_pool
        encoding = str(pools.options_of(pool).get("encoding", "utf-8")).lower()
        # hiredis writes str arguments as UTF-8; any other encoding stays with redis-py.
        # Client-side caching (redis-py's cache_config) answers from the pool's cache,
        # which only redis-py's own path consults.
        self._fast = (encoding.replace("-", "") == "utf8" and not pools.caches_replies(pool)
                      and wire.enabled() and _speaks_resp2(pool))
        # Idle connections kept out of the pool for single commands: at most half of
        # it, so pipelines and pub/sub, which check out from the pool, always find one.
        self._keep = max(min(getattr(pool, "max_connections", 2) // 2, KEEP_MAX), 1)
        # A Sentinel-managed pool's connections follow its primary before each use: the
        # full path. Any other takes send_one's shortcut when its connection allows.
        self._direct = not isinstance(pool, redis.sentinel.SentinelConnectionPool)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> FastRedis:
        """As ``redis.Redis.from_url``, speaking RESP2 unless ``protocol`` (or the URL's
        ``?protocol=``) says otherwise."""
        kwargs.setdefault("protocol", 2)
        return super().from_url(url, **kwargs)

    @property
    def fast_path(self) -> bool:
        """Whether this client's single commands take the socket fast path in this
        process (False: every command goes through redis-py's own calls)."""
        return self._fast

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if not self._fast or (options and wire.skips_decoding(options)) or self.connection is not None:
            return super().execute_command(*args, **options)
        for arg in args:
            if type(arg) not in _PLAIN:  # bool, None, str subclasses...: redis-py's encoder decides
                return super().execute_command(*args, **options)
        name = args[0]
        if type(name) is str and " " in name:  # "CONFIG GET", "CLIENT LIST": sent as separate words
            args = (*name.split(), *args[1:])
        if self._direct:
            reply = send_one(self, args, self._keep, IDLE_CHECK)
        else:
            reply = send_commands(self, [args], raise_errors=False, keep=self._keep, check_idle_after=IDLE_CHECK,
                                  hold_gil=True)[0]
        return wire.finish_reply(self, name, reply, options)


class AppRedis(FastRedis):
    """The client :func:`redis_client` returns: a :class:`FastRedis` on wurk's own
    pool for application code."""


def redis_client(*, decode_responses: bool = False, config: Config | None = None) -> AppRedis | RedisCluster:
    """The process's Redis client for application code, on the database wurk uses.

    ``decode_responses=True`` returns ``str`` instead of ``bytes`` (a second
    client on its own pool). The client is shared by every thread of the
    process and rebuilt in a forked child. Commands are never replayed after a
    connection error (see the module's docstring).

    When the Redis is a node of a Redis Cluster, this is redis-py's
    ``RedisCluster`` instead (see :mod:`wurk_django.redis.cluster`): each command
    goes to the node holding its key; commands over several keys need them in one
    hash slot (a ``{tag}`` in each key name), as with any cluster client.
    """
    config = context.config(config)
    purpose = "app-decoded" if decode_responses else "app"
    # Job code asks for it per call (``redis_client().incr(...)``): the answer is kept on the config.
    return remembered(config, purpose, _app_client, config, purpose, decode_responses)


def _app_client(config: Config, purpose: str, decode_responses: bool) -> tuple[AppRedis | RedisCluster, bool]:
    client = cached_client(purpose, config, lambda: AppRedis(connection_pool=app_pool(config, decode_responses)))
    if cluster.is_cluster(config.redis_target, client):
        # A cluster node (issue 46): redis-py's own cluster client, which routes each key to its node.
        return cached_client(f"{purpose}-cluster", config,
                             lambda: cluster.cluster_client(config, decode_responses=decode_responses)), True
    # Kept only once the server said it is no cluster: one not asked yet is asked again next call.
    return client, cluster.settled(config.redis_target)
