"""Historical metrics' setting: ``WURK["HISTORY"]``, read as ``config.history``, a
:class:`HistorySettings` (``None`` when the setting is ``False``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..conf.setting import FEATURES, Setting
from ..conf.validators import is_int, is_number

KEYS = ("ROLLUP_INTERVAL", "SNAPSHOT_INTERVAL", "STREAM_CAP")


@dataclass(frozen=True)
class HistorySettings:
    """Seconds between rollups (``0``: none) and between snapshots (``None``: none), and
    about how many entries the ``history:metrics`` stream keeps."""

    rollup_interval: float = 60
    snapshot_interval: float | None = None
    stream_cap: int = 10_000


def is_history(v: Any) -> bool:
    if v is False:
        return True
    if not isinstance(v, dict) or set(v) - set(KEYS):
        return False
    rollup, snap, cap = v.get("ROLLUP_INTERVAL", 60), v.get("SNAPSHOT_INTERVAL"), v.get("STREAM_CAP", 10_000)
    return ((is_number(rollup) and (rollup == 0 or rollup >= 5)) and (snap is None or (is_number(snap) and snap >= 1))
            and is_int(cap, 100))


def parse(v: dict[str, Any] | bool) -> HistorySettings | None:
    if v is False:
        return None
    return HistorySettings(**{key.lower(): value for key, value in (v or {}).items()})


ROWS = (
    Setting("HISTORY", {},
            is_history, "False or a dict of ROLLUP_INTERVAL (seconds, 0 off), SNAPSHOT_INTERVAL (None off) and"
            " STREAM_CAP (an integer >= 100)",
            'Historical metrics (the admin\'s Historical tab): `{"ROLLUP_INTERVAL": 60, "SNAPSHOT_INTERVAL": None,'
            ' "STREAM_CAP": 10000}`. Every `ROLLUP_INTERVAL` seconds one process (the leader) rolls throughput and'
            " queue size/latency up into 1 m / 5 m / 1 h buckets (kept 1 / 7 / 30 days; `0` stops it); every"
            " `SNAPSHOT_INTERVAL` seconds it appends the dashboard totals to the `history:metrics` stream (capped at"
            " about `STREAM_CAP` entries) and sends them as statsd gauges when `STATSD` is set. `False` turns all"
            " of it off. See [operations.md](operations.md).", FEATURES,
            parse=parse, type=HistorySettings | None),
)
