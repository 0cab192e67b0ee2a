"""The writes that record a run that already happened ride out a failover (found by
tests/topologies/test_workflows.py): a step job finishing while Sentinel fences the old
primary was booked as failed, so it ran again (or died with ``retry: False`` and failed
its workflow), and a batch gate that gave up after 0.15 s left the workflow waiting
forever. Redis is played by patching the scripts to refuse a few times first, as the
fenced primary (``MasterNotFoundError``), a refusing one (``PrimaryRefused``,
``NOREPLICAS`` from a script) or a lost connection would."""

from __future__ import annotations

import pytest
import redis as redis_lib
from redis.sentinel import MasterNotFoundError

from tests.jobsapp.workflow_jobs import Add
from tests.workflow.conftest import ran
from wurk_django.redis import errors as redis_errors
from wurk_django.redis.errors import PrimaryRefused
from wurk_django.workflow import chain


@pytest.fixture
def waits(monkeypatch):
    """The sleeps of ``ride_out``, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(redis_errors, "ride_out_sleep", slept.append)
    return slept


def refusing(monkeypatch, owner, name: str, errors: list[BaseException]) -> list[int]:
    """``owner.name`` raises ``errors`` one call each, then does its work; returns the call count."""
    real = getattr(owner, name)
    calls = [0]

    def patched(*args, **kwargs):
        calls[0] += 1
        if errors:
            raise errors.pop(0)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, patched)
    return calls


def test_a_step_whose_result_meets_a_failover_runs_once_and_succeeds(redis_db, work, waits, monkeypatch):
    from wurk_django.workflow import scripts

    fenced = [MasterNotFoundError("mymaster: a failover is promoting a replica; writes wait for it"),
              PrimaryRefused("the server is not a writable primary: NOREPLICAS Not enough good replicas to write.")]
    calls = refusing(monkeypatch, scripts, "store_result", fenced)
    wf = chain(Add.s(1), Add.s(2)).run()  # Add has retry: False: before, the first step died
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db) == ["add:[1]", "add:[1, 2]"]  # each step once
    assert calls[0] == 4 and len(waits) == 2
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0


def test_a_batch_acknowledgement_rides_out_more_than_three_refusals(redis_db, work, waits, monkeypatch):
    from wurk_django.batch import scripts

    refusals = [redis_lib.ConnectionError("Connection closed by server.") for _ in range(5)]
    refusing(monkeypatch, scripts, "ack_success", refusals)
    wf = chain(Add.s(1), Add.s(2)).run()
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db) == ["add:[1]", "add:[1, 2]"]
    assert len(waits) == 5 and redis_db.zcard("dead") == 0


def test_a_batch_gate_that_meets_a_failover_still_fires(redis_db, work, waits, monkeypatch):
    from wurk_django.batch import fire

    refused = []
    for _ in range(4):  # before, the gate gave up after 3 and nothing would fire: the workflow stood still
        error = fire.CallbackEnqueueError("batch x: could not fire 'success'")
        error.__cause__ = PrimaryRefused("the server is not a writable primary: READONLY")
        refused.append(error)
    refusing(monkeypatch, fire, "maybe_fire", refused)
    wf = chain(Add.s(1), Add.s(2)).run()
    work()
    assert wf.state == "succeeded" and ran(redis_db) == ["add:[1]", "add:[1, 2]"]
    assert len(waits) == 4


def test_a_step_callback_that_meets_a_failover_moves_the_workflow_on_at_once(redis_db, work, waits, monkeypatch):
    from wurk_django.workflow import scripts

    noreplicas = [redis_lib.ResponseError("NOREPLICAS Not enough good replicas to write. script: abc, on "
                                          "@user_script:5.")]
    refusing(monkeypatch, scripts, "advance", noreplicas)
    wf = chain(Add.s(1), Add.s(2)).run()
    work()
    # Before, the callback job failed and waited out its retry backoff (15 s and more).
    assert wf.state == "succeeded" and redis_db.zcard("retry") == 0
    assert len(waits) == 1


def test_ride_out_gives_up_on_a_lasting_outage_and_soon_on_other_errors(waits):
    calls = []

    def down():
        calls.append(1)
        raise redis_lib.ConnectionError("refused")

    with pytest.raises(redis_lib.ConnectionError):
        redis_errors.ride_out(down, "test", seconds=-1)  # no time left: the first error is raised
    assert len(calls) == 1 and waits == []

    def broken():
        calls.append(1)
        raise ValueError("not an outage")

    calls.clear()
    with pytest.raises(ValueError):
        redis_errors.ride_out(broken, "test")
    assert len(calls) == redis_errors.OTHER_ATTEMPTS
    assert redis_errors.transient(RuntimeError("wrapped")) is False
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = redis_lib.TimeoutError("timed out")
    assert redis_errors.transient(wrapped) is True
