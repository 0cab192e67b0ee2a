"""The parts of the ``celery`` namespace application code imports, besides the canvas
(issue 44 item 1): schedules, signals, utils.log, contrib.django, states, exceptions,
``self.request.headers`` and ``delay_on_commit``."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest

from tests.celery_compat.tasks import Flaky, add, fail, read_headers, retry_once, wait_for
from wurk_django.redis.app import redis_client

# -- what a Celery module imports ------------------------------------------------------------

#: Celery 5's celery.states names.
CELERY_STATES = ("PENDING", "RECEIVED", "STARTED", "SUCCESS", "FAILURE", "REVOKED", "REJECTED", "RETRY", "IGNORED",
                 "READY_STATES", "UNREADY_STATES", "EXCEPTION_STATES", "PROPAGATE_STATES", "ALL_STATES",
                 "PRECEDENCE", "PRECEDENCE_LOOKUP", "NONE_PRECEDENCE", "precedence", "state")
#: Celery 5's celery.exceptions names.
CELERY_EXCEPTIONS = ("CeleryError", "TaskError", "ImproperlyConfigured", "SecurityError", "Ignore", "Reject",
                     "Retry", "MaxRetriesExceededError", "TaskRevokedError", "InvalidTaskError", "ChordError",
                     "QueueNotFound", "IncompleteStream", "NotRegistered", "AlreadyRegistered", "TimeoutError",
                     "TimeLimitExceeded", "SoftTimeLimitExceeded", "WorkerLostError", "WorkerShutdown",
                     "WorkerTerminate", "BackendError", "BackendGetMetaError", "BackendStoreError",
                     "OperationalError", "CeleryWarning", "AlwaysEagerIgnored", "DuplicateNodenameWarning",
                     "FixupWarning", "NotConfigured", "SecurityWarning", "CDeprecationWarning",
                     "CPendingDeprecationWarning")


#: Issue 44 item 1's list: each module application code imports from Celery, and its names.
IMPORTED = {
    "": ("shared_task", "Task", "signature", "chain", "group", "chord", "chunks", "states", "exceptions",
         "current_app", "Signature", "xmap", "xstarmap", "maybe_signature"),
    ".result": ("AsyncResult", "GroupResult"),
    ".canvas": ("Signature", "signature", "chain", "group", "chord", "chunks", "xmap", "xstarmap",
                "maybe_signature"),
    ".schedules": ("crontab", "schedule", "solar"),
    ".signals": ("before_task_publish", "after_task_publish", "task_prerun", "task_postrun", "task_success",
                 "task_failure", "task_retry", "task_revoked", "worker_process_init", "worker_ready",
                 "worker_shutdown"),
    ".utils.log": ("get_task_logger",),
    ".contrib.django.task": ("DjangoTask",),
}


@pytest.mark.parametrize("module", sorted(IMPORTED))
def test_each_module_celery_code_imports_has_its_names_under_wurk_django_celery(module):
    import importlib
    import importlib.util

    ours = importlib.import_module(f"wurk_django.celery{module}")
    assert [n for n in IMPORTED[module] if not hasattr(ours, n)] == []
    if importlib.util.find_spec("celery") is not None:  # the test extra installs the reference
        theirs = importlib.import_module(f"celery{module}")
        assert [n for n in IMPORTED[module] if not hasattr(theirs, n)] == []  # the names are Celery's


def test_states_and_exceptions_have_every_name_celery_5_exports():
    from wurk_django import SoftTimeLimitExceeded
    from wurk_django.celery import exceptions, states

    assert [n for n in CELERY_STATES if not hasattr(states, n)] == []
    assert [n for n in CELERY_EXCEPTIONS if not hasattr(exceptions, n)] == []
    assert exceptions.SoftTimeLimitExceeded is SoftTimeLimitExceeded  # what the worker raises in the task
    assert states.state(states.PENDING) < states.state(states.SUCCESS)
    assert states.precedence("PROGRESS") == states.NONE_PRECEDENCE
    assert states.RETRY in states.UNREADY_STATES and states.FAILURE in states.PROPAGATE_STATES


def test_contrib_django_task_and_utils_log_import_as_in_celery():
    from wurk_django.celery import Task, shared_task
    from wurk_django.celery.contrib.django.task import DjangoTask
    from wurk_django.celery.utils.log import get_task_logger

    assert DjangoTask is Task
    based = shared_task(base=DjangoTask, name="tests.based")(lambda: None)
    assert hasattr(based, "delay_on_commit") and hasattr(based, "apply_async_on_commit")
    assert isinstance(get_task_logger(__name__), logging.Logger)


def test_a_task_logger_tags_records_with_the_running_task(caplog):
    from wurk_django.celery import shared_task
    from wurk_django.celery.utils.log import get_task_logger

    logger = get_task_logger("tests.celery_compat.tasklog")

    @shared_task(name="tests.celery_compat.logs")
    def logs():
        logger.warning("inside")

    with caplog.at_level(logging.WARNING, logger="tests.celery_compat.tasklog"):
        result = logs.apply()
        logger.warning("outside")
    inside, outside = caplog.records
    assert inside.task_id == result.id and inside.task_name == "tests.celery_compat.logs"
    assert outside.task_id == "???" and outside.task_name == "???"


def test_signals_not_sent_by_wurk_are_refused_naming_the_alternative():
    with pytest.raises(ImportError, match="use task_prerun"):
        from wurk_django.celery.signals import task_received  # noqa: F401


# -- schedules -----------------------------------------------------------------------------------


def test_crontab_takes_celerys_fields_and_names():
    from wurk_django.celery.schedules import crontab

    assert crontab().cron == "* * * * *"
    assert crontab(minute=0, hour=3).cron == "0 3 * * *"
    assert crontab(minute="*/15", day_of_week="mon-fri").cron == "*/15 * * * 1-5"
    assert crontab(minute=30, hour=[9, 17], month_of_year="jan,jul", day_of_month="1").cron == "30 9,17 1 1,7 *"
    assert crontab(minute=0, hour=0, day_of_week="sunday").cron == "0 0 * * 0"
    with pytest.raises(ValueError, match="crontab.*hour=25"):
        crontab(hour=25)


def test_schedule_becomes_the_cron_with_its_period_or_is_refused():
    from wurk_django.celery.schedules import schedule

    assert schedule(run_every=60).cron == "* * * * *"
    assert schedule(run_every=dt.timedelta(minutes=5)).cron == "*/5 * * * *"
    assert schedule(dt.timedelta(hours=6)).cron == "0 */6 * * *"
    assert schedule(dt.timedelta(days=1)).cron == "0 0 * * *"
    for period in (30, 90, dt.timedelta(minutes=7)):
        with pytest.raises(ValueError, match=r"crontab\(\.\.\.\)"):
            schedule(run_every=period)


def test_solar_is_refused_naming_the_alternative():
    from wurk_django.celery.schedules import solar

    with pytest.raises(NotImplementedError, match=r"use crontab\(hour=\.\.\., minute=\.\.\.\)"):
        solar("sunset", -37.81, 144.96)


# -- headers and on-commit calls ------------------------------------------------------------------


def test_request_headers_carry_the_calls_headers(redis_db, drain):
    from wurk_django.celery import signals

    plain = read_headers.delay()
    given = read_headers.apply_async(headers={"tenant": "acme"})

    @signals.before_task_publish.connect
    def stamp(sender=None, headers=None, **kwargs):
        headers["trace"] = "t-1"

    try:
        stamped = read_headers.delay()
    finally:
        signals.before_task_publish.disconnect(stamp)
    drain()
    assert plain.get(timeout=5) == {}
    assert given.get(timeout=5) == {"tenant": "acme"}
    assert stamped.get(timeout=5) == {"trace": "t-1"}


@pytest.mark.django_db(transaction=True)
def test_delay_on_commit_pushes_once_the_transaction_commits(redis_db):
    from django.db import transaction

    with transaction.atomic():
        assert add.delay_on_commit(1, 2) is None
        add.apply_async_on_commit((3, 4), queue="celery_kw")
        assert redis_db.llen("queue:default") == 0 and redis_db.llen("queue:celery_kw") == 0
    assert redis_db.llen("queue:default") == 1 and redis_db.llen("queue:celery_kw") == 1
    with pytest.raises(RuntimeError), transaction.atomic():
        add.delay_on_commit(5, 6)
        raise RuntimeError("rolled back")
    assert redis_db.llen("queue:default") == 1


# -- signals ---------------------------------------------------------------------------------


@pytest.fixture
def heard():
    """Connect a recorder to every task signal; yields the list of (signal name, sender, kwargs)."""
    from wurk_django.celery import signals

    calls: list[tuple[str, object, dict]] = []
    receivers = []
    for name in ("before_task_publish", "after_task_publish", "task_prerun", "task_postrun", "task_success",
                 "task_failure", "task_retry"):
        def receiver(sender=None, _name=name, **kwargs):
            kwargs.pop("signal")
            calls.append((_name, sender, kwargs))

        # As Celery code writes it: the decorator returns the function.
        assert getattr(signals, name).connect(receiver) is receiver
        receivers.append((getattr(signals, name), receiver))
    yield calls
    for signal, receiver in receivers:
        signal.disconnect(receiver)


def _of(calls, name):
    return [(sender, kwargs) for n, sender, kwargs in calls if n == name]


def test_task_signals_fire_with_celerys_keyword_arguments(redis_db, drain, heard):
    ok = add.delay(2, 3)
    failed = fail.delay(7, "nope")
    drain()
    assert ok.get(timeout=5) == 5
    [(sender, before)] = [c for c in _of(heard, "before_task_publish") if c[1]["headers"]["id"] == ok.id]
    assert sender == add.name
    assert set(before) == {"body", "exchange", "routing_key", "headers", "properties", "declare", "retry_policy"}
    assert before["routing_key"] == "default" and before["body"]["args"] == [2, 3]
    assert set(_of(heard, "after_task_publish")[0][1]) == {"body", "exchange", "routing_key", "headers"}

    prerun = {kw["task_id"]: (sender, kw) for sender, kw in _of(heard, "task_prerun")}
    sender, kw = prerun[ok.id]
    assert sender is add and kw == {"task_id": ok.id, "task": add, "args": [2, 3], "kwargs": {}}
    postrun = {kw["task_id"]: kw for _s, kw in _of(heard, "task_postrun")}
    assert postrun[ok.id]["retval"] == 5 and postrun[ok.id]["state"] == "SUCCESS"
    assert postrun[failed.id]["state"] == "FAILURE"
    assert _of(heard, "task_success") == [(add, {"result": 5})]
    [(sender, failure)] = _of(heard, "task_failure")
    assert sender is fail
    assert set(failure) == {"task_id", "exception", "args", "kwargs", "traceback", "einfo"}
    assert failure["task_id"] == failed.id and failure["exception"].args == (7, "nope")
    assert "Refused" in failure["einfo"].traceback


def test_task_retry_fires_with_the_request_and_the_reason(redis_db, drain, due_retries, heard):
    result = retry_once.delay()
    drain()
    [(sender, retried)] = _of(heard, "task_retry")
    assert sender is retry_once and set(retried) == {"request", "reason", "einfo"}
    assert retried["request"].id == result.id and isinstance(retried["reason"], Flaky)
    assert [kw["state"] for _s, kw in _of(heard, "task_postrun")] == ["RETRY"]
    due_retries()
    drain()
    assert result.get(timeout=5) == "second"


def test_a_worker_process_sends_worker_and_task_signals(redis_db, worker_factory):
    worker = worker_factory("-c", "2", "-q", "default", settings="tests.celery_compat.worker_settings",
                            env={"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.celery_compat"]})})

    def signals_seen():
        return [json.loads(raw) for raw in redis_client().lrange("test:signals", 0, -1)]

    wait_for(lambda: any(e["signal"] == "worker_ready" for e in signals_seen()), timeout=60,
             message="worker_ready from the worker")
    result = add.delay(20, 22)
    assert result.get(timeout=30) == 42
    wait_for(lambda: any(e["signal"] == "task_postrun" for e in signals_seen()), timeout=10, message="task_postrun")
    worker.stop()
    seen = signals_seen()
    names = [e["signal"] for e in seen]
    assert names.index("worker_process_init") < names.index("worker_ready") < names.index("task_prerun")
    assert names[-1] == "worker_shutdown"
    by_name = {e["signal"]: e for e in seen}
    assert by_name["task_prerun"] == {"signal": "task_prerun", "sender": add.name,
                                      "kwargs": ["args", "kwargs", "task", "task_id"],
                                      "values": {"task_id": result.id, "args": [20, 22], "kwargs": {}}}
    assert by_name["task_postrun"]["values"]["state"] == "SUCCESS" and by_name["task_postrun"]["values"]["retval"] == 42
    assert by_name["task_success"]["values"] == {"result": 42}


def test_task_revoked_fires_for_a_call_skipped_past_its_expires(redis_db, drain):
    from wurk_django.celery import signals

    heard = []

    @signals.task_revoked.connect
    def revoked(sender=None, **kwargs):
        kwargs.pop("signal")
        heard.append((sender, kwargs))

    try:
        result = add.apply_async((1, 2), expires=-1)
        drain()
    finally:
        signals.task_revoked.disconnect(revoked)
    [(sender, kwargs)] = heard
    assert sender is add and set(kwargs) == {"request", "terminated", "signum", "expired"}
    assert kwargs["request"].id == result.id and kwargs["expired"] is True and kwargs["terminated"] is False
