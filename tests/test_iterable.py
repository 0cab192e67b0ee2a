"""Iterable jobs (CORE-220..225), in-process and with a real worker."""

from __future__ import annotations

import json
import signal
import threading

import pytest

from tests.jobsapp.jobs import CountJob
from tests.support import wait_for
from wurk_django.errors import JobInterrupted
from wurk_django.iterable import IterableJob


def _run(args, jid="d" * 24, stop: threading.Event | None = None):
    job = CountJob()
    job.jid = jid
    job._stop_flag = stop
    return job.run(list(args))


def _list(redis_db, key):
    return [v.decode() for v in redis_db.lrange(key, 0, -1)]


def test_runs_every_item_and_cleans_up(redis_db):
    _run([5])
    assert _list(redis_db, "test:items") == ["0", "1", "2", "3", "4"]
    assert _list(redis_db, "test:hooks") == ["start", "stop", "complete"]
    assert not redis_db.exists("it-" + "d" * 24)  # CORE-224


def test_a_failure_saves_the_cursor_and_the_retry_resumes_there(redis_db):
    with pytest.raises(RuntimeError):
        _run([6, 0, 3])
    state = redis_db.hgetall("it-" + "d" * 24)
    assert json.loads(state[b"c"]) == 3 and state[b"ex"] == b"1"  # CORE-222/223
    assert 0 < redis_db.ttl("it-" + "d" * 24) <= 30 * 86400
    _run([6, 0, 3])
    assert _list(redis_db, "test:items") == ["0", "1", "2", "3", "4", "5"]
    assert _list(redis_db, "test:hooks") == ["start", "stop", "resume", "stop", "complete"]


def test_core_064_223_the_state_hash_holds_executions_cursor_runtime_and_keeps_its_first_expiry(redis_db):
    """CORE-064: ``it-<jid>`` holds ``ex``, ``c`` and ``rt`` (``cancelled`` once cancelled) for
    30 days; CORE-223: a save writes them with ``EXPIRE ... NX``, so a later save does not push
    the expiry back."""
    key = "it-" + "d" * 24
    with pytest.raises(RuntimeError):
        _run([6, 0, 3])
    state = redis_db.hgetall(key)
    assert {b"ex", b"c", b"rt"} <= set(state) and float(state[b"rt"]) >= 0
    assert 29 * 86400 < redis_db.ttl(key) <= 30 * 86400
    redis_db.expire(key, 1000)
    redis_db.delete("test:failed-once")
    with pytest.raises(RuntimeError):
        _run([6, 0, 4])  # resumes at 3, fails at 4: saved again
    assert redis_db.hget(key, "ex") == b"2" and redis_db.ttl(key) <= 1000
    CountJob.cancel("d" * 24)
    assert redis_db.hget(key, "cancelled")


def test_interrupted_job_saves_its_place_and_asks_to_be_pushed_again(redis_db):
    stop = threading.Event()
    stop.set()
    with pytest.raises(JobInterrupted):
        _run([4], stop=stop)
    assert json.loads(redis_db.hget("it-" + "d" * 24, "c")) == 0
    assert _list(redis_db, "test:items") == []


def test_cancelled_job_stops_at_its_next_save(redis_db):
    assert CountJob.cancel("d" * 24) > 0
    _run([4])
    assert _list(redis_db, "test:items") == []
    assert _list(redis_db, "test:hooks") == ["cancel", "complete"]


def test_perform_is_not_allowed_on_an_iterable_job():
    with pytest.raises(TypeError, match="build_enumerator"):
        class Wrong(IterableJob):
            def perform(self):
                pass


def test_term_interrupts_and_a_new_worker_resumes(redis_db, worker_factory):
    jid = CountJob.perform_async(40, 0.1)
    first = worker_factory("-c", "1", "-t", "10")
    wait_for(lambda: redis_db.llen("test:items") >= 5, message="some items")
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=20) == 0
    done_before = redis_db.llen("test:items")
    assert done_before < 40
    # Re-pushed through the client with its saved cursor (CORE-117, CORE-224).
    assert json.loads(redis_db.lindex("queue:default", 0))["jid"] == jid
    cursor = json.loads(redis_db.hget(f"it-{jid}", "c"))
    assert done_before - 1 <= cursor <= done_before
    worker_factory("-c", "1")
    wait_for(lambda: redis_db.llen("test:items") >= 40, timeout=30, message="the rest")
    items = [int(i) for i in _list(redis_db, "test:items")]
    assert sorted(set(items)) == list(range(40))
    assert len(items) - 40 <= 1  # at most the item in progress at the stop ran twice
    wait_for(lambda: not redis_db.exists(f"it-{jid}"), message="state cleanup")


# -- issue 31 item 6: the CSV batches helper (CORE-220) and the long-iteration warning (CORE-222) --


def test_csv_batches_resume_at_the_batch_not_done_CORE_220():
    import csv
    import io

    text = "".join(f"r{n},{n}\n" for n in range(7))
    batches = list(IterableJob.iterate_csv_batches(csv.reader(io.StringIO(text)), None, batch_size=3))
    assert [cursor for _, cursor in batches] == [0, 1, 2]
    assert [len(rows) for rows, _ in batches] == [3, 3, 1]
    assert batches[1][0][0] == ["r3", "3"]
    resumed = list(IterableJob.iterate_csv_batches(csv.reader(io.StringIO(text)), 2, batch_size=3))
    assert resumed == [([["r6", "6"]], 2)]
    assert json.loads(json.dumps(resumed[0][1])) == 2  # the cursor survives JSON
    with pytest.raises(ValueError, match="batch_size"):
        list(IterableJob.iterate_csv_batches([], None, batch_size=0))


def test_an_iteration_longer_than_the_shutdown_timeout_is_warned_once_CORE_222(redis_db, caplog):
    from tests.support import wurk_settings

    with wurk_settings(TIMEOUT=0.01):
        _run([3, 0.05])
    warnings = [r for r in caplog.records if "longer than the shutdown TIMEOUT" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert "CountJob" in warnings[0].getMessage() and "d" * 24 in warnings[0].getMessage()
    caplog.clear()
    redis_db.delete("test:items")
    _run([3], jid="e" * 24)  # quick iterations under the default 8 s: no word
    assert not [r for r in caplog.records if "TIMEOUT" in r.getMessage()]
