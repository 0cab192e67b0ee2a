"""``Deploy``: deploy marks shown on the metrics charts (CORE-172, CORE-068, CORE-069)."""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime

from .. import keys
from ..text import to_text
from ._base import RedisClient, cluster_aware, one_slot

__all__ = ["Deploy"]

MARKS_TTL = 90 * 24 * 3600  # a day's marks hash lives 90 days, as Sidekiq keeps it (CORE-068)
LOCK_TTL = 60  # one mark per label per minute across all hosts (CORE-069)


def default_label() -> str:
    """``git log -1 --format="%h %s"`` of the current directory, or ``""`` outside git."""
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


class Deploy:
    """Record and read deploy marks."""

    def __init__(self, redis: RedisClient | None = None) -> None:
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        # A Redis Cluster's client too (issue 46 item 3): a mark's keys are used alone.
        return cluster_aware(self._redis)

    def mark(self, label: str | None = None, at: datetime | None = None) -> str | None:
        """Mark a deploy at ``at`` (default now), floored to the UTC minute, labelled
        ``label`` (default: ``git log -1 --format="%h %s"``).

        Many hosts deploying the same release call this at once: the
        ``deploylock-<label>`` lock lets one of them write. Returns the mark's time
        (``YYYY-MM-DDTHH:MM:00Z``) when this call wrote it; ``None`` when another
        host did, or when there is no label (outside git, with none given) (ENT-551).
        """
        label = default_label() if label is None else label
        if not label:
            return None
        at = at or datetime.now(UTC)
        at = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC).replace(second=0, microsecond=0)
        iso = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        redis = self.redis
        if not redis.set(keys.deploy_lock(label), iso, nx=True, ex=LOCK_TTL):
            return None
        key = keys.deploy_marks(at.date())
        pipe = one_slot(redis, key).pipeline(transaction=True)
        pipe.hset(key, iso, label)
        pipe.expire(key, MARKS_TTL)
        pipe.execute()
        return iso

    def fetch(self, day: date | datetime | None = None) -> dict[str, str]:
        """``{ISO minute: label}`` for one UTC day (default today)."""
        if day is None:
            day = datetime.now(UTC).date()
        elif isinstance(day, datetime):
            day = (day if day.tzinfo else day.replace(tzinfo=UTC)).astimezone(UTC).date()
        marks = self.redis.hgetall(keys.deploy_marks(day))
        return {to_text(k): to_text(v) for k, v in sorted(marks.items())}
