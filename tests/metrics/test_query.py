"""The metrics reader against data written exactly as Sidekiq 8's tracker writes it
(CORE-211..215): HINCRBY + EXPIRE per minute and ten-minute hash, BITFIELD
OVERFLOW SAT INCRBY u16 for the histogram."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wurk_django.metrics.query import (
    BUCKET_BOUNDS_MS,
    MetricsQuery,
    bucket_index,
    histogram_key,
    minute_key,
    ten_minute_key,
)

NOW = datetime(2025, 2, 14, 8, 43, 27, tzinfo=UTC)


def sidekiq_flush(redis, when: datetime, jobs: dict[str, dict[str, int]],
                  durations: dict[str, list[float]] | None = None) -> None:
    """What Sidekiq 8's ExecutionTracker#flush sends for one flush at ``when``."""
    minute = when.strftime("%y%m%d|") + f"{when.hour}:{when:%M}"
    tenmin = minute[:-1]
    pipe = redis.pipeline(transaction=False)
    for klass, hist in (durations or {}).items():
        counters = [0] * 26
        for ms in hist:
            counters[bucket_index(ms)] += 1
        key = f"h|{klass}-{when.day}-{when.hour}:{when.minute}"
        cmd = [key, "OVERFLOW", "SAT"]
        for i, n in enumerate(counters):
            if n:
                cmd += ["INCRBY", "u16", f"#{i}", str(n)]
        pipe.execute_command("BITFIELD", *cmd)
        pipe.expire(key, 28800)
    for key, ttl in ((f"j|{minute}", 28800), (f"j|{tenmin}", 259200)):
        for klass, fields in jobs.items():
            for kind, value in fields.items():
                pipe.hincrby(key, f"{klass}|{kind}", value)
        pipe.expire(key, ttl)
    pipe.execute()


def test_key_formats_match_sidekiq_8():
    moment = datetime(2025, 2, 4, 8, 3, tzinfo=UTC)
    assert minute_key(moment) == "j|250204|8:03"
    assert ten_minute_key(moment) == "j|250204|8:0"
    assert histogram_key("App::HardJob", moment) == "h|App::HardJob-4-8:3"
    assert minute_key(datetime(2025, 12, 31, 23, 59, tzinfo=UTC)) == "j|251231|23:59"


def test_bucket_bounds_are_first_strictly_greater():
    """CORE-212: 26-bucket u16 histogram via BITFIELD."""
    assert len(BUCKET_BOUNDS_MS) == 26
    assert bucket_index(0) == 0
    assert bucket_index(19.9) == 0
    assert bucket_index(20) == 1  # 20 is not < 20
    assert bucket_index(334_999) == 24
    assert bucket_index(10**9) == 25


def test_top_jobs_sums_the_last_hour(redis_db):
    sidekiq_flush(redis_db, NOW, {"HardJob": {"p": 3, "f": 1, "ms": 400}, "EasyJob": {"p": 10, "ms": 50}})
    sidekiq_flush(redis_db, NOW - timedelta(minutes=30), {"HardJob": {"p": 2, "ms": 600}})
    # Older than an hour: outside the default window.
    sidekiq_flush(redis_db, NOW - timedelta(minutes=61), {"HardJob": {"p": 100, "ms": 100000}})

    result = MetricsQuery(redis=redis_db, now=NOW).top_jobs()
    assert result.granularity == "minute"
    assert len(result.buckets) == 60
    assert result.buckets[0] == "2025-02-14T08:43:00Z"
    hard = result.job_results["HardJob"]
    assert (hard.processed, hard.failed, hard.total_ms) == (5, 1, 1000)
    assert hard.mean_ms == pytest.approx(250.0)  # 1000 ms over 4 successes
    assert hard.total_seconds == pytest.approx(1.0)
    assert hard.series["p"]["2025-02-14T08:13:00Z"] == 2
    assert [r.name for r in result.top()] == ["HardJob", "EasyJob"]
    assert result.job_results["EasyJob"].failed == 0


def test_top_jobs_by_hours_reads_ten_minute_keys(redis_db):
    """CORE-213: `top_jobs` with clamped periods and deploy marks."""
    sidekiq_flush(redis_db, NOW - timedelta(hours=5), {"HardJob": {"p": 4, "ms": 40}})
    sidekiq_flush(redis_db, NOW - timedelta(minutes=2), {"HardJob": {"p": 1, "ms": 10}})
    # Only the minute key: a 24 h query must not read it.
    redis_db.hincrby("j|250214|7:00", "OnlyMinute|p", 7)

    day = MetricsQuery(redis=redis_db, now=NOW).top_jobs(hours=24)
    assert day.granularity == "ten_minutes"
    assert len(day.buckets) == 144
    assert day.buckets[0] == "2025-02-14T08:40:00Z"
    assert day.job_results["HardJob"].processed == 5
    assert "OnlyMinute" not in day.job_results

    hour = MetricsQuery(redis=redis_db, now=NOW).top_jobs(minutes=60)
    assert hour.job_results["HardJob"].processed == 1


def test_filter_and_clamping(redis_db):
    sidekiq_flush(redis_db, NOW, {"Billing::ChargeJob": {"p": 1, "ms": 5}, "MailJob": {"p": 1, "ms": 5}})
    query = MetricsQuery(redis=redis_db, now=NOW)
    assert list(query.top_jobs("charge").job_results) == ["Billing::ChargeJob"]
    assert len(query.top_jobs(minutes=10_000).buckets) == 60  # > 480 falls back to 60
    assert len(query.top_jobs(hours=500).buckets) == 72 * 6


def test_for_job_reads_series_and_histogram(redis_db):
    """CORE-214: `for_job` per-bucket series."""
    sidekiq_flush(redis_db, NOW, {"HardJob": {"p": 3, "f": 1, "ms": 160}},
                  durations={"HardJob": [10, 25, 125]})
    sidekiq_flush(redis_db, NOW - timedelta(minutes=5), {"HardJob": {"p": 1, "ms": 2000}},
                  durations={"HardJob": [2000]})
    result = MetricsQuery(redis=redis_db, now=NOW).for_job("HardJob", minutes=60)
    job = result.job_results["HardJob"]
    assert (job.processed, job.failed, job.total_ms) == (4, 1, 2160)
    assert job.hist["2025-02-14T08:43:00Z"][0] == 1  # 10 ms
    assert job.hist["2025-02-14T08:43:00Z"][1] == 1  # 25 ms
    assert job.hist["2025-02-14T08:43:00Z"][5] == 1  # 125 ms
    totals = job.histogram_totals()
    assert sum(totals) == 4
    assert totals[bucket_index(2000)] == 1


def test_histogram_counters_saturate_like_sidekiq(redis_db):
    """CORE-067: `h|...` bitfield histograms, 8 h."""
    key = histogram_key("HardJob", NOW)
    redis_db.execute_command("BITFIELD", key, "OVERFLOW", "SAT", "INCRBY", "u16", "#3", "70000")
    job = MetricsQuery(redis=redis_db, now=NOW).for_job("HardJob").job_results["HardJob"]
    assert job.histogram_totals()[3] == 65535


def test_for_job_by_hours_has_no_histogram(redis_db):
    sidekiq_flush(redis_db, NOW, {"HardJob": {"p": 2, "ms": 20}}, durations={"HardJob": [10, 10]})
    result = MetricsQuery(redis=redis_db, now=NOW).for_job("HardJob", hours=8)
    assert result.job_results["HardJob"].processed == 2
    assert result.job_results["HardJob"].hist == {}


def test_deploy_marks_in_range(redis_db):
    from wurk_django.api import Deploy

    Deploy(redis=redis_db).mark("v1 inside", at=NOW - timedelta(minutes=20))
    Deploy(redis=redis_db).mark("v0 outside", at=NOW - timedelta(hours=3))
    marks = MetricsQuery(redis=redis_db, now=NOW).top_jobs().marks
    assert marks == [("2025-02-14T08:23:00Z", "v1 inside")]


def test_empty_redis_gives_empty_result(redis_db):
    result = MetricsQuery(redis=redis_db, now=NOW).top_jobs()
    assert result.job_results == {}
    assert result.top() == []
