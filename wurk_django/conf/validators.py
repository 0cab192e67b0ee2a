"""The checks settings rows are built from, and the queue-spec rule they share.

Plain functions of a value, importing nothing heavy, so a feature's
``settings.py`` can use them and stay light.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError

# Sidekiq takes any string as a queue name (a Rails app may push to ``mailers/high``
# or ``café``), so we do too; only control characters are refused, which no log
# line, URL or metric could show. Sidekiq's Web UI is narrower (CORE-183, DJ-004):
# docs/admin.md records the deviation.
QUEUE_NAME = re.compile(r"\A[^\x00-\x1f\x7f]+\Z")
#: :data:`QUEUE_NAME` in words, for error messages.
QUEUE_NAME_RULE = "a non-empty string without control characters"

REDIS_SCHEMES = ("redis", "rediss", "unix")


def is_queue_name(name: object) -> bool:
    """The one queue-name rule, shared by the client, the worker and the admin: any
    non-empty string without control characters, as Sidekiq accepts (``mailers/high``,
    ``café``, ``with space``). Keys, URLs, HTML and metrics escape the name where they
    show it."""
    return isinstance(name, str) and QUEUE_NAME.fullmatch(name) is not None


def parse_queue(spec: Any) -> tuple[str, int]:
    """``"name"``, ``"name,weight"`` or ``[name, weight]`` -> ``(name, weight)`` (CORE-101)."""
    if isinstance(spec, (list, tuple)) and len(spec) in (1, 2):
        name, weight = spec[0], spec[1] if len(spec) == 2 else 0
    elif isinstance(spec, str):
        name, _, weight = spec.partition(",")
        weight = weight.strip() or 0
    else:
        raise ConfigurationError(f"queue spec {spec!r} must be 'name' or 'name,weight'")
    name = str(name).strip()
    if not is_queue_name(name):
        raise ConfigurationError(f"queue name {name!r} must be {QUEUE_NAME_RULE}")
    try:
        weight = int(weight)
    except (TypeError, ValueError):
        raise ConfigurationError(f"queue weight {weight!r} in {spec!r} must be an integer") from None
    if weight < 0:
        raise ConfigurationError(f"queue weight in {spec!r} must be >= 0")
    return name, weight


def redis_url_problem(url: Any) -> str | None:
    """What is wrong with a Redis URL (the scheme, a database that is not a number), or ``None``.

    redis-py would otherwise fail later with a traceback (an unknown scheme) or
    quietly use database 0 (``/abc``).
    """
    from urllib.parse import parse_qs, urlsplit

    if not isinstance(url, str) or "://" not in url:
        return f"{url!r} is not a Redis URL (redis://host:port/db)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"{url!r} is not a valid URL: {exc}"
    if parts.scheme not in REDIS_SCHEMES:
        return f"{url!r} has scheme {parts.scheme!r}; use one of " + ", ".join(f"{s}://" for s in REDIS_SCHEMES)
    databases = parse_qs(parts.query).get("db", [])
    if parts.scheme != "unix" and parts.path not in ("", "/"):
        databases.append(parts.path.lstrip("/"))
    for db in databases:
        if not db.isdigit():
            return f"{url!r} names database {db!r}; a database is a number (redis://host:6379/0)"
    return None


def is_int(v: Any, minimum: int | None = None) -> bool:
    """An int that is not a bool (``True`` is not ``1`` here), at least ``minimum``."""
    return isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum)


def int_at_least(minimum: int) -> tuple[Callable[[Any], bool], str]:
    """A settings row's check and its words (``want``) for an integer of at least ``minimum``:
    ``Setting("MAX_RETRIES", 25, *int_at_least(0), "doc...")``."""
    return (lambda v: is_int(v, minimum)), f"an integer >= {minimum}"


def is_number(v: Any) -> bool:
    """An int or a float, never a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_hook(v: Any) -> bool:
    """``None``, a callable or a dotted path to one."""
    return v is None or callable(v) or isinstance(v, str)


def is_callables(v: Any) -> bool:
    """A list of callables or dotted paths."""
    return isinstance(v, (list, tuple)) and all(callable(x) or isinstance(x, str) for x in v)


def is_middleware(v: Any) -> bool:
    """A list of middleware classes or dotted paths, or ``(class, {kwargs})`` pairs."""
    if not isinstance(v, (list, tuple)):
        return False
    for entry in v:
        if isinstance(entry, (list, tuple)):
            entry = entry[0] if entry else None
        if not (isinstance(entry, str) or callable(entry)):
            return False
    return True


def is_strings(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def load(entry: Any) -> Any:
    """A dotted path imported, anything else as it is; ``None`` and ``""`` stay ``None``."""
    if not entry:
        return None
    if isinstance(entry, str):
        from django.utils.module_loading import import_string

        return import_string(entry)
    return entry


def load_all(entries: Any) -> list[Any]:
    return [load(e) for e in entries]
