"""Issue 42 item 4: suspected poison pills come back within 30 s of the death, one at a time.

A process died with four jobs running, each suspected in an earlier crash already:
all four wait in its held list. A worker started after it (the default reaper
interval of 60 s) finds the death at boot and gives them back one at a time, each
as soon as the one before it finished: none runs beside another suspect, and all
have run well within 30 s of the first going back.
"""

from __future__ import annotations

import json

import pytest

from tests.server.fetch.test_reliable import _dead_pid, _dead_slots
from tests.support import wait_for
from wurk_django import keys, payload

pytestmark = pytest.mark.slow

NAMES = ["s0", "s1", "s2", "s3"]


def _jid(name: str) -> str:
    return name.ljust(24, "x")


def test_held_suspects_come_back_one_at_a_time_within_30_s(redis_db, worker_factory):
    pid = _dead_pid()
    jobs = [payload.dumps({"class": "tests.jobsapp.jobs.TurnJob", "args": [0.3, name], "queue": "default",
                           "jid": _jid(name), "retry": True, "created_at": 1, "enqueued_at": 1}) for name in NAMES]
    for name in NAMES:
        redis_db.set(keys.recovered(_jid(name)), 1)  # suspected in an earlier crash
    _dead_slots(redis_db, pid, {slot: ([raw], "*") for slot, raw in enumerate(jobs)})

    worker = worker_factory("-c", "5", env={"WURK_TEST_EXTRA": json.dumps({"REAPER_ORPHAN_GRACE": 0})})
    wait_for(lambda: redis_db.llen("test:turns") > 0, timeout=60, message="the worker to find the death")
    wait_for(lambda: redis_db.llen("test:turns") == 2 * len(NAMES), timeout=30,
             message="every held suspect to run within 30 s")
    turns = [turn.decode() for turn in redis_db.lrange("test:turns", 0, -1)]
    order = [turn.partition(":")[2] for turn in turns[::2]]
    assert sorted(order) == NAMES
    # One at a time: each ended before the next started.
    assert turns == [event for name in order for event in (f"start:{name}", f"end:{name}")]
    # Each finished (its ACK deleted its crash count); none is held any more.
    wait_for(lambda: not any(redis_db.exists(keys.recovered(_jid(name))) for name in NAMES), timeout=30,
             message="the last ACK")
    wait_for(lambda: not redis_db.exists(keys.HELD_INDEX), timeout=30, message="the held index to empty")
    assert "gave back tests.jobsapp.jobs.TurnJob" in worker.output()
    assert worker.stop() == 0
