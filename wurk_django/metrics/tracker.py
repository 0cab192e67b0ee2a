"""Execution metrics, written the way Sidekiq 8 writes them (CORE-210..216, RUN-703).

Each job execution is counted in memory under the UTC minute it finished in;
a flusher thread writes the accumulated counts every few seconds, so the hot
path never talks to Redis for metrics. ``HINCRBY`` is additive, so batching
yields the same keys and values as writing per job.

Per class and minute: ``<class>|p`` (every execution), ``<class>|f``
(failures), ``<class>|ms`` (elapsed ms of successful runs) in ``j|YYMMDD|H:MM``
(8 h) and the ten-minute key ``j|YYMMDD|H:M`` (3 d); a 26-bucket histogram of
successful durations in ``h|<class>-<d>-<H>:<M>`` (BITFIELD of u16, 8 h).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import redis as redis_lib

from ..conf import Config
from ..redis.connection import get_redis
from ..server.outage import OutageLog, is_outage
from .query import BUCKET_BOUNDS_MS, bucket_index, histogram_key, minute_key

logger = logging.getLogger("wurk_django.worker")

MINUTE_TTL = 8 * 3600
TEN_MINUTE_TTL = 3 * 24 * 3600
HISTOGRAM_TTL = 8 * 3600
FLUSH_INTERVAL = 5.0
MAX_PENDING_MINUTES = 60  # what a long outage may keep in memory; older minutes are dropped
_BUCKETS = len(BUCKET_BOUNDS_MS)


class _Counts:
    __slots__ = ("processed", "failed", "ms", "histogram")

    def __init__(self) -> None:
        self.processed = 0
        self.failed = 0
        self.ms = 0
        self.histogram = [0] * _BUCKETS

    def merge(self, other: _Counts) -> None:
        self.processed += other.processed
        self.failed += other.failed
        self.ms += other.ms
        for i, n in enumerate(other.histogram):
            self.histogram[i] += n


class MetricsTracker:
    def __init__(self, config: Config | None = None) -> None:
        self.config = config
        self._outage = OutageLog("job metrics flush", "; kept for the next flush")
        self._lock = threading.Lock()
        self._minutes: dict[int, dict[str, _Counts]] = {}

    def record(self, klass: str, elapsed_ms: float, failed: bool) -> None:
        """Count one execution; the minute is fixed now, so a late flush never misattributes it."""
        minute = int(time.time()) // 60
        with self._lock:
            classes = self._minutes.get(minute)
            if classes is None:
                classes = self._minutes[minute] = {}
            counts = classes.get(klass)
            if counts is None:
                counts = classes[klass] = _Counts()
            counts.processed += 1
            if failed:
                counts.failed += 1
            else:
                counts.ms += int(elapsed_ms)
                counts.histogram[bucket_index(elapsed_ms)] += 1

    def flush(self, redis: redis_lib.Redis | None = None) -> None:
        """Write everything recorded so far in one pipeline; on failure keep it for next time."""
        with self._lock:
            taken, self._minutes = self._minutes, {}
        if not taken:
            return
        pipe = (redis or get_redis(config=self.config)).pipeline(transaction=False)
        for minute, classes in taken.items():
            moment = datetime.fromtimestamp(minute * 60, UTC)
            for key, ttl in ((minute_key(moment), MINUTE_TTL), (minute_key(moment)[:-1], TEN_MINUTE_TTL)):
                for klass, counts in classes.items():
                    pipe.hincrby(key, f"{klass}|p", counts.processed)
                    if counts.failed:
                        pipe.hincrby(key, f"{klass}|f", counts.failed)
                    if counts.ms:
                        pipe.hincrby(key, f"{klass}|ms", counts.ms)
                pipe.expire(key, ttl)
            for klass, counts in classes.items():
                increments: list[object] = []
                for i, n in enumerate(counts.histogram):
                    if n:
                        increments += ["INCRBY", "u16", f"#{i}", n]
                if increments:
                    key = histogram_key(klass, moment)
                    pipe.execute_command("BITFIELD", key, "OVERFLOW", "SAT", *increments)
                    pipe.expire(key, HISTOGRAM_TTL)
        try:
            pipe.execute()
        except redis_lib.RedisError as exc:
            self._merge_back(taken)
            if is_outage(exc):
                self._outage.failed(exc)  # once per outage
            else:
                logger.warning("could not write job metrics (%s); kept for the next flush", exc)
        else:
            self._outage.succeeded()

    def _merge_back(self, taken: dict[int, dict[str, _Counts]]) -> None:
        with self._lock:
            for minute, classes in taken.items():
                mine = self._minutes.setdefault(minute, {})
                for klass, counts in classes.items():
                    if klass in mine:
                        mine[klass].merge(counts)
                    else:
                        mine[klass] = counts
            for minute in sorted(self._minutes)[:-MAX_PENDING_MINUTES]:
                del self._minutes[minute]
