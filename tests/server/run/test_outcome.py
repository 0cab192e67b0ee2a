"""Typed outcomes (issue 24 item 2): each run ends in one ``Outcome`` on the job's context,
and the processor settles it (ack, give-back, retry booking, death, signals).

The processor here is the real one around a stand-in unit of work, so each test
sees what the worker would do with the job and what a server middleware observes
through ``context.current().outcome``.
"""

from __future__ import annotations

import pytest
import redis as redis_lib

from tests.jobsapp.outcome_jobs import Broken, Fine, Limited, a_job
from wurk_django import Job, context, payload, signals
from wurk_django.conf import get_config
from wurk_django.errors import JobInterrupted, Shutdown
from wurk_django.middleware import server_chain
from wurk_django.outcome import Outcome
from wurk_django.server.run import observers
from wurk_django.server.run.joblog import JobLogger
from wurk_django.server.run.processor import Processor

from ...support import StandInUnit as Unit
from ...support import processor_manager

# The processor runs the database guard around each job, as in a worker.
pytestmark = pytest.mark.django_db


class Resumable(Job):
    def perform(self, *args):
        raise JobInterrupted("later")


class Stopped(Job):
    def perform(self, *args):
        raise Shutdown()


class SeesItself(Job):
    def perform(self, *args):
        BUSY.append(STATE[0].work_snapshot())


BUSY: list[dict] = []
STATE: list = []
SEEN: list[list] = []
RAISED = "raised"


class Observer:
    """A user's server middleware: what it can see of the outcome after ``call_next``
    (``RAISED`` when the job's failure went through it as an exception)."""

    def __call__(self, instance, job, queue, call_next):
        where = context.current()
        SEEN.append([where, RAISED])
        call_next()
        SEEN[-1][1] = where.outcome


class Watched(Processor):
    """The processor, keeping the context of the job it settled last (told by the
    settlement's hook, which fires once per run with the final outcome)."""

    settled: context.JobContext | None = None

    def process(self, unit):
        def note(ctx, outcome, error):
            assert ctx.outcome is outcome and ctx.error is error
            self.settled = ctx

        observers.on_settled("tests.server.run.test_outcome", note)
        try:
            super().process(unit)
        finally:
            observers.off_settled("tests.server.run.test_outcome")


def run(job: dict, **patch) -> tuple[Unit, context.JobContext, object]:
    """One job through a real processor; the unit, the job's context and what the
    observing middleware saw right after ``call_next()``."""
    chain = server_chain(get_config())
    chain.prepend(Observer)  # outermost: it sees what every built-in layer decided
    manager = processor_manager(chain, **patch)
    unit = Unit(job)
    SEEN.clear()
    processor = Watched(manager)
    processor.process(unit)
    assert context.running() is None  # left when the job was settled
    if SEEN:
        assert SEEN[0][0] is processor.settled  # one context per job, seen by every layer
    return unit, processor.settled, SEEN[0][1] if SEEN else None


@pytest.fixture
def failed_signals():
    seen = []

    def receiver(sender, job, exception, **kwargs):
        seen.append(exception)

    signals.job_failed.connect(receiver, weak=False, dispatch_uid="tests.server.run.test_outcome")
    yield seen
    signals.job_failed.disconnect(dispatch_uid="tests.server.run.test_outcome")


def test_success(redis_db, failed_signals):
    # CORE-113: a run that returns is acknowledged.
    unit, where, observed = run(a_job(Fine))
    assert where.outcome is Outcome.SUCCEEDED and observed is None  # None inside: settled afterwards
    assert unit.acked == 1 and not unit.requeued and where.error is None and not failed_signals
    assert where.raw == unit.job and where.unit is unit and where.config is get_config()


def test_a_failure_is_booked_as_a_retry(redis_db, failed_signals):
    # CORE-113: a failure the retry layer booked is acknowledged; job_failed gets the job's own error.
    job = a_job(Broken)
    unit, where, observed = run(job)
    assert where.outcome is Outcome.RETRIED and observed == RAISED
    assert isinstance(where.error, ValueError) and failed_signals == [where.error]
    assert unit.acked == 1
    (retry,) = redis_db.zrange("retry", 0, -1)
    assert payload.loads(retry)["jid"] == job["jid"]


@pytest.mark.parametrize("retry, outcome, dead", [(False, Outcome.DISCARDED, 0), (0, Outcome.DEAD, 1)])
def test_retries_off_or_used_up(redis_db, retry, outcome, dead):
    # PRO-130: a job moved to dead or discarded is acknowledged; success, a booked retry and a re-push too, a shutdown not (the tests around it).
    unit, where, _observed = run(a_job(Broken, retry=retry))
    assert where.outcome is outcome and unit.acked == 1
    assert redis_db.zcard("dead") == dead and redis_db.zcard("retry") == 0


def test_an_unknown_class_is_booked_from_the_payload(redis_db):
    unit, where, observed = run(a_job("tests.nowhere.Missing"))
    assert where.outcome is Outcome.RETRIED and where.job_class is None and unit.acked == 1
    assert not SEEN  # it never reached the middleware
    assert payload.loads(redis_db.zrange("retry", 0, -1)[0])["error_class"] == "wurk_django.errors.UnknownJobClass"


def test_a_job_that_asks_to_resume_is_pushed_again(redis_db, failed_signals):
    """CORE-252: an interrupted (resumable) job is pushed again through the client: to the
    back of its queue (``LPUSH``, behind the jobs waiting), with a new ``enqueued_at``."""
    job = a_job(Resumable, enqueued_at=1)
    redis_db.lpush("queue:default", payload.dumps(a_job(Fine)))  # a job already waiting
    unit, where, observed = run(job)
    assert observed is Outcome.PAUSED  # the middleware saw a run that returned, not an exception
    assert where.outcome is Outcome.PAUSED and unit.acked == 1 and not failed_signals
    again, waiting = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(again)["jid"] == job["jid"] and payload.loads(waiting)["jid"] != job["jid"]
    assert payload.loads(again)["enqueued_at"] > 1


def test_a_rate_limited_job_is_rescheduled_by_the_limiter(redis_db, failed_signals):
    job = a_job(Limited)
    unit, where, observed = run(job)
    assert observed is Outcome.RESCHEDULED and where.outcome is Outcome.RESCHEDULED
    assert unit.acked == 1 and not failed_signals and redis_db.zcard("retry") == 0
    (again,) = redis_db.zrange("schedule", 0, -1)
    assert payload.loads(again)["jid"] == job["jid"] and payload.loads(again)["overrated"] == 1


def test_a_shutdown_is_neither_acked_nor_given_back(redis_db):
    # CORE-113: a shutdown is not acknowledged (the stop requeued it).
    unit, where, _observed = run(a_job(Stopped))
    assert where.outcome is Outcome.INTERRUPTED and not unit.acked and not unit.requeued
    assert redis_db.zcard("retry") == 0


def test_redis_down_while_booking_gives_the_job_back(redis_db):
    # CORE-113: a booking Redis refused is not acknowledged: the job goes back to its queue.
    def down(*_args):
        raise redis_lib.ConnectionError("down")

    unit, where, _observed = run(a_job(Broken), book=down)
    assert where.outcome is Outcome.GIVEN_BACK and unit.requeued == 1 and not unit.acked


def test_a_booking_that_fails_for_the_payload_buries_it_with_both_errors(redis_db):
    def refuses(*_args):
        raise TypeError("cannot write this back")

    job = a_job(Broken)
    unit, where, _observed = run(job, _attempt=refuses)
    assert where.outcome is Outcome.DEAD and unit.acked == 1
    (entry,) = redis_db.zrange("dead", 0, -1)
    message = payload.loads(entry)["error_message"]
    assert "ValueError: broken" in message and "TypeError: cannot write this back" in message


def test_a_rate_limited_run_is_rescheduled_in_the_log_and_not_counted_in_the_metrics(redis_db, monkeypatch):
    """Issue 28 item 9: one word for a rate-limited run. The job log says ``rescheduled``
    (not ``fail``), the job metrics count it as neither a success nor a failure (its work
    did not happen), and a job that paused still counts like a success (CORE-210)."""
    from wurk_django.server.run import joblog

    lines = []
    monkeypatch.setattr(joblog, "_log", lambda message, ctx: lines.append((message, ctx.get("class"))))
    manager = processor_manager()
    manager.joblog = JobLogger([], False)
    metrics = manager.metrics
    for klass in (Limited, Resumable, Fine):
        Processor(manager).process(Unit(a_job(klass)))
    name = f"{Limited.__module__}.{Limited.__qualname__}"
    assert (("rescheduled", name) in lines) and ("fail", name) not in lines
    assert ("rescheduled", f"{Resumable.__module__}.{Resumable.__qualname__}") in lines
    counted = {klass for minute in metrics._minutes.values() for klass in minute}
    assert name not in counted
    assert f"{Resumable.__module__}.{Resumable.__qualname__}" in counted and f"{Fine.__module__}.Fine" in counted


def test_a_job_that_cannot_be_handed_back_at_quiet_leaves_its_thread_running(redis_db, monkeypatch):
    """Fetched after quiet began, a job goes back to its queue unrun; if Redis refuses the
    move, the error is reported and the thread goes on (reliable fetch keeps the job in the
    private list, for the reaper), where it used to end the thread with the exception."""
    from types import SimpleNamespace

    from wurk_django.server.run import processor as processor_module

    class Refused(Unit):
        def requeue(self) -> None:
            raise redis_lib.ConnectionError("Redis went away")

    reported = []
    monkeypatch.setattr(processor_module, "report", lambda exc, ctx, config: reported.append((type(exc), ctx)))
    unit = Refused(a_job(Fine))
    manager = processor_manager()
    manager.fetcher = SimpleNamespace(retrieve_work=lambda: unit)
    processor = Processor(manager)
    processor.done = True  # quiet began
    processor.process_one()
    assert reported == [(redis_lib.ConnectionError, {"context": "handing back a job it will not run",
                                                      "jid": None})]
    assert unit.acked == 0 and processor.unit is None


def test_a_run_is_busy_while_it_runs_and_counted_as_processed_and_failed(redis_db):
    """CORE-112 / RUN-123: while a job runs its thread has a busy entry (queue, payload,
    run_at), gone once the run is settled; every run counts as processed and one that did
    not succeed as failed too (a failure, and a job that asked to resume, as Sidekiq counts
    an interrupted iterable job's skip)."""
    manager = processor_manager()
    STATE[:] = [manager.state]
    BUSY.clear()
    processor = Processor(manager)
    job = a_job(SeesItself)
    for unit in (Unit(job), Unit(a_job(Broken)), Unit(a_job(Resumable))):
        processor.process(unit)
    [(tid, entry)] = BUSY[0].items()
    assert payload.loads(entry)["queue"] == "default" and payload.loads(payload.loads(entry)["payload"])["jid"] == job["jid"]
    assert manager.state.work_snapshot() == {}
    assert manager.state.take_counts() == (3, 2)


def test_run_122_the_loop_survives_a_fetch_error_and_flushes_acks_before_it_leaves(redis_db, caplog):
    """RUN-122: the processor loop reports a fetch error, waits and goes on; it runs the
    job it fetches next (acknowledged on success); a payload that does not parse goes
    to the dead set, acknowledged; when the loop ends its ``finally`` flushes the held
    ACKs before telling the manager it exited (which lets the pool close)."""
    order: list[str] = []
    good, bad = Unit(a_job(Fine)), Unit(a_job(Fine))
    bad.job = b"{not json"
    proc: Processor | None = None

    class Fetcher:
        def __init__(self):
            self.replies = [redis_lib.ConnectionError("fetch failed"), good, bad]

        def retrieve_work(self):
            if not self.replies:
                proc.done = True  # nothing more: the loop ends
                return None
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

        def flush_acks(self):
            order.append("flush")

        def release_thread_connection(self):
            order.append("release")

    manager = processor_manager()
    manager.fetcher = Fetcher()
    manager.processor_exited = lambda p: order.append("exited")
    proc = Processor(manager)
    proc.run()  # the fetch error costs it one second's wait
    assert "fetch: ConnectionError: fetch failed" in caplog.text
    assert good.acked == 1 and bad.acked == 1 and not good.requeued and not bad.requeued
    assert redis_db.zcard("dead") == 1
    assert order == ["flush", "release", "exited"]
