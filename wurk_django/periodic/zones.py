"""Time zones of periodic loops: IANA names, Django's ``TIME_ZONE`` by default."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

logger = logging.getLogger("wurk_django.periodic")

_warned: set[str] = set()
_lock = threading.Lock()


def default_zone_name() -> str:
    """Django's ``TIME_ZONE`` (``"UTC"`` when unset)."""
    from django.conf import settings

    return getattr(settings, "TIME_ZONE", None) or "UTC"


def zone_name(tz: str | tzinfo | None) -> str:
    """The IANA name stored for ``tz`` (a name, a ``ZoneInfo``, or None for the default)."""
    if tz is None or tz == "":
        return default_zone_name()
    if isinstance(tz, ZoneInfo):
        return tz.key
    if tz is UTC:
        return "UTC"
    if isinstance(tz, str):
        return tz
    raise ValueError(f"a periodic time zone must be an IANA name or a ZoneInfo, not {tz!r}")


def is_known(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def resolve(name: str | None) -> tzinfo:
    """The zone called ``name``; an unknown name warns once per process and runs as UTC."""
    name = name or default_zone_name()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        with _lock:
            first = name not in _warned
            _warned.add(name)
        if first:
            logger.warning("periodic: unknown time zone %r; its loops run on UTC", name)
        return UTC
