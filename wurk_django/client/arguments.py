"""Strict job arguments: only JSON-native values may travel (CORE-046..048).

A value that would not survive a JSON round trip unchanged (a tuple, a datetime,
a model instance, a dict with integer keys...) is refused at the call site, with
its position in the arguments, rather than discovered later inside a worker.
"""

from __future__ import annotations

import enum
import logging
import math
from typing import Any

from .. import payload

logger = logging.getLogger("wurk_django.client.push")

_SCALARS = (str, bool, int, type(None))


# The payload object is level 1 and its args list level 2.
_MAX_ARG_DEPTH = payload.MAX_DEPTH - 1

_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what the JSON encoder (and Ruby readers) handle exactly


def find_complex(value: Any, path: str = "args", depth: int = 1) -> tuple[str, Any] | None:
    """Return ``(path, value)`` of the first non JSON-native value, or ``None``.

    Exact types only: an ``IntEnum``, a ``str`` subclass such as ``SafeString``
    or any other subclass would reach the worker as a plain int or str, so it
    is refused (or coerced, by the mode) rather than changed silently. Nesting
    past what the worker accepts is refused too.
    """
    kind = type(value)
    if kind is int and not _INT_MIN <= value <= _INT_MAX:
        return (path, value)
    if kind in _SCALARS:
        return None
    if kind is float:
        return None if math.isfinite(value) else (path, value)
    if kind in (list, dict) and depth > _MAX_ARG_DEPTH:
        return (f"{path} (nested deeper than {payload.MAX_DEPTH} levels in the payload)", "...")
    if type(value) is list:
        for i, item in enumerate(value):
            found = find_complex(item, f"{path}[{i}]", depth + 1)
            if found:
                return found
        return None
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                return (f"{path} key {key!r}", key)
            found = find_complex(item, f"{path}[{key!r}]", depth + 1)
            if found:
                return found
        return None
    return (path, value)


def _coerce(value: Any) -> Any:
    if type(value) in _SCALARS or (type(value) is float and math.isfinite(value)):
        return value
    if isinstance(value, enum.Enum):
        return _coerce(value.value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str.__str__(value)  # the characters, without the subclass
    if isinstance(value, (list, tuple)):
        return [_coerce(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _coerce(v) for k, v in value.items()}
    return str(value)


def check_arguments(job_class: str, args: list, mode: Any = "raise") -> list:
    """Apply ``ON_COMPLEX_ARGUMENTS`` to ``args`` and return the list to push.

    ``"raise"`` (default) raises :class:`ValueError` naming the value, its type
    and its position; ``"warn"`` logs and coerces; ``False`` coerces silently.
    """
    return _check(job_class, args, mode, "args")


def check_keyword_arguments(job_class: str, kwargs: dict, mode: Any = "raise") -> dict:
    """:func:`check_arguments` for the payload's ``kwargs`` object (positions read ``kwargs['name']``)."""
    return _check(job_class, kwargs, mode, "kwargs")


def _check(job_class: str, args: Any, mode: Any, where: str) -> Any:
    found = find_complex(args, where)
    if found is None:
        return args
    path, value = found
    message = (
        f"Job arguments to {job_class} must be native JSON types, but {value!r} "
        f"(a {type(value).__name__}) is at {path}. Pass ids, strings and numbers; "
        "for example a model's pk or a datetime's isoformat()."
    )
    if mode == "raise":
        raise ValueError(message)
    if mode == "warn":
        logger.warning("%s Coerced it.", message)
    return _coerce(args)
