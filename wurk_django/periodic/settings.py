"""Periodic jobs' setting: ``WURK["PERIODIC"]``, read as ``config.periodic`` (a list of entries)."""

from __future__ import annotations

from typing import Any

from ..conf.setting import FEATURES, Setting


def is_shape(v: Any) -> bool:
    """A list of dicts, each with ``cron`` and ``job``. The shape only; :func:`problems`
    adds what is wrong inside each entry (schedule, options)."""
    return isinstance(v, (list, tuple)) and all(isinstance(e, dict) and "cron" in e and "job" in e for e in v)


def problems(v: Any) -> list[str]:
    """What is wrong with ``WURK["PERIODIC"]``: its shape, then each entry (schedule, options)."""
    if not is_shape(v):
        return [f"{v!r} is not a list of {{'cron': ..., 'job': ...}} dicts (see docs/periodic.md)"]
    from .config import entry_problems  # parses schedules: loaded only when the key is set

    return list(entry_problems(v))


ROWS = (
    Setting("PERIODIC", [],
            is_shape, "a list of {'cron': ..., 'job': ...} dicts (see docs/periodic.md)",
            'Cron entries registered when a worker boots: a list of `{"cron": "0 4 * * *", "job":'
            ' "shop.jobs.Nightly", "queue": ..., "args": [...], "tz": "Asia/Tokyo", ...}` dicts, fired once per'
            " tick by the cluster's leader; see [periodic.md](periodic.md).", FEATURES,
            detail="wurk_django.periodic.settings.problems", kind="periodic",
            parse=list, type=list),
)
