"""Every way a job dies goes through death.py (wurk_django/death.py): the dead entry, the handlers, ``job_died``
with its reason (CORE-110, CORE-125/126, CORE-141, PRO-153, ENT-207; issue 11 item 3)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from tests.jobsapp.jobs import RecordJob
from wurk_django import payload, signals
from wurk_django.api import DeadSet, RetrySet
from wurk_django.conf import Config
from wurk_django.errors import InvalidJob
from wurk_django.outcome import Outcome
from wurk_django.redis.connection import get_redis
from wurk_django.server import death, poison
from wurk_django.server.retry import Retrier
from wurk_django.server.run.processor import Processor
from wurk_django.server.scheduler import Scheduler

RECORD = "tests.jobsapp.jobs.RecordJob"


@pytest.fixture
def deaths():
    """Every ``job_died`` sent while the test runs: (sender, job, exception, reason)."""
    seen = []

    def receiver(sender, job, exception, reason=None, **kwargs):
        seen.append(SimpleNamespace(sender=sender, job=job, exc=exception, reason=reason))

    signals.job_died.connect(receiver, weak=False, dispatch_uid="tests.server.test_death")
    yield seen
    signals.job_died.disconnect(dispatch_uid="tests.server.test_death")


def _raw(**fields) -> bytes:
    job = {"retry": True, "queue": "default", "class": RECORD, "args": ["x"], "jid": "d" * 24,
           "created_at": 1, "enqueued_at": 1, **fields}
    return payload.dumps(job)


def _dead(redis_db) -> list[bytes]:
    return redis_db.zrange("dead", 0, -1)


def _boom() -> RuntimeError:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        return exc


# -- decided by the retry layer -------------------------------------------------------------


def test_retries_exhausted(redis_db, deaths):
    assert Retrier(Config()).book(RecordJob, _raw(retry=0), "default", _boom()) is Outcome.DEAD
    (died,) = deaths
    assert died.reason == death.EXHAUSTED and died.sender is RecordJob and str(died.exc) == "boom"
    (entry,) = _dead(redis_db)
    assert json.loads(entry)["jid"] == "d" * 24 and json.loads(entry)["error_message"] == "boom"


def test_retry_false_notifies_and_stores_nothing(redis_db, deaths):
    assert Retrier(Config()).book(None, _raw(retry=False), "default", _boom()) is Outcome.DISCARDED
    assert [d.reason for d in deaths] == [death.NO_RETRY]
    assert _dead(redis_db) == []


def test_dead_false_is_discarded_and_notified(redis_db, deaths):
    """CORE-029: `dead: false` never goes to the morgue."""
    assert Retrier(Config()).book(RecordJob, _raw(retry=0, dead=False), "default", _boom()) is Outcome.DISCARDED
    (died,) = deaths
    assert died.reason == death.DISCARDED and "discarded_at" in died.job
    assert _dead(redis_db) == []


# -- decided by the engine outside a run -----------------------------------------------------


def test_poison_pill(redis_db, deaths):
    raw = _raw()
    poison.bury_pill(poison.Pill("d" * 24, RECORD, 3, "default", raw.decode()), raw)
    (died,) = deaths
    assert died.reason == death.POISON and isinstance(died.exc, poison.Poisoned)
    assert died.sender is RecordJob  # resolved from the payload, so sender=RecordJob receivers hear it
    (entry,) = _dead(redis_db)
    assert json.loads(entry)["error_class"] == "wurk_django.server.poison.Poisoned"


class _Unit:
    def __init__(self, raw: bytes, queue: str = "default") -> None:
        self.job, self.queue, self.jid, self.acked = raw, queue, None, False

    def acknowledge(self) -> None:
        self.acked = True


def _processor(config: Config) -> Processor:
    manager = SimpleNamespace(fetcher=None, config=config, state=None, retrier=None, joblog=None,
                              server_chain=None, metrics=None, stop_flag=threading.Event(), name="test",
                              redis=lambda: get_redis(config=config))
    return Processor(manager)


@pytest.mark.parametrize("raw", [b"{not json", b"[1,2]", b'"just a string"'])
def test_unparseable_payload_is_stored_with_the_bytes_received_and_the_reason(redis_db, deaths, raw):
    # CORE-110 and issue 12: nothing of what was received is lost (the text is the entry's only
    # argument), and the entry says why it is there.
    # CORE-054: a payload that does not parse is stored in dead as the raw string.
    handled = []
    config = Config(DEATH_HANDLERS=[lambda job, exc: handled.append((job, exc))])
    unit = _Unit(raw)
    _processor(config).process(unit)
    assert unit.acked
    [stored] = _dead(redis_db)
    entry = payload.loads(stored)
    assert entry["class"] == "<unparseable>" and entry["args"] == [raw.decode()]
    assert entry["error_message"] and entry["error_class"].endswith("InvalidJob")
    (died,) = deaths
    assert died.reason == death.INVALID and isinstance(died.exc, InvalidJob)
    assert died.job == entry
    assert handled == [(died.job, died.exc)]


def test_invalid_object_is_stored_with_its_error(redis_db, deaths):
    raw = b'{"class":"tests.jobsapp.jobs.RecordJob","jid":"' + b"i" * 24 + b'"}'
    _processor(Config()).process(_Unit(raw, queue="low"))
    (entry,) = _dead(redis_db)
    job = json.loads(entry)
    assert job["jid"] == "i" * 24 and job["queue"] == "low" and "lacks" in job["error_message"]
    assert job["error_class"] == "wurk_django.errors.InvalidJob"
    (died,) = deaths
    assert died.reason == death.INVALID and died.job["jid"] == "i" * 24 and died.sender is RecordJob


def test_scheduler_burial_of_an_unreadable_member(redis_db, deaths):
    redis_db.zadd("schedule", {b"{scheduled garbage": 1})
    Scheduler(Config()).enqueue_due()
    assert _dead(redis_db) == [b"{scheduled garbage"]
    (died,) = deaths
    assert died.reason == death.SCHEDULER and died.job == {"args": ["{scheduled garbage"]}


def test_scheduler_burial_of_a_due_member_that_is_not_a_job(redis_db, deaths):
    # The reliable scheduler pushes and takes out in one script (PRO-330); a member that is not
    # job JSON goes to the dead set in that same step, and the death path tells the handlers.
    redis_db.zadd("retry", {b"{not a job": 1})
    scheduler = Scheduler(Config())
    assert scheduler.enqueue_due() == 0
    assert _dead(redis_db) == [b"{not a job"] and redis_db.zcard("retry") == 0
    (died,) = deaths
    assert died.reason == death.SCHEDULER and isinstance(died.exc, InvalidJob)
    assert died.job == {"args": ["{not a job"]}


# -- decided by a person ----------------------------------------------------------------------


def test_manual_kill_passes_job_killed(redis_db, deaths):
    handled = []
    from django.conf import settings
    from django.test import override_settings

    with override_settings(WURK={**settings.WURK, "DEATH_HANDLERS": [lambda job, exc: handled.append(exc)]}):
        DeadSet().kill(_raw(dead=False))
    (died,) = deaths
    assert died.reason == death.MANUAL and isinstance(died.exc, death.JobKilled)
    assert isinstance(died.exc, RuntimeError) and str(died.exc) == "Job killed by API"
    assert handled == [died.exc]
    assert _dead(redis_db) == [_raw(dead=False)]  # a kill stores it whatever the payload says


def test_entry_kill_and_kill_all_pass_job_killed(redis_db, deaths):
    redis_db.zadd("retry", {_raw(jid="a" * 24): time.time() + 60, _raw(jid="b" * 24): time.time() + 90})
    (first, _second) = list(RetrySet())
    assert first.kill()
    assert RetrySet().kill_all(notify_failure=True) == 1
    assert [(d.reason, type(d.exc)) for d in deaths] == [(death.MANUAL, death.JobKilled)] * 2
    assert redis_db.zcard("dead") == 2 and redis_db.zcard("retry") == 0


def test_kill_all_without_notify_stores_silently(redis_db, deaths):
    redis_db.zadd("retry", {_raw(): time.time() + 60})
    assert RetrySet().kill_all() == 1  # CORE-166: notify_failure defaults to false in the API
    assert deaths == [] and redis_db.zcard("dead") == 1


def test_unknown_class_is_sent_under_its_name(redis_db, deaths):
    DeadSet().kill(_raw(**{"class": "Ruby::OnlyJob"}))
    assert deaths[0].sender == "Ruby::OnlyJob"


def test_unknown_reason_is_refused():
    with pytest.raises(ValueError, match="unknown death reason"):
        death.die({"jid": "x"}, RuntimeError(), reason="bored", config=Config())
