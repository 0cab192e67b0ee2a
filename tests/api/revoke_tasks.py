"""What the revoke timing tests share (tests/api/test_revoke_timing.py, and the admin's Stop
in tests/admin/test_revoke_pages.py): a Celery-style task that runs ten seconds (or as
long as asked) in a Python loop (so the soft stop's async raise lands), at module level so a worker process
resolves it by name, and the steps that put a worker in the state each test needs."""

from __future__ import annotations

import json
import time

from tests.support import wait_for
from wurk_django.celery import shared_task
from wurk_django.errors import SoftTimeLimitExceeded
from wurk_django.redis.app import redis_client

#: The worker may import this package's modules by name.
ENV = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.api"]})}
#: What a revoke heard at a heartbeat could take: the beat comes every 10 s, and each test
#: revokes just after one. Heard on the channel it takes a round trip; the bound is loose
#: so that a loaded machine does not fail it, and still well short of the next beat.
BEFORE_NEXT_BEAT = 4.0


# No retries: its failure ends the job, which is where a record once read FAILURE after a
# revoke (the run's end wrote it before the revoke's death could write REVOKED).
@shared_task(max_retries=0)
def loop_for(key, seconds=10):
    """Notes its start, runs ``seconds``, notes a soft stop (and re-raises it) or its end."""
    redis_client().rpush(key, "started")
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            time.sleep(0.02)
    except SoftTimeLimitExceeded:
        redis_client().rpush(key, "stopped")
        raise
    redis_client().rpush(key, "finished")
    return "finished"


def notes(redis_db, key: str) -> list[str]:
    return [item.decode() for item in redis_db.lrange(key, 0, -1)]


def the_process(redis_db) -> str:
    """The identity of the one worker process, once it has beaten."""
    wait_for(lambda: redis_db.scard("processes") == 1, timeout=60, message="the worker's first beat")
    (identity,) = redis_db.smembers("processes")
    return identity.decode()


def just_after_a_beat(redis_db, identity: str) -> None:
    """Return as the process has just beaten: its next beat is about 10 s away, so what
    happens within seconds from now did not come through a beat."""
    before = redis_db.hget(identity, "beat")
    wait_for(lambda: redis_db.hget(identity, "beat") != before, timeout=30, interval=0.01,
             message="the process's next beat")


def running(redis_db, key: str, identity: str, seconds: float = 10):
    """Just after a beat, push ``loop_for`` and wait until it runs; its AsyncResult. The
    task then has most of its ``seconds`` to run and the process most of a beat to wait."""
    just_after_a_beat(redis_db, identity)
    result = loop_for.delay(key, seconds)
    wait_for(lambda: "started" in notes(redis_db, key), timeout=30, interval=0.01, message="the task running")
    assert notes(redis_db, key) == ["started"], "the task must still run when it is revoked"
    return result


def stops_fast(redis_db, key: str, result, started: float) -> float:
    """Wait until the record reads REVOKED; the seconds since ``started`` (monotonic)."""
    wait_for(lambda: result.state != "STARTED", timeout=30, interval=0.01, message="the task to end")
    elapsed = time.monotonic() - started
    assert result.state == "REVOKED", (result.state, notes(redis_db, key))
    assert notes(redis_db, key) == ["started", "stopped"], notes(redis_db, key)
    return elapsed
