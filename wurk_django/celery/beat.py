"""``CELERY_BEAT_SCHEDULE`` as wurk periodic loops: every worker registers the entries at
boot (with ``WURK["PERIODIC"]``, as one block) and the cluster's leader fires them, so
there is no beat process to run.

An entry ``{"task": name, "schedule": ..., "args": (...), "kwargs": {...}, "options":
{"queue": ...}}`` becomes the loop ``periodic.register(cron, name, args=..., kwargs=...,
queue=..., label=<entry name>)`` in the zone ``CELERY_TIMEZONE`` (default Django's
``TIME_ZONE``). ``options`` other than ``queue`` (and the transport ones Redis has no use
for) are refused by ``manage.py check``; a bad entry is logged and skipped at boot.
"""

from __future__ import annotations

import logging
from typing import Any

from . import django_settings as settings
from .schedules import cron_of

logger = logging.getLogger("wurk_django.celery")

#: Beat options a loop keeps (``queue``), and those accepted and ignored.
KEPT_OPTIONS = frozenset({"queue"})
IGNORED_OPTIONS = frozenset({"priority", "routing_key", "exchange", "serializer", "compression"})
ENTRY_KEYS = frozenset({"task", "schedule", "args", "kwargs", "options", "relative"})


def loop_of(name: str, entry: Any) -> tuple[str, str, dict[str, Any]]:
    """``(cron, task name, loop options)`` of one entry; ``ValueError`` names what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"CELERY_BEAT_SCHEDULE[{name!r}] must be a dict with 'task' and 'schedule'")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ValueError(f"CELERY_BEAT_SCHEDULE[{name!r}] has unknown keys {sorted(unknown)}")
    if "task" not in entry or "schedule" not in entry:
        raise ValueError(f"CELERY_BEAT_SCHEDULE[{name!r}] needs 'task' and 'schedule'")
    try:
        cron = cron_of(entry["schedule"])
    except ValueError as exc:
        raise ValueError(f"CELERY_BEAT_SCHEDULE[{name!r}]: {exc}") from None
    options: dict[str, Any] = {"label": str(name)}
    if entry.get("args"):
        options["args"] = list(entry["args"])
    if entry.get("kwargs"):
        options["kwargs"] = dict(entry["kwargs"])
    extra = dict(entry.get("options") or {})
    refused = set(extra) - KEPT_OPTIONS - IGNORED_OPTIONS
    if refused:
        raise ValueError(f"CELERY_BEAT_SCHEDULE[{name!r}] options {sorted(refused)} have no periodic counterpart "
                         "(a loop keeps 'queue'): set them on the task instead")
    queue = extra.get("queue") or settings.routed_queue(entry["task"])
    if queue:
        options["queue"] = queue
    return cron, str(entry["task"]), options


def entries() -> list[tuple[str, Any]]:
    value = settings.setting("BEAT_SCHEDULE") or {}
    if not isinstance(value, dict):
        raise ValueError(f"CELERY_BEAT_SCHEDULE must be a dict of entries, not {type(value).__name__}")
    return list(value.items())


def problems() -> list[str]:
    """What is wrong with ``CELERY_BEAT_SCHEDULE``, one message per bad entry (for ``check``)."""
    from ..periodic.config import build_loop

    try:
        found = entries()
    except ValueError as exc:
        return [str(exc)]
    out = []
    for name, entry in found:
        try:
            cron, task, options = loop_of(name, entry)
            build_loop(cron, task, settings.setting("TIMEZONE"), options)
        except ValueError as exc:
            out.append(str(exc))
    return out


def register_schedule() -> None:
    """Register every ``CELERY_BEAT_SCHEDULE`` entry as a periodic loop (at worker boot)."""
    from .. import periodic

    try:
        found = entries()
    except ValueError as exc:
        logger.error("%s: no beat entry registered", exc)
        return
    for name, entry in found:
        try:
            cron, task, options = loop_of(name, entry)
            periodic.register(cron, task, tz=settings.setting("TIMEZONE"), **options)
        except ValueError as exc:
            logger.error("beat entry skipped: %s", exc)
