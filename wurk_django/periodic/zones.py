"""Time zones of periodic loops.

A loop registered here stores an IANA name (Django's ``TIME_ZONE`` when none is
given). A loop read back from Redis may have been written by Ruby: an empty
``tz`` there means UTC (Ruby leaves the field empty for a loop with no zone),
and a Rails zone name ("Central Time (US & Canada)") stands for its IANA zone.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .rails_zones import RAILS_ZONES

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


def iana_name(name: str) -> str:
    """``name`` as an IANA zone: a Rails zone name maps to the zone it stands for."""
    return RAILS_ZONES.get(name, name)


def is_known(name: str) -> bool:
    try:
        ZoneInfo(iana_name(name))
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def resolve(name: str | None) -> tzinfo:
    """The zone a stored loop runs in. No zone (``""`` or missing) is UTC, as Ruby
    means it; a Rails zone name is its IANA zone; an unknown name warns once per
    process and runs as UTC."""
    if not name:
        return UTC
    try:
        return ZoneInfo(iana_name(name))
    except (ZoneInfoNotFoundError, ValueError):
        with _lock:
            first = name not in _warned
            _warned.add(name)
        if first:
            logger.warning("periodic: unknown time zone %r; its loops run on UTC", name)
        return UTC
