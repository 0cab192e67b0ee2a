"""Stats and StatsHistory (CORE-161, CORE-162, CORE-040, CORE-055, CORE-056)."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest

from tests import fixtures
from tests.api.helpers import job, raw
from wurk_django.api import QueueSummary, Stats, StatsHistory


def test_counters_and_sizes(redis_db):
    # CORE-161: one pipeline of GET/ZCARD/SCARD/LINDEX at construction.
    redis_db.set("stat:processed", 1234)
    redis_db.set("stat:failed", 56)
    redis_db.zadd("schedule", {raw(job("s1")): 1, raw(job("s2")): 2})
    redis_db.zadd("retry", {raw(job("r1")): 1})
    redis_db.zadd("dead", {raw(job(f"d{i}")): i for i in range(4)})
    redis_db.sadd("processes", "a:1:x", "b:2:y")
    stats = Stats()
    assert (stats.processed, stats.failed) == (1234, 56)
    assert (stats.scheduled_size, stats.retry_size, stats.dead_size) == (2, 1, 4)
    assert stats.processes_size == 2
    assert stats.default_queue_latency == 0.0


def test_empty_database_reads_as_zeros(redis_db):
    stats = Stats()
    assert (stats.processed, stats.failed, stats.workers_size, stats.enqueued) == (0, 0, 0, 0)
    assert stats.queues() == {} and stats.queue_summaries() == []


def test_default_queue_latency_from_a_sidekiq7_float_payload(redis_db):
    # CORE-161 / CORE-040: a Ruby Sidekiq 7 job has float-second enqueued_at.
    redis_db.sadd("queues", "default")
    redis_db.lpush("queue:default", fixtures.raw("sidekiq7_perform_async"))
    expected = time.time() - 1700000000.1245
    assert abs(Stats().default_queue_latency - expected) < 5


def test_default_queue_latency_from_int_ms_uses_the_oldest(redis_db):
    redis_db.lpush("queue:default", raw(job("old", enqueued_at=int((time.time() - 90) * 1000))))
    redis_db.lpush("queue:default", raw(job("new", enqueued_at=int(time.time() * 1000))))
    assert 89.5 < Stats().default_queue_latency < 91


def test_workers_size_and_enqueued_are_lazy_sums(redis_db):
    # CORE-161: workers_size = Σ HGET <id> busy; enqueued = Σ LLEN over ``queues``.
    redis_db.sadd("processes", "a:1:x", "b:2:y", "gone:3:z")
    redis_db.hset("a:1:x", "busy", "3")
    redis_db.hset("b:2:y", "busy", "2")
    redis_db.sadd("queues", "default", "low", "empty")
    redis_db.lpush("queue:default", *[raw(job(f"j{i}")) for i in range(4)])
    redis_db.lpush("queue:low", raw(job("l")))
    redis_db.lpush("queue:unlisted", raw(job("u")))  # not in ``queues``: not counted
    stats = Stats()
    assert stats.workers_size == 5
    assert stats.enqueued == 5


def test_queues_and_summaries_biggest_first(redis_db):
    # CORE-161: queues() {name: size} by size desc; queue_summaries() (name, size, latency, paused).
    redis_db.sadd("queues", "a", "b", "c")
    redis_db.lpush("queue:b", *[raw(job(f"b{i}", queue="b", enqueued_at=time.time() - 30)) for i in range(3)])
    redis_db.lpush("queue:c", raw(job("c", queue="c")))
    redis_db.sadd("paused", "c")
    stats = Stats()
    assert stats.queues() == {"b": 3, "c": 1, "a": 0}
    assert list(stats.queues()) == ["b", "c", "a"]
    summaries = stats.queue_summaries()
    assert [s.name for s in summaries] == ["b", "c", "a"]
    b, c, a = summaries
    assert isinstance(b, QueueSummary)
    assert b.size == 3 and 29.5 < b.latency < 31 and b.paused is False
    assert c.paused is True
    assert a == QueueSummary(name="a", size=0, latency=0.0, paused=False)


def test_reset(redis_db):
    # CORE-161: reset(*names) = MSET stat:<n> 0; default processed + failed; day keys untouched.
    redis_db.mset({"stat:processed": 10, "stat:failed": 4, "stat:processed:2024-01-01": 7})
    Stats().reset("failed")
    assert redis_db.mget("stat:processed", "stat:failed") == [b"10", b"0"]
    Stats().reset()
    assert redis_db.mget("stat:processed", "stat:failed") == [b"0", b"0"]
    assert redis_db.get("stat:processed:2024-01-01") == b"7"
    Stats().reset("bogus")  # ignored, and no empty MSET error


def test_history_orders_days_backwards_with_missing_days_as_zero(redis_db):
    # CORE-162: MGET stat:<kind>:<date> from start backwards; missing -> 0.
    redis_db.set("stat:processed:2024-03-01", 50)
    redis_db.set("stat:processed:2024-02-28", 7)
    redis_db.set("stat:failed:2024-02-29", 2)
    history = StatsHistory(4, start=date(2024, 3, 1))
    assert history.processed() == {"2024-03-01": 50, "2024-02-29": 0, "2024-02-28": 7, "2024-02-27": 0}
    assert list(history.processed()) == ["2024-03-01", "2024-02-29", "2024-02-28", "2024-02-27"]
    assert history.failed() == {"2024-03-01": 0, "2024-02-29": 2, "2024-02-28": 0, "2024-02-27": 0}


def test_history_defaults_to_today_utc(redis_db):
    today = datetime.now(UTC).date()
    redis_db.set(f"stat:processed:{today.isoformat()}", 3)
    processed = StatsHistory(2).processed()
    assert processed == {today.isoformat(): 3, (today - timedelta(days=1)).isoformat(): 0}


def test_history_start_datetime_is_converted_to_utc(redis_db):
    from zoneinfo import ZoneInfo

    start = datetime(2024, 3, 2, 1, 0, tzinfo=ZoneInfo("Europe/Paris"))  # 2024-03-02 00:00 UTC
    late = datetime(2024, 3, 1, 23, 30, tzinfo=ZoneInfo("America/New_York"))  # 2024-03-02 04:30 UTC
    assert StatsHistory(1, start=start).dates() == ["2024-03-02"]
    assert StatsHistory(1, start=late).dates() == ["2024-03-02"]


@pytest.mark.parametrize("days", [0, -1, 1826, 2.5, True, "7"])
def test_history_rejects_out_of_range_days(days):
    # CORE-162: days must be 1..1825.
    with pytest.raises(ValueError):
        StatsHistory(days)


def test_history_accepts_the_bounds(redis_db):
    assert len(StatsHistory(1).processed()) == 1
    assert len(StatsHistory(1825, start=date(2024, 1, 1)).failed()) == 1825
