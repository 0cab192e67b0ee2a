"""Lua scripts, read once from ``.lua`` files and run by SHA.

Core scripts live in ``wurk_django/lua/``; a feature keeps its own next to
its code (``wurk_django/batch/lua/...``) and loads them with :func:`lua`.

Two ways to run one:

* :func:`script` / :meth:`Lua.__call__`: a blocking call, EVALSHA with the
  script loaded again on ``NOSCRIPT`` (redis-py's ``Script`` contract);
* :meth:`Lua.command`: an ``EVALSHA`` command tuple to send inside a larger
  round trip (the write path carries such commands with a push). A
  ``NOSCRIPT`` reply means the script did not run at all, so the sender may
  safely send that one command again as ``EVAL``: :func:`source_for_sha`
  gives the text for that.

A script may include a shared snippet: a line ``--!include <name>`` is replaced,
when the script is read, by the text of that snippet (named like a script, e.g.
``lua/snippets/push_job``). Redis only ever sees the whole text, so its SHA, the
``EVAL`` fallback and the load-once cache are about the script as sent. Every
script that pushes a job includes ``lua/snippets/push_job``, so "push a job onto a
queue" (and the wake-up tokens that go with it) is written once.

A worker loads every script at boot (:func:`preload`: ``SCRIPT EXISTS`` for all of
them in the round trip that checks Redis answers, ``SCRIPT LOAD`` only for those
missing), and a swarm child checks them again before it starts: its first
``EVALSHA`` then finds its script, and a Redis that cannot take a script (a
syntax it refuses, a disabled ``SCRIPT`` command) stops the boot with that error
instead of failing the first job that needs it. ``NOSCRIPT`` later on (a Redis
restarted or flushed with ``SCRIPT FLUSH``) is still handled where scripts run.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
import redis.client

logger = logging.getLogger("wurk_django")

LUA_DIR = Path(__file__).parent.parent / "lua"
PACKAGE_DIR = Path(__file__).parent.parent

_by_sha: dict[str, str] = {}
_lock = threading.Lock()
_INCLUDE = re.compile(r"^--!include ([\w/]+)[ \t]*$", re.MULTILINE)


@functools.cache
def source(name: str) -> str:
    """Text of ``lua/<name>.lua``, or of ``<name>.lua`` under the package when ``name`` has a
    ``/``, with every ``--!include <snippet>`` line replaced by that snippet's text."""
    path = (PACKAGE_DIR / f"{name}.lua") if "/" in name else (LUA_DIR / f"{name}.lua")
    return _INCLUDE.sub(lambda found: source(found.group(1)).rstrip("\n"), path.read_text())


def script(client: redis.Redis, name: str) -> Callable[..., Any]:
    """A callable ``(keys=[...], args=[...], client=None)`` for ``lua/<name>.lua`` on
    ``client`` (or on the ``client`` it is given)."""
    found = lua(name)

    def run(keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = client) -> Any:
        return found(client, keys, args)

    return run


class Lua:
    """One script, by name: ``lua("batch/lua/push")`` reads ``wurk_django/batch/lua/push.lua``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = source(name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        _remember(self.sha, self.source)

    def __call__(self, client: redis.Redis, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """Run it now: ``EVALSHA``, and on ``NOSCRIPT`` (a Redis restarted or flushed since
        it was loaded) ``SCRIPT LOAD`` and ``EVALSHA`` again. On a pipeline it is queued,
        and the pipeline loads it before it executes (redis-py's ``Script``)."""
        keys = list(keys)
        if isinstance(client, redis.client.Pipeline):
            return client.register_script(self.source)(keys=keys, args=list(args))
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            if _is_cluster_client(client):
                # A Redis Cluster (issue 46): scripts are per node, and the call went to the
                # node of its keys, so the text goes there with EVAL (which caches it there).
                return client.execute_command("EVAL", self.source, len(keys), *keys, *args)
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)

    def command(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> tuple[Any, ...]:
        """The ``EVALSHA`` command to send inside another round trip."""
        keys = list(keys)
        return ("EVALSHA", self.sha, len(keys), *keys, *args)


def _is_cluster_client(client: Any) -> bool:
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


@functools.cache
def lua(name: str) -> Lua:
    """The :class:`Lua` for ``name`` (read and hashed once per process)."""
    return Lua(name)


def all_names() -> list[str]:
    """Every script of the package, by the name :func:`lua` takes (snippets excluded:
    they are only ever sent inside the scripts that include them)."""
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.lua")):
        relative = path.relative_to(PACKAGE_DIR).with_suffix("")
        if "snippets" in relative.parts:
            continue
        names.append(relative.name if relative.parent == Path("lua") else relative.as_posix())
    return names


def preload(client: redis.Redis) -> int:
    """Check Redis answers and that it holds every script, in one round trip (``PING``
    and ``SCRIPT EXISTS``); ``SCRIPT LOAD`` the missing ones in a second. Returns how
    many were loaded. Raises the Redis error when Redis does not answer or refuses a
    script (naming the script). Safe to repeat: both commands change nothing a
    second time."""
    scripts = [lua(name) for name in all_names()]
    pipe = client.pipeline(transaction=False)
    pipe.ping()
    pipe.execute_command("SCRIPT", "EXISTS", *(script.sha for script in scripts))
    pong, present = pipe.execute(raise_on_error=False)
    if isinstance(pong, Exception):
        raise pong
    if isinstance(present, Exception):
        # A server that renamed SCRIPT away still runs EVAL: each script then goes with
        # its text the first time (the NOSCRIPT fallback), so this is no reason to stop.
        logger.warning("Redis refuses SCRIPT EXISTS (%s); Lua scripts are sent with their text on first use",
                       present)
        return 0
    missing = [script for script, there in zip(scripts, present, strict=True) if not int(there)]
    if not missing:
        return 0
    pipe = client.pipeline(transaction=False)
    for script in missing:
        pipe.execute_command("SCRIPT", "LOAD", script.source)
    replies = pipe.execute(raise_on_error=False)
    for script, reply in zip(missing, replies, strict=True):
        if isinstance(reply, Exception):
            raise type(reply)(f"Redis refused the Lua script {script.name}: {reply}") from reply
        if (reply.decode() if isinstance(reply, bytes) else str(reply)) != script.sha:
            raise redis.ResponseError(f"Redis loaded the Lua script {script.name} as {reply!r}, not {script.sha}")
    return len(missing)


def _remember(sha: str, text: str) -> None:
    with _lock:
        _by_sha[sha] = text


def source_for_sha(sha: str | bytes) -> str | None:
    """The text of a script this process loaded, by its SHA (for the ``NOSCRIPT`` fallback)."""
    if isinstance(sha, bytes):
        sha = sha.decode()
    return _by_sha.get(sha)
