"""``redis_client()``: the Redis client for application code (jobs, views).

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

from typing import Any

import redis

from . import wire
from .conf import Config, get_config
from .connection import app_pool, cached_client, send_commands

_PLAIN = frozenset({bytes, str, int, float})
#: A connection idle this long (seconds) is checked before use: Redis may have closed
#: it (a restart, the server's ``timeout``). One used more recently is not: the check
#: is a system call that, with many threads, cost a third of a command.
IDLE_CHECK = 1.0


class AppRedis(redis.Redis):
    """A redis-py client whose single commands skip redis-py's per-call overhead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        encoding = str(self.connection_pool.connection_kwargs.get("encoding", "utf-8")).lower()
        # hiredis writes str arguments as UTF-8; any other encoding stays with redis-py.
        self._fast = encoding.replace("-", "") == "utf8" and wire.enabled()
        # Idle connections kept out of the pool for single commands: at most half of
        # it, so pipelines and pub/sub, which check out from the pool, always find one.
        self._keep = max(self.connection_pool.max_connections // 2, 1)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if not self._fast or wire.skips_decoding(options) or self.connection is not None:
            return super().execute_command(*args, **options)
        for arg in args:
            if type(arg) not in _PLAIN:  # bool, None, str subclasses...: redis-py's encoder decides
                return super().execute_command(*args, **options)
        name = args[0]
        if type(name) is str and " " in name:  # "CONFIG GET", "CLIENT LIST": sent as separate words
            args = (*name.split(), *args[1:])
        reply = send_commands(self, [args], raise_errors=False, keep=self._keep, check_idle_after=IDLE_CHECK, hold_gil=True)[0]
        return wire.finish_reply(self, name, reply, options)


def redis_client(*, decode_responses: bool = False, config: Config | None = None) -> AppRedis:
    """The process's Redis client for application code, on the database wurk uses.

    ``decode_responses=True`` returns ``str`` instead of ``bytes`` (a second
    client on its own pool). The client is shared by every thread of the
    process and rebuilt in a forked child. Commands are never replayed after a
    connection error (see the module's docstring).
    """
    config = config or get_config()
    return cached_client("app-decoded" if decode_responses else "app", config,
                         lambda: AppRedis(connection_pool=app_pool(config, decode_responses)))
