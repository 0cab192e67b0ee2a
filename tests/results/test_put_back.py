"""A run whose job goes back to its queue reads interrupted, never over the attempt that
took the job over meanwhile (issue 45 item 1). The stop itself, on a real worker:
tests/tasks/test_stop.py."""

from __future__ import annotations

import time

import pytest

from wurk_django.outcome import Outcome
from wurk_django.results import record, store

JID = "f" * 24
JOB = {"jid": JID, "class": "wurk_django.tasks.TaskJob", "wrapped": "shop.tasks.receipt",
       "task": {"result_ttl": 60}, "args": [[1], {}]}


def _two_attempts(redis_db) -> tuple[record.Attempt, record.Attempt]:
    stopped_one = record.Attempt(dict(JOB), 60, redis_db)
    stopped_one.start()
    time.sleep(0.005)  # the next attempt starts a few ms later, on another worker
    taker = record.Attempt(dict(JOB), 60, redis_db)
    taker.start()
    return stopped_one, taker


@pytest.mark.parametrize("how", ["end", "stopped"])
def test_a_put_back_run_leaves_the_next_attempts_record_alone(redis_db, how):
    stopped_one, _taker = _two_attempts(redis_db)
    if how == "end":  # the stopped thread came back after the job was taken again
        stopped_one.end(Outcome.INTERRUPTED, None)
    else:  # its worker exited with the thread still inside the run
        record._live[JID] = stopped_one
        record.stopped(sender=None)
    assert store.read(redis_db, JID)["state"] == "running"
    assert JID not in record._live


def test_worker_exit_marks_a_run_still_inside_it_interrupted_once(redis_db):
    attempt = record.Attempt(dict(JOB), 60, redis_db)
    attempt.start()
    record._live[JID] = attempt
    record.stopped(sender=None)
    assert store.read(redis_db, JID)["state"] == "interrupted"
    assert JID not in record._live
    # Its thread comes back afterwards with whatever the run did: nothing changes.
    attempt.end(Outcome.SUCCEEDED, None)
    assert store.read(redis_db, JID)["state"] == "interrupted"
