"""The results feature's setting: ``WURK["TRACK_TTL"]``, read as ``config.track_ttl``: how
long the record of a job pushed with ``track=True`` is kept (docs/status.md)."""

from __future__ import annotations

from ..conf.setting import FEATURES, Setting


def _seconds(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


ROWS = (
    Setting("TRACK_TTL", 86_400,
            _seconds, "an integer number of seconds >= 1",
            "Seconds the status record of a job pushed with `track=True` is kept after each change (a class's"
            " `track = <seconds>` chooses its own); see docs/status.md.", FEATURES,
            type=int),
)
