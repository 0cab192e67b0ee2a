"""Leader election's setting: ``WURK["LEADER"]``, read as ``config.leader``, a :class:`LeaderSettings`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..conf.setting import FEATURES, Setting
from ..conf.validators import is_number

KEYS = ("TTL", "RENEW_INTERVAL", "FOLLOWER_INTERVAL", "INITIAL_WAIT", "CACHE_TTL")


@dataclass(frozen=True)
class LeaderSettings:
    """Leader-election tuning, in seconds; the defaults are Sidekiq Enterprise's."""

    ttl: float = 30.0  # seconds the lock lives without a renewal
    renew_interval: float = 15.0  # a leader renews this often: two chances per TTL
    follower_interval: float = 60.0  # a follower checks this often whether the lock is free
    initial_wait: float = 1.0  # the first campaign waits this long, so boot spends its first round trips on jobs
    cache_ttl: float = 5.0  # is_leader() answers from memory for this long


def is_tuning(v: Any) -> bool:
    if not isinstance(v, dict) or set(v) - set(KEYS):
        return False
    if not all(is_number(x) and x >= 0 for x in v.values()):
        return False
    if any(v.get(k, 1) <= 0 for k in ("TTL", "RENEW_INTERVAL", "FOLLOWER_INTERVAL")):
        return False
    return v.get("RENEW_INTERVAL", 15) < v.get("TTL", 30)


def parse(v: dict[str, Any] | None) -> LeaderSettings:
    return LeaderSettings(**{key.lower(): float(value) for key, value in (v or {}).items()})


ROWS = (
    Setting("LEADER", None,
            lambda v: v is None or is_tuning(v),
            "None or a dict of TTL, RENEW_INTERVAL, FOLLOWER_INTERVAL, INITIAL_WAIT, CACHE_TTL seconds"
            " (RENEW_INTERVAL < TTL)",
            'Leader-election tuning, seconds: `{"TTL": 30, "RENEW_INTERVAL": 15, "FOLLOWER_INTERVAL": 60,'
            ' "INITIAL_WAIT": 1, "CACHE_TTL": 5}` (any subset; `RENEW_INTERVAL` must stay below `TTL`). The'
            " defaults are Sidekiq Enterprise's; `WURK_LEADER=false` in a process's environment keeps it from"
            " ever leading. See [periodic.md](periodic.md).", FEATURES,
            parse=parse, type=LeaderSettings),
)
