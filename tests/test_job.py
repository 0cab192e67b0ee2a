"""Job classes, @job, perform_in/at, set(), perform_inline and on-commit pushes (CORE-086..088, CORE-091)."""

from __future__ import annotations

import datetime as dt
import time
import zoneinfo

import pytest
from django.db import transaction
from django.test import override_settings

from tests.jobsapp.jobs import RecordJob, RubyNamedJob, add_numbers
from tests.support import queued, wurk_settings
from wurk_django import Job, job, payload, registry

pytestmark = pytest.mark.usefixtures("isolated_registry")


def _schedule(redis_db):
    return [(payload.loads(m), s) for m, s in redis_db.zrange("schedule", 0, -1, withscores=True)]


# --- options -------------------------------------------------------------------------------------


def test_options_come_from_class_attributes_and_inherit():
    class Base(Job):
        queue = "mail"
        retry = 5
        job_options = {"locale": "fr"}

    class Child(Base):
        backtrace = 10
        job_options = {"tenant": 3}

    assert Child.get_options() == {"locale": "fr", "tenant": 3, "queue": "mail", "retry": 5, "backtrace": 10}
    assert Base.get_options() == {"locale": "fr", "queue": "mail", "retry": 5}


def test_retry_false_and_zero_are_kept():  # CORE-005: both are real settings, not "unset"
    class Never(Job):
        retry = False

    class Once(Job):
        retry = 0

    assert Never.get_options()["retry"] is False
    assert Once.get_options()["retry"] == 0


def test_job_options_must_be_a_dict():
    with pytest.raises(TypeError, match="job_options must be a dict"):
        class Bad(Job):
            name = "BadOptions"
            job_options = [("a", 1)]


def test_perform_must_be_defined():
    with pytest.raises(NotImplementedError, match="perform"):
        Job().perform()


def test_async_perform_is_awaited():
    class Coro(Job):
        async def perform(self, x):
            return x * 2

    assert Coro().run([21]) == 42


def test_interrupted_follows_the_stop_flag():
    """CORE-115: `job.interrupted()` true once stopping."""
    import threading

    instance = RecordJob()
    assert instance.interrupted() is False
    instance._stop_flag = threading.Event()
    assert instance.interrupted() is False
    instance._stop_flag.set()
    assert instance.interrupted() is True


# --- @job ----------------------------------------------------------------------------------------


def test_job_function_is_still_callable():
    calls = []

    @job
    def collect(x):
        calls.append(x)
        return x

    assert collect(3) == 3
    assert calls == [3]
    assert collect.__name__ == "collect"


def test_job_decorator_options(redis_db):
    assert add_numbers.get_options() == {"queue": "functions", "retry": 2}
    jid = add_numbers.perform_async(2, 3)
    [stored] = queued(redis_db, "functions")
    assert (stored["jid"], stored["class"], stored["retry"]) == (jid, "tests.jobsapp.jobs.add_numbers", 2)


def test_job_decorator_refuses_unknown_options():
    with pytest.raises(TypeError, match="qeue"):
        @job(qeue="mail")
        def typo():
            pass


def test_job_decorator_hooks_are_plain_functions():
    """CORE-129: ``retry_in=`` and ``retries_exhausted=`` are options of ``@job``."""
    def delay(count, exc, job):
        return 10 * (count + 1)

    def exhausted(job, exc):
        return "discard"

    @job(retry=3, retry_in=delay, retries_exhausted=exhausted, name="HookedJob")
    def hooked():
        pass

    assert hooked.job_class.retry_in(1, None, {}) == 20
    assert hooked.job_class.retries_exhausted({}, None) == "discard"
    assert registry.resolve("HookedJob") is hooked.job_class


def test_job_function_hides_other_attributes():
    with pytest.raises(AttributeError):
        add_numbers.not_there  # noqa: B018


# --- perform_in / perform_at (CORE-086) ----------------------------------------------------------


def test_relative_seconds(redis_db):
    before = time.time()
    jid = RecordJob.perform_in(60, "x")
    [(stored, score)] = _schedule(redis_db)
    assert stored["jid"] == jid
    assert before + 60 <= score <= time.time() + 60
    assert "at" not in stored and "enqueued_at" not in stored
    assert not redis_db.exists("queue:default")


def test_threshold_just_below_1e9_is_relative(redis_db):
    before = time.time()
    RecordJob.perform_in(999_999_999, "x")
    [(_, score)] = _schedule(redis_db)
    assert score >= before + 999_999_999


def test_threshold_1e9_is_absolute_and_so_in_the_past(redis_db):
    jid = RecordJob.perform_in(1_000_000_000, "x")
    assert redis_db.zcard("schedule") == 0
    [stored] = queued(redis_db)
    assert stored["jid"] == jid and "at" not in stored


def test_absolute_epoch_in_the_future(redis_db):
    at = time.time() + 7200.25
    RecordJob.perform_at(at, "x")
    [(_, score)] = _schedule(redis_db)
    assert score == at


# Named ids: the epoch's own value would differ between two collections (pytest -n 2's workers
# must collect the same tests).
@pytest.mark.parametrize("when", [0, -5, time.time() - 10, dt.timedelta(seconds=-1)],
                         ids=["zero", "negative", "epoch-10s-ago", "timedelta"])
def test_past_or_now_pushes_immediately(redis_db, when):
    RecordJob.perform_in(when, "x")
    assert redis_db.zcard("schedule") == 0
    [stored] = queued(redis_db)
    assert "at" not in stored
    assert "enqueued_at" in stored


def test_timedelta_is_relative(redis_db):
    before = time.time()
    RecordJob.perform_in(dt.timedelta(minutes=5), "x")
    [(_, score)] = _schedule(redis_db)
    assert before + 300 <= score <= time.time() + 300


def test_aware_datetime_is_absolute(redis_db):
    when = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=2)
    RecordJob.perform_at(when, "x")
    [(_, score)] = _schedule(redis_db)
    assert score == when.timestamp()


def test_naive_datetime_uses_the_default_time_zone(redis_db):
    naive = (dt.datetime.now() + dt.timedelta(days=2)).replace(microsecond=0)
    with override_settings(TIME_ZONE="America/New_York"):
        RecordJob.perform_at(naive, "x")
    [(_, score)] = _schedule(redis_db)
    assert score == naive.replace(tzinfo=zoneinfo.ZoneInfo("America/New_York")).timestamp()


@pytest.mark.parametrize("when", [True, "60", None, [60]])
def test_bad_run_times_are_refused(redis_db, when):
    with pytest.raises(ValueError, match="run time"):
        RecordJob.perform_in(when, "x")
    assert redis_db.keys("*") == []


# --- set() (CORE-087) ----------------------------------------------------------------------------


def test_set_overlays_options_for_one_call(redis_db):
    RubyNamedJob.set(queue="critical", retry=False, tags=["a"]).perform_async(1)
    RubyNamedJob.perform_async(2)
    [critical] = queued(redis_db, "critical")
    [default] = queued(redis_db, "default")
    assert (critical["queue"], critical["retry"], critical["tags"]) == ("critical", False, ["a"])
    assert (default["queue"], default["retry"], "tags" in default) == ("default", True, False)


def test_set_chains_and_later_wins(redis_db):
    RecordJob.set(queue="a", retry=1).set(queue="b").perform_async(1)
    [stored] = queued(redis_db, "b")
    assert stored["retry"] == 1


def test_set_jid(redis_db):
    assert RecordJob.set(jid="d" * 24).perform_async(1) == "d" * 24
    assert queued(redis_db)[0]["jid"] == "d" * 24


def test_set_wait_is_relative(redis_db):
    before = time.time()
    RecordJob.set(wait=120).perform_async(1)
    [(stored, score)] = _schedule(redis_db)
    assert before + 120 <= score <= time.time() + 120
    assert "wait" not in stored


def test_set_wait_until_datetime(redis_db):
    when = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=1)
    RecordJob.set(wait_until=when).perform_async(1)
    [(stored, score)] = _schedule(redis_db)
    assert score == when.timestamp()
    assert "wait_until" not in stored


def test_set_wait_in_the_past_pushes_now(redis_db):
    RecordJob.set(wait=-5).perform_async(1)
    assert redis_db.zcard("schedule") == 0
    assert redis_db.llen("queue:default") == 1


def test_set_transient_options_are_not_persisted(redis_db):  # CORE-038
    RecordJob.set(pool="shard-2", client_class="x.Y").perform_async(1)
    [stored] = queued(redis_db)
    assert "pool" not in stored and "client_class" not in stored


def test_set_sync_runs_inline_without_redis(redis_db):  # CORE-087
    ran = []

    class Inline(Job):
        def perform(self, x):
            ran.append(x)

    assert Inline.set(sync=True, jid="e" * 24).perform_async(7) == "e" * 24
    assert ran == [7]
    assert redis_db.keys("*") == []


def test_set_perform_in_overrides_wait(redis_db):
    before = time.time()
    RecordJob.set(wait=10_000).perform_in(30, 1)
    [(_, score)] = _schedule(redis_db)
    assert score <= before + 31


def test_set_perform_bulk_applies_options(redis_db):
    RecordJob.set(queue="bulk").perform_bulk([[1], [2]])
    assert [j["queue"] for j in queued(redis_db, "bulk")] == ["bulk", "bulk"]


# --- perform_inline (CORE-088) -------------------------------------------------------------------


def test_perform_inline_round_trips_arguments_through_json(redis_db):
    seen = []

    class Echo(Job):
        queue = "x"

        def perform(self, *args):
            seen.append((args, self.jid, self.payload["queue"]))

    assert Echo.perform_inline({"a": [1, 2]}, "s", 1.5) is True
    [(args, jid, queue)] = seen
    assert args == ({"a": [1, 2]}, "s", 1.5)
    assert len(jid) == 24 and queue == "x"
    assert redis_db.keys("*") == []


def test_perform_inline_refuses_complex_arguments():
    with pytest.raises(ValueError, match="tuple"):
        RecordJob.perform_inline((1, 2))


def test_perform_inline_propagates_job_errors():
    class Boom(Job):
        def perform(self):
            raise RuntimeError("inline boom")

    with pytest.raises(RuntimeError, match="inline boom"):
        Boom.perform_inline()


# --- transactional push (CORE-091, DJ-030) -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_on_commit_pushes_after_commit(redis_db):
    with transaction.atomic():
        jid = RecordJob.set(on_commit=True).perform_async(1)
        assert len(jid) == 24
        assert redis_db.llen("queue:default") == 0
    [stored] = queued(redis_db)
    assert stored["jid"] == jid
    assert "on_commit" not in stored


@pytest.mark.django_db(transaction=True)
def test_rollback_pushes_nothing(redis_db):
    with pytest.raises(RuntimeError), transaction.atomic():
        RecordJob.set(on_commit=True).perform_async(1)
        RecordJob.set(on_commit=True).perform_in(60, 2)
        raise RuntimeError("roll back")
    assert redis_db.keys("*") == []


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_setting(redis_db):
    with wurk_settings(ENQUEUE_ON_COMMIT=True):
        with transaction.atomic():
            RecordJob.perform_async(1)
            assert redis_db.llen("queue:default") == 0
        assert redis_db.llen("queue:default") == 1
        with pytest.raises(RuntimeError), transaction.atomic():
            RecordJob.perform_async(2)
            raise RuntimeError("roll back")
    assert [j["args"] for j in queued(redis_db)] == [[1]]


@pytest.mark.django_db(transaction=True)
def test_on_commit_false_overrides_the_setting(redis_db):
    with wurk_settings(ENQUEUE_ON_COMMIT=True), transaction.atomic():
        RecordJob.set(on_commit=False).perform_async(1)
        assert redis_db.llen("queue:default") == 1


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_on_commit_pushes_at_once(redis_db):
    RecordJob.set(on_commit=True).perform_async(1)
    assert redis_db.llen("queue:default") == 1


@pytest.mark.django_db(transaction=True)
def test_on_commit_refuses_complex_arguments_at_the_call_site(redis_db):
    with transaction.atomic():
        with pytest.raises(ValueError, match="datetime"):
            RecordJob.set(on_commit=True).perform_async(dt.datetime(2024, 1, 1))
    assert redis_db.keys("*") == []


@pytest.mark.django_db(transaction=True)
def test_bulk_is_deferred_like_every_push_path(redis_db):  # DJ-030 (the Django rule, over CORE-091's)
    with wurk_settings(ENQUEUE_ON_COMMIT=True):
        with transaction.atomic():
            jids = RecordJob.perform_bulk([[1], [2]])
            assert redis_db.llen("queue:default") == 0
        assert redis_db.llen("queue:default") == 2
    assert len(jids) == 2
