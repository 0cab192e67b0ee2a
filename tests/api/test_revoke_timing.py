"""A revoke reaches the worker at once (issue 44 items 2 and 3): ``AsyncResult.revoke`` and
``wurk_django.api.revoke.revoke`` with ``terminate=True`` stop a running task well before
the process's next heartbeat could have brought the request, and its record reads REVOKED
whichever API revoked it; a revoke of a job not started yet keeps it from running just as
fast; a process that does not hear the revoke channel still hears it within a beat.

Each test revokes just after the worker's beat, so the next one is about 10 s away: a
stop within ``BEFORE_NEXT_BEAT`` seconds came through the channel (a behaviour bound, not a
performance figure). Real worker processes and Redis.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.api.revoke_tasks import (
    BEFORE_NEXT_BEAT,
    ENV,
    just_after_a_beat,
    loop_for,
    notes,
    running,
    stops_fast,
    the_process,
)
from tests.support import wait_for
from wurk_django.api.revoke import MARKED, RUNNING, revoke
from wurk_django.celery import AsyncResult
from wurk_django.server.heartbeat import BEAT_INTERVAL

pytestmark = pytest.mark.slow


def _dead(redis_db) -> dict[str, dict]:
    return {job["jid"]: job for job in (json.loads(raw) for raw in redis_db.zrange("dead", 0, -1))}


def test_async_result_revoke_terminate_stops_a_running_task_before_the_next_beat(redis_db, worker_factory):
    worker_factory("-c", "2", env=ENV)
    result = running(redis_db, "t:celery", the_process(redis_db))
    started = time.monotonic()
    result.revoke(terminate=True, by="celery-caller")
    elapsed = stops_fast(redis_db, "t:celery", result, started)
    assert elapsed < BEFORE_NEXT_BEAT < BEAT_INTERVAL, f"stopped after {elapsed:.2f} s: it waited for a beat"
    assert _dead(redis_db)[result.id]["revoked_by"] == "celery-caller"


def test_api_revoke_terminate_stops_a_running_task_and_its_record_reads_revoked(redis_db, worker_factory):
    worker_factory("-c", "2", env=ENV)
    result = running(redis_db, "t:api", the_process(redis_db))
    started = time.monotonic()
    assert revoke(result.id, by="ops", terminate=True) in (RUNNING, MARKED)  # the busy list is a beat behind
    elapsed = stops_fast(redis_db, "t:api", result, started)
    assert elapsed < BEFORE_NEXT_BEAT, f"stopped after {elapsed:.2f} s: it waited for a beat"
    # Read by another handle, as any process would: the record says REVOKED, the error names who.
    again = AsyncResult(result.id)
    assert again.state == "REVOKED" and again.ready() and not again.successful()
    assert "revoked by ops" in json.dumps(redis_db.hgetall(f"status:{result.id}").get(b"errors", b"").decode())
    with pytest.raises(Exception, match="revoked"):
        again.get(timeout=1)


def test_a_revoke_of_a_job_not_started_yet_keeps_it_from_running(redis_db, worker_factory):
    worker_factory("-c", "2", env=ENV)
    identity = the_process(redis_db)
    jid = "f" * 24
    just_after_a_beat(redis_db, identity)
    # Found nowhere: only the marker, and the channel's message to every process.
    assert revoke(jid, by="early") == MARKED
    time.sleep(0.5)  # the worker's subscriber thread takes it in; the next beat is still seconds away
    started = time.monotonic()
    result = loop_for.apply_async(("t:early",), task_id=jid)
    wait_for(lambda: jid in _dead(redis_db), timeout=30, interval=0.01, message="the job recorded as revoked")
    assert time.monotonic() - started < BEFORE_NEXT_BEAT
    assert notes(redis_db, "t:early") == [], "a revoked job never starts"
    assert _dead(redis_db)[jid]["revoked_by"] == "early"
    wait_for(lambda: result.state == "REVOKED", timeout=10, message="its record to read REVOKED")


def test_without_the_channel_the_heartbeat_still_brings_the_stop(redis_db, worker_factory):
    env = {**ENV, "WURK_TEST_PROBE_MODULE": "tests.api.no_revoke_channel"}
    worker_factory("-c", "2", env=env, settings="tests.server.settings_ops")
    identity = the_process(redis_db)
    channel = f"wurk-revoke:{redis_db.connection_pool.connection_kwargs.get('db', 0)}"
    assert redis_db.pubsub_numsub(channel) == [(channel.encode(), 0)], "nobody may hear the channel here"
    # Longer than two beats: the task still runs when the stop comes at the beat after the next.
    result = running(redis_db, "t:beat", identity, seconds=30)
    started = time.monotonic()
    assert revoke(result.id, by="fallback", terminate=True) in (RUNNING, MARKED)  # the busy list is a beat behind
    elapsed = stops_fast(redis_db, "t:beat", result, started)
    # Not heard at once (nothing listens on the channel): at the next beat, about 10 s on.
    assert BEFORE_NEXT_BEAT < elapsed < 2 * BEAT_INTERVAL, f"stopped after {elapsed:.2f} s"
    assert _dead(redis_db)[result.id]["revoked_by"] == "fallback"
