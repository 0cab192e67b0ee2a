"""The retry layer in-process (CORE-120..131), against the test Redis."""

from __future__ import annotations

import json
import time

import pytest

from wurk_django import Job, payload
from wurk_django.backtrace import decompress
from wurk_django.conf import Config
from wurk_django.errors import Shutdown
from wurk_django.outcome import Outcome
from wurk_django.server.retry import Retrier, caused_by_shutdown, error_class_name, exhausted, limit_of


def _raw(**fields) -> bytes:
    job = {"retry": True, "queue": "default", "class": "tests.X", "args": [1], "jid": "c" * 24,
           "created_at": 1, "enqueued_at": 1, **fields}
    return payload.dumps(job)


def _fail(exc_type=RuntimeError, message="boom"):
    try:
        raise exc_type(message)
    except exc_type as exc:
        return exc


class Plain(Job):
    def perform(self):
        pass


def book(retrier, raw, exc, job_class=Plain) -> Outcome:
    outcome = retrier.book(job_class, raw, "default", exc)
    assert outcome in (Outcome.RETRIED, Outcome.DEAD, Outcome.DISCARDED)
    return outcome


@pytest.fixture
def retrier():
    return Retrier(Config())


def test_second_failure_sets_retried_at_and_counts_up(redis_db, retrier):
    """CORE-023: `retried_at` on later failures."""
    book(retrier, _raw(retry_count=0, failed_at=5), _fail())
    job = json.loads(redis_db.zrange("retry", 0, -1)[0])
    assert job["retry_count"] == 1 and job["failed_at"] == 5 and isinstance(job["retried_at"], int)  # CORE-122


def test_retry_queue_replaces_the_queue(redis_db, retrier):
    book(retrier, _raw(retry_queue="slow"), _fail())
    assert json.loads(redis_db.zrange("retry", 0, -1)[0])["queue"] == "slow"  # CORE-019


def test_retry_false_runs_death_handlers_without_the_morgue(redis_db):
    # CORE-015: `retry: false` means no retry and no morgue.
    died = []
    retrier = Retrier(Config(DEATH_HANDLERS=[lambda job, exc: died.append((job["jid"], str(exc)))]))
    exc = _fail()
    # With the class known or not, retries off end the job: handlers run, nothing is kept (CORE-120).
    assert retrier.book(Plain, _raw(retry=False), "default", exc) is Outcome.DISCARDED
    assert retrier.book(None, _raw(retry=False), "default", exc) is Outcome.DISCARDED
    assert died == [("c" * 24, "boom")] * 2
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0  # CORE-125


def test_dead_false_discards_after_exhaustion(redis_db):
    died = []
    retrier = Retrier(Config(DEATH_HANDLERS=[lambda job, exc: died.append(job)]))
    book(retrier, _raw(retry=0, dead=False), _fail())
    assert redis_db.zcard("dead") == 0
    assert "discarded_at" in died[0]  # CORE-028, CORE-126


class Hooked(Job):
    retry = 5
    outcome = None

    @classmethod
    def retry_in(cls, count, exc, job):
        return cls.outcome

    @classmethod
    def retries_exhausted(cls, job, exc):
        job["exhausted_hook"] = True


@pytest.mark.parametrize("outcome,where", [(120, "retry"), ("kill", "dead"), ("discard", None), ("default", "retry"),
                                           ("nonsense", "retry")])
def test_retry_in_hook(redis_db, retrier, outcome, where):
    """CORE-129: a ``retry_in`` hook's seconds, or the strings "kill", "discard" and "default"
    (anything else is the default too)."""
    Hooked.outcome = outcome
    now = time.time()
    book(retrier, _raw(retry=5), _fail(), Hooked)
    if where is None:
        assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
        return
    (member, score), = redis_db.zrange(where, 0, -1, withscores=True)
    if outcome == 120:
        assert now + 120 - 1 <= score < now + 120 + 10 + 1  # CORE-123 + jitter
    if outcome in ("default", "nonsense"):
        assert now + 15 - 1 <= score < now + 15 + 10 + 1  # anything else: the default delay
    if where == "dead":
        assert json.loads(member).get("exhausted_hook") is True  # the kill path runs the hook


def test_failing_retry_in_hook_falls_back_to_default(redis_db, retrier):
    class Broken(Job):
        @classmethod
        def retry_in(cls, count, exc, job):
            raise ZeroDivisionError

    now = time.time()
    book(retrier, _raw(), _fail(), Broken)
    (_, score), = redis_db.zrange("retry", 0, -1, withscores=True)
    assert now + 14 <= score < now + 26


def test_retry_for_ignores_the_count(redis_db, retrier):
    # failed two hours ago with retry_for one hour: exhausted whatever the count (CORE-122 step 6).
    """CORE-020: `retry_for` seconds, validated, overrides counts."""
    book(retrier, _raw(retry_for=3600, retry_count=0, failed_at=int((time.time() - 7200) * 1000)), _fail())
    assert redis_db.zcard("dead") == 1 and redis_db.zcard("retry") == 0
    book(retrier, _raw(retry_for=3600, retry_count=40, failed_at=int(time.time() * 1000)), _fail())
    assert redis_db.zcard("retry") == 1


def test_backtrace_option_limits_frames_and_round_trips(redis_db, retrier):
    """CORE-026: ``backtrace: N`` keeps the first N frames, innermost first."""
    def deep(n):
        if n == 0:
            raise ValueError("deep")
        deep(n - 1)

    try:
        deep(5)
    except ValueError as exc:
        error = exc
    book(retrier, _raw(backtrace=2), error)
    lines = decompress(json.loads(redis_db.zrange("retry", 0, -1)[0])["error_backtrace"])
    assert len(lines) == 2
    assert lines[0].endswith(":in 'deep'") and "test_retry.py" in lines[0]  # innermost first
    # CORE-026: without the option no backtrace is kept; with true, every frame is.
    redis_db.delete("retry")
    book(retrier, _raw(jid="e" * 24), error)
    book(retrier, _raw(jid="f" * 24, backtrace=True), error)
    entries = {entry["jid"]: entry for entry in map(json.loads, redis_db.zrange("retry", 0, -1))}
    assert "error_backtrace" not in entries["e" * 24]
    every = decompress(entries["f" * 24]["error_backtrace"])
    assert sum(line.endswith(":in 'deep'") for line in every) == 6 and len(every) == 7  # 6 deep + the test


def test_dead_set_trims_by_size_and_age(redis_db):
    retrier = Retrier(Config(DEAD_MAX_JOBS=3, DEAD_TIMEOUT_IN_SECONDS=100))
    redis_db.zadd("dead", {b"ancient": time.time() - 1000})
    for i in range(4):
        book(retrier, _raw(retry=0, jid=f"{i:024d}"), _fail())
    # CORE-140: the rank trim keeps at most DEAD_MAX_JOBS - 1 entries; the old one is gone.
    members = redis_db.zrange("dead", 0, -1)
    assert len(members) == 2 and b"ancient" not in members


def test_error_class_names():
    assert error_class_name(KeyError()) == "KeyError"  # CORE-025
    assert error_class_name(Shutdown()) == "wurk_django.errors.Shutdown"


def test_shutdown_in_the_cause_chain_is_shutdown(retrier):
    try:
        try:
            raise Shutdown()
        except Shutdown:
            raise RuntimeError("wrapped")  # noqa: B904 - the implicit context is the point
    except RuntimeError as exc:
        wrapped = exc
    assert caused_by_shutdown(wrapped)  # CORE-121
    assert retrier.book(Plain, _raw(), "default", wrapped) is Outcome.INTERRUPTED
    assert retrier.book(None, _raw(), "default", wrapped) is Outcome.INTERRUPTED


def test_the_one_retry_rule_says_when_a_failure_ends_the_job():
    # The rule the retry layer books by, and the result records read (issue 41 item 5).
    # CORE-015: true is MAX_RETRIES (25) retries, N is N, false none.
    assert limit_of({"retry": True}, 25) == 25 and limit_of({"retry": 7}, 25) == 7
    assert exhausted({"retry": False}, 25)
    assert exhausted({"retry": 0}, limit_of({"retry": 0}, 25))
    assert not exhausted({"retry": True}, 25)
    assert not exhausted({"retry": True, "retry_count": 23}, 25)
    assert exhausted({"retry": True, "retry_count": 24}, 25)
    assert not exhausted({"retry": 3, "retry_count": 1}, limit_of({"retry": 3}, 25))
    assert exhausted({"retry": 3, "retry_count": 2}, limit_of({"retry": 3}, 25))
    now = 1_000_000.0
    assert not exhausted({"retry": True, "retry_for": 60, "retry_count": 0, "failed_at": int((now - 30) * 1000)},
                         25, now)
    assert exhausted({"retry": True, "retry_for": 60, "retry_count": 0, "failed_at": int((now - 61) * 1000)}, 25, now)


def test_a_job_class_may_widen_its_retry_limit_per_failure(redis_db, retrier):
    class Patient(Job):
        @classmethod
        def retry_limit(cls, job, exc):
            return 5 if isinstance(exc, TimeoutError) else None

    job = {"retry": 1, "retry_count": 1}
    assert limit_of(job, 25, Patient, TimeoutError()) == 5
    assert limit_of(job, 25, Patient, ValueError()) == 1
    raw = payload.dumps({"class": "Patient", "args": [], "jid": "a" * 24, "queue": "default", **job})
    assert retrier.book(Patient, raw, "default", TimeoutError("slow")) is Outcome.RETRIED
    assert retrier.book(Patient, raw, "default", ValueError("bad")) is Outcome.DEAD
