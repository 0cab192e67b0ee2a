"""Lua scripts, read once from ``lua/*.lua`` and run by SHA.

redis-py's :class:`redis.commands.core.Script` calls EVALSHA and falls back to
loading the script on ``NOSCRIPT`` (also inside pipelines, where it loads the
scripts before executing), which is exactly the contract we need.
"""

from __future__ import annotations

import functools
from pathlib import Path

import redis

LUA_DIR = Path(__file__).parent / "lua"


@functools.cache
def source(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text()


def script(client: redis.Redis, name: str):
    """A callable ``(keys=[...], args=[...], client=None)`` for ``lua/<name>.lua``."""
    cache = client.__dict__.setdefault("_wurk_scripts", {})
    found = cache.get(name)
    if found is None:
        found = cache[name] = client.register_script(source(name))
    return found
