"""Batches in a fleet shared with Ruby wurk (issue 26 item 1, PRO-247): a callback
whose target is a Ruby constant is handed back for a Ruby worker, never killed;
a Python callback of the same batch runs here. The batches are written key by key
as Ruby wurk's ``Batch#jobs`` and its ``batch_push`` script write them."""

from __future__ import annotations

import json
import logging

import pytest

from tests.batch.conftest import callbacks, promote_retries
from tests.support import wait_for
from wurk_django import keys, payload
from wurk_django.batch import Status
from wurk_django.batch import callbacks as batch_callbacks

PY_TARGET = "tests.jobsapp.batch_jobs.Callbacks"
RUBY_TARGET = "MyApp::BatchDone"
FAST = {"POLL_INTERVAL_AVERAGE": 1, "LOG_FLUSH_INTERVAL": 0}


def _ruby_batch(redis_db, bid: str, callbacks_field: list, jobs: int, parent: str = "",
                callback_queue: str = "default") -> list[str]:
    """What Ruby wurk leaves in Redis for ``batch.jobs { Mark.perform_async(...) }``:
    the first flush's hash, its ``batches`` entry and parent links, then one
    ``batch_push`` per job (the jid joins ``-jids``, total and pending go up, the job
    is pushed with its ``bid``)."""
    created = 1764590000.25
    redis_db.hset(f"b-{bid}", mapping={
        "created_at": str(created), "description": "from ruby", "callback_queue": callback_queue,
        "callback_class": "", "parent_bid": parent, "tags": "[]", "linger": "",
        "callbacks": json.dumps(callbacks_field, separators=(",", ":")), "total": "0", "pending": "0",
        "failures": "0"})
    redis_db.expire(f"b-{bid}", 30 * 24 * 3600)
    redis_db.zadd("batches", {bid: created})
    if parent:
        redis_db.sadd(f"b-{parent}-kids", bid)
        redis_db.sadd(f"b-{parent}-pkids", bid)
    jids = [payload.new_jid() for _ in range(jobs)]
    for n, jid in enumerate(jids):
        redis_db.sadd(f"b-{bid}-jids", jid)
        redis_db.hincrby(f"b-{bid}", "total", 1)
        redis_db.hincrby(f"b-{bid}", "pending", 1)
        redis_db.sadd("queues", "default")
        redis_db.lpush("queue:default", json.dumps(
            {"retry": True, "queue": "default", "class": "tests.jobsapp.batch_jobs.Mark", "args": [n],
             "jid": jid, "created_at": 1764590000250, "enqueued_at": 1764590000250, "bid": bid},
            separators=(",", ":")))
    return jids


def _scheduled_callbacks(redis_db) -> list[dict]:
    return [payload.loads(raw) for raw in redis_db.zrange(keys.SCHEDULE, 0, -1)
            if payload.loads(raw).get("class") == "Wurk::Batch::CallbackJob"]


def test_a_ruby_callback_of_a_child_batch_is_left_for_ruby_and_the_parent_waits(redis_db, work, caplog,
                                                                                monkeypatch):
    """PRO-221: a callback target resolves in the runtime that serves its queue: a Ruby
    target met by a Python worker is handed back, not failed."""
    parent, child = "RubyParent0001", "RubyChild00001"
    _ruby_batch(redis_db, parent, [["success", PY_TARGET, {"tag": "parent"}],
                                   ["death", PY_TARGET, {"tag": "parent"}]], jobs=1)
    _ruby_batch(redis_db, child, [["success", RUBY_TARGET, {"tag": "child"}],
                                  ["success", PY_TARGET, {"tag": "child"}]], jobs=2, parent=parent)
    monkeypatch.setattr(batch_callbacks, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="wurk_django.batch"):
        work()
    assert callbacks(redis_db) == [f"success:{child}:child"]  # the Python callback ran here
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0
    [handed] = _scheduled_callbacks(redis_db)
    assert handed["args"] == [child, RUBY_TARGET, "success", {"tag": "child"}]
    assert handed["bid"] == parent and handed[batch_callbacks.HANDED_BACK] == 1
    # The parent neither died nor finished: it waits for the Ruby callback, a live member.
    assert redis_db.hget(f"b-{parent}", "death") is None
    assert not redis_db.exists(f"b-{parent}-death")
    assert redis_db.sismember(f"b-{parent}-jids", handed["jid"])
    assert Status(parent).pending == 1
    # Back on its queue (either scheduler), a Python worker hands it back again, later, warning once.
    promote_retries(redis_db)
    work()
    [again] = _scheduled_callbacks(redis_db)
    assert again["jid"] == handed["jid"] and again[batch_callbacks.HANDED_BACK] == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and RUBY_TARGET in r.getMessage()]
    assert len(warnings) == 1 and "left for another runtime" in warnings[0].getMessage()
    assert redis_db.zcard("dead") == 0

    # A Ruby worker runs it (stood in for here by a resolver that knows the constant): the
    # parent then succeeds, and its death never fired.
    ran = []
    real = batch_callbacks.resolve
    monkeypatch.setattr(batch_callbacks, "resolve", lambda target, event, cc: (
        (lambda status, options: ran.append(target)) if target == RUBY_TARGET else real(target, event, cc)))
    promote_retries(redis_db)
    work()
    assert ran == [RUBY_TARGET]
    assert callbacks(redis_db) == [f"success:{child}:child", f"success:{parent}:parent"]
    assert redis_db.zcard("dead") == 0


def test_a_python_typo_still_dies_at_once(redis_db, work):  # PRO-247: only other runtimes' targets wait
    _ruby_batch(redis_db, "RubyTypo000001", [["success", "tests.jobsapp.batch_jobs.NoSuchClass", {}]], jobs=1)
    work()
    [dead] = [payload.loads(d) for d in redis_db.zrange("dead", 0, -1)]
    assert dead["error_class"] == "wurk_django.batch.callbacks.UnresolvableTarget"
    assert _scheduled_callbacks(redis_db) == []


@pytest.mark.slow
def test_a_ruby_batch_completes_on_python_workers(redis_db, worker_factory):
    """Real worker processes: the Python callback runs, the Ruby one stays available for
    Ruby (in the schedule, then its queue), and nothing is dead."""
    bid = "RubyBatch00077"
    _ruby_batch(redis_db, bid, [["success", PY_TARGET, {"tag": "py"}], ["success", RUBY_TARGET, {"tag": "rb"}],
                                ["complete", "Billing::Closer#finish", {}]], jobs=3)
    worker = worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps(FAST)})
    wait_for(lambda: callbacks(redis_db) == [f"success:{bid}:py"], timeout=60, message="the Python callback")
    # Read in the same poll: a handed-back callback comes back to its queue after 10 s.
    def both_handed_back() -> list[dict] | None:
        jobs = _scheduled_callbacks(redis_db)
        return jobs if len(jobs) == 2 else None

    handed = wait_for(both_handed_back, timeout=60, message="the Ruby callbacks handed back")
    assert sorted(job["args"][1] for job in handed) == ["Billing::Closer#finish", RUBY_TARGET]
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0
    assert Status(bid).pending == 0
    assert worker.alive()
    assert worker.stop() == 0
    log = worker.output()
    assert log.count("left for another runtime") == 2 and "Traceback" not in log
