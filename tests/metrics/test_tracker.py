"""The worker-side metrics tracker writes Sidekiq 8's keys (CORE-210..212)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from wurk_django.metrics import tracker as tracker_module
from wurk_django.metrics.query import MetricsQuery, histogram_key, minute_key
from wurk_django.metrics.tracker import MetricsTracker

NOW = time.time()


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    """Record every execution at one instant, so no test straddles a minute boundary. The
    instant is taken when the test starts, not at import: the readers look back from the
    real clock, and a long suite runs this module many minutes after collecting it."""
    global NOW
    NOW = time.time()
    monkeypatch.setattr(tracker_module.time, "time", lambda: NOW)


def _now() -> datetime:
    return datetime.fromtimestamp(NOW, UTC)


def test_flush_writes_minute_ten_minute_and_histogram_keys(redis_db):
    """CORE-065: per-minute metrics hash, 8 h; CORE-066: ten-minute metrics hash, 3 d; CORE-215: only the Sidekiq 8 key
    layout is written; CORE-251: metrics keys in the Sidekiq 8 layout."""
    tracker = MetricsTracker()
    tracker.record("shop.jobs.Mail", 12.0, failed=False)  # bucket 0 (< 20 ms)
    tracker.record("shop.jobs.Mail", 120.0, failed=False)  # bucket 5 (100..150)
    tracker.record("shop.jobs.Mail", 5.0, failed=True)
    now = _now()
    tracker.flush(redis_db)
    minute = minute_key(now)
    assert redis_db.hgetall(minute) == {b"shop.jobs.Mail|p": b"3", b"shop.jobs.Mail|f": b"1",
                                        b"shop.jobs.Mail|ms": b"132"}
    assert redis_db.hgetall(minute[:-1]) == redis_db.hgetall(minute)
    assert 0 < redis_db.ttl(minute) <= 8 * 3600 and 8 * 3600 < redis_db.ttl(minute[:-1]) <= 3 * 86400
    counts = redis_db.execute_command("BITFIELD_RO", histogram_key("shop.jobs.Mail", now),
                                      *sum((["GET", "u16", f"#{i}"] for i in range(26)), []))
    assert counts[0] == 1 and counts[5] == 1 and sum(counts) == 2  # failures have no duration
    # The dashboard's reader sees the same numbers.
    job = MetricsQuery(redis=redis_db).top_jobs(minutes=5).job_results["shop.jobs.Mail"]
    assert (job.processed, job.failed, job.total_ms) == (3, 1, 132)


def test_flushes_add_up_and_nothing_is_written_when_idle(redis_db):
    tracker = MetricsTracker()
    tracker.flush(redis_db)
    assert redis_db.dbsize() == 0
    for _ in range(2):
        tracker.record("A", 1.0, failed=False)
        tracker.flush(redis_db)
    assert redis_db.hget(minute_key(_now()), "A|p") == b"2"


def test_a_failed_flush_keeps_the_counts(redis_db, caplog):
    """CORE-216: a metrics write that fails is reported and raises nothing (a job's outcome
    never depends on it: ``record`` only counts in memory); the counts wait for the next flush."""
    import logging

    import redis

    tracker = MetricsTracker()
    tracker.record("A", 1.0, failed=False)
    dead = redis.Redis(port=1, socket_connect_timeout=0.2)
    with caplog.at_level(logging.WARNING):
        tracker.flush(dead)
    assert any(r.levelno >= logging.WARNING for r in caplog.records)
    tracker.flush(redis_db)
    assert redis_db.hget(minute_key(_now()), "A|p") == b"1"


def test_run_703_the_minute_is_fixed_at_record_time_and_an_outage_keeps_the_last_60(redis_db, monkeypatch):
    """RUN-703: counts accumulate in memory under the minute they were recorded in (a late
    flush lags, it never moves them to its own minute); the flush swaps the tree out and
    writes it in one go; a failed flush merges it back, keeping at most the 60 newest
    minutes."""
    start = (int(NOW) // 60 - 70) * 60 + 30  # mid-minute, 70 minutes ago
    clock = [start]
    monkeypatch.setattr(tracker_module.time, "time", lambda: clock[0])
    tracker = MetricsTracker()
    tracker.record("A", 1.0, failed=False)
    clock[0] += 180  # flushed three minutes later: still counted in its own minute
    tracker.flush(redis_db)
    first = datetime.fromtimestamp(start, UTC)
    assert redis_db.hget(minute_key(first), "A|p") == b"1"
    assert not redis_db.exists(minute_key(datetime.fromtimestamp(clock[0], UTC)))
    # An outage of 65 minutes: one execution a minute, every flush failing.
    redis_db.flushdb()
    import redis

    dead = redis.Redis(port=1, socket_connect_timeout=0.2)
    moments = []
    for _ in range(65):
        moments.append(datetime.fromtimestamp(clock[0], UTC))
        tracker.record("A", 1.0, failed=False)
        clock[0] += 60
    tracker.flush(dead)
    tracker.flush(redis_db)
    written = [m for m in moments if redis_db.hget(minute_key(m), "A|p") == b"1"]
    assert written == moments[5:]  # the oldest five dropped, the 60 newest kept
