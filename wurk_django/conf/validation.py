"""What is wrong with ``settings.WURK``: unknown keys (with a suggestion), values that fail
their row's check, bad queue specs and bad Redis servers, without touching the network."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from ..errors import ConfigurationError
from .table import current
from .targets import redis_problems
from .validators import parse_queue


@dataclass(frozen=True)
class Problem:
    key: str
    message: str
    hint: str = ""
    #: "unknown" (no such key), "value" (wrong type or value), "queue", "redis" or a
    #: row's own ``kind``; the system checks map it to an id.
    kind: str = "value"

    def __str__(self) -> str:
        return f"WURK[{self.key!r}]: {self.message}" + (f" ({self.hint})" if self.hint else "")


def raw_settings() -> dict[str, Any]:
    """``settings.WURK`` as the user wrote it (``{}`` when unset)."""
    from django.conf import settings

    value = getattr(settings, "WURK", None) or {}
    if not isinstance(value, dict):
        raise ConfigurationError(f"settings.WURK must be a dict, not {type(value).__name__}")
    return value


def problems(raw: dict[str, Any] | None = None) -> list[Problem]:
    """Everything wrong with ``settings.WURK``, without touching the network."""
    raw = raw_settings() if raw is None else raw
    table = current()
    found: list[Problem] = []
    for key, value in raw.items():
        setting = table.by_name.get(key)
        if setting is None:
            close = difflib.get_close_matches(str(key).upper(), table.by_name, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/configuration.md for the keys"
            found.append(Problem(key, "unknown setting", hint, kind="unknown"))
            continue
        if setting.detail is not None:
            detail = import_string(setting.detail)
            found.extend(Problem(key, message, kind=setting.kind) for message in detail(value))
        elif not setting.check(value):
            found.append(Problem(key, f"{value!r} is not {setting.want}", kind=setting.kind))
    if "QUEUES" in raw and isinstance(raw["QUEUES"], (list, tuple)):
        for spec in raw["QUEUES"]:
            try:
                parse_queue(spec)
            except ConfigurationError as exc:
                found.append(Problem("QUEUES", str(exc), kind="queue"))
    if raw.get("CAPSULES") and not any(p.key in ("CAPSULES", "QUEUES", "CONCURRENCY") for p in found):
        # Across two keys: a queue of QUEUES (the default capsule) in a capsule too.
        from .capsules import settings_overlap

        clash = settings_overlap(raw)
        if clash:
            found.append(Problem("CAPSULES", clash))
    found.extend(Problem(key, message, kind=kind) for key, message, kind in redis_problems(raw))
    return found
