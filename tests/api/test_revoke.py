"""Revoke by jid (issue 27 item 4): a queued, scheduled or retrying job is cancelled into the
dead set naming who revoked it; a job in flight never runs (the marker the worker checks);
a running job gets the soft stop, then the hard one, in a real worker process."""

from __future__ import annotations

import json
import time

import pytest

from tests.jobsapp.limit_jobs import Pair, Stubborn
from tests.support import wait_for
from wurk_django.api.revoke import MARKED, QUEUED, RETRY, RUNNING, SCHEDULED, revoke
from wurk_django.server.stopping import revocations


def _dead(redis_db) -> dict[str, dict]:
    return {job["jid"]: job for job in (json.loads(raw) for raw in redis_db.zrange("dead", 0, -1))}


def _recorded(redis_db) -> list[str]:
    return [item.decode() for item in redis_db.lrange("test:limits", 0, -1)]


def _assert_revoked_entry(entry: dict, by: str) -> None:
    assert entry["error_class"] == "wurk_django.errors.JobRevoked"
    assert f"revoked by {by} at " in entry["error_message"] and entry["error_message"].endswith(" UTC")
    assert entry["revoked_by"] == ("" if by == "an unnamed caller" else by)


def test_revoke_a_queued_job_in_any_queue(redis_db):
    keep = Pair.set(queue="other").perform_async("keep", 1)
    jid = Pair.set(queue="low").perform_async("x", 1)
    assert revoke(jid, by="alice") == QUEUED
    assert redis_db.llen("queue:low") == 0 and redis_db.llen("queue:other") == 1
    _assert_revoked_entry(_dead(redis_db)[jid], "alice")
    assert keep not in _dead(redis_db)


def test_revoke_a_scheduled_and_a_retrying_job(redis_db):
    scheduled = Pair.perform_in(3600, "later", 1)
    assert revoke(scheduled, by="bob") == SCHEDULED
    assert redis_db.zcard("schedule") == 0
    _assert_revoked_entry(_dead(redis_db)[scheduled], "bob")
    retrying = {"class": "tests.jobsapp.limit_jobs.Pair", "args": ["r", 1], "jid": "c" * 24, "queue": "default",
                "retry": True, "retry_count": 1, "error_class": "RuntimeError", "error_message": "x"}
    redis_db.zadd("retry", {json.dumps(retrying): time.time() + 600})
    assert revoke("c" * 24) == RETRY
    assert redis_db.zcard("retry") == 0
    _assert_revoked_entry(_dead(redis_db)["c" * 24], "an unnamed caller")


def test_a_job_found_nowhere_leaves_a_short_lived_marker(redis_db):
    assert revoke("d" * 24, by="carol") == MARKED
    (member, expires), = redis_db.zrange(revocations.KEY, 0, -1, withscores=True)
    assert json.loads(member)["jid"] == "d" * 24 and json.loads(member)["by"] == "carol"
    assert time.time() < expires <= time.time() + revocations.MARKER_TTL
    with pytest.raises(ValueError, match="jid"):
        revoke("  ")
    with pytest.raises(ValueError, match="by"):
        revoke("d" * 24, by=42)


@pytest.mark.slow
def test_a_job_revoked_in_flight_never_runs_and_a_running_one_is_stopped(redis_db, worker_factory):
    # In flight: revoked before any list held it, pushed after the worker read the markers.
    assert revoke("e" * 24, by="dave") == MARKED
    worker = worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps({"REVOKE_GRACE": 1})})
    wait_for(lambda: redis_db.scard("processes") == 1, timeout=60, message="the worker's first beat")
    Pair.set(jid="e" * 24).perform_async("inflight", 1)
    wait_for(lambda: "e" * 24 in _dead(redis_db), timeout=60, message="the in-flight job recorded as revoked")
    _assert_revoked_entry(_dead(redis_db)["e" * 24], "dave")
    assert "inflight:together" not in _recorded(redis_db)

    # Running, ignoring the soft stop: the hard stop after the grace; the dead set names who.
    jid = Stubborn.perform_async("stub")
    wait_for(lambda: "stub:start" in _recorded(redis_db), timeout=60, message="the job running")
    assert revoke(jid, by="erin", terminate=True) in (RUNNING, MARKED)
    wait_for(lambda: jid in _dead(redis_db), timeout=60, message="the running job revoked")
    _assert_revoked_entry(_dead(redis_db)[jid], "erin")
    assert "stub:soft" in _recorded(redis_db) and "stub:survived" not in _recorded(redis_db)
    assert redis_db.zcard("retry") == 0
    # The thread was replaced: two jobs still run at once.
    Pair.perform_async("after", 2)
    Pair.perform_async("after", 2)
    wait_for(lambda: _recorded(redis_db).count("after:together") == 2, timeout=90,
             message="two jobs running at once after the revoke")
    # The last jobs' ACKs leave with their threads' next fetch: wait for them.
    wait_for(lambda: all(redis_db.llen(key) == 0 for key in redis_db.scan_iter("queue:default|*")), timeout=30,
             message="every private list empty (each job acknowledged once)")
    assert "stopped by erin" in worker.output()
