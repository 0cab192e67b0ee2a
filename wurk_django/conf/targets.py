"""Which Redis a config points at: the URL it falls back on, and what is wrong with
``REDIS``, ``SHARDS`` and ``QUEUE_SHARDS`` (``Config.for_shard`` turns a shard into a
config; :mod:`wurk_django.redis.targets` resolves a value to a target)."""

from __future__ import annotations

import os
from typing import Any

from ..redis.targets import dict_problems
from .validators import redis_url_problem


def redis_url(raw: dict[str, Any] | None = None) -> str:
    """The URL of ``REDIS`` (a string or a dict's ``URL``), else ``REDIS_URL``, else the
    ``REDIS_URL`` environment variable, else ``redis://localhost:6379/0``."""
    if raw is None:
        from .validation import raw_settings

        raw = raw_settings()
    redis = raw.get("REDIS")
    if isinstance(redis, str):
        return redis
    if isinstance(redis, dict) and redis.get("URL"):
        return redis["URL"]
    return raw.get("REDIS_URL") or os.environ.get("REDIS_URL") or "redis://localhost:6379/0"


def redis_problems(raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(key, message, kind)`` for what is wrong with the Redis servers named by ``raw``."""
    found: list[tuple[str, str, str]] = []
    redis = raw.get("REDIS")
    if isinstance(redis, dict):
        found += [("REDIS", message, "redis") for message in dict_problems(redis)]
        url = redis.get("URL")
        if isinstance(url, str) and "://" in url and redis_url_problem(url):
            # A scheme redis-py does not know, or a database that is not a number.
            found.append(("REDIS", f"URL {redis_url_problem(url)}", "redis"))
    env_url = os.environ.get("REDIS_URL")
    if not redis and not raw.get("REDIS_URL") and env_url and redis_url_problem(env_url):
        found.append(("REDIS_URL", f"(from the REDIS_URL environment variable) {redis_url_problem(env_url)}",
                      "value"))
    return found + _shard_problems(raw)


def _shard_problems(raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    found = []
    shards = raw.get("SHARDS")
    if isinstance(shards, dict):
        for name, value in shards.items():
            if isinstance(value, str):
                if redis_url_problem(value):
                    found.append(("SHARDS", f"{name!r}: {redis_url_problem(value)}", "redis"))
            elif isinstance(value, dict):
                found.extend(("SHARDS", f"{name!r}: {m}", "redis") for m in dict_problems(value))
            else:
                found.append(("SHARDS", f"{name!r}: {value!r} is neither a URL nor a dict", "redis"))
    else:
        shards = {}
    queue_shards = raw.get("QUEUE_SHARDS")
    if isinstance(queue_shards, dict):
        for queue, name in queue_shards.items():
            if isinstance(name, str) and name != "default" and name not in shards:
                found.append(("QUEUE_SHARDS", f"queue {queue!r} names shard {name!r}, which is not in SHARDS",
                              "redis"))
    return found
