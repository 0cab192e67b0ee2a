"""Batches on a real Redis, with an in-process worker (the real server chain, retry layer and death path)."""

from __future__ import annotations

import json
import logging

import pytest

from tests.batch.conftest import callbacks, promote_retries
from tests.jobsapp.batch_jobs import AddSibling, AlwaysFails, Callbacks, FailOnce, Mark, NextStage, Noop, OpensBatch
from wurk_django import keys, payload
from wurk_django.batch import Batch, BatchSet, DeadBatchSet, NoSuchBatch, Status
from wurk_django.batch import scripts as batch_scripts

CB = "tests.jobsapp.batch_jobs.Callbacks"


def _marks(redis_db) -> list[str]:
    return [m.decode() for m in redis_db.lrange("test:marks", 0, -1)]


def _new(tag: str = "", events=("success", "complete", "death")) -> Batch:
    batch = Batch()
    for event in events:
        batch.on(event, Callbacks, {"tag": tag})
    return batch


def test_bid_and_first_write_layout(redis_db):  # PRO-200, PRO-201, PRO-202
    batch = _new("a")
    batch.description = "Import"
    batch.tags = ["import", 7]
    assert len(batch.bid) == 14 and "=" not in batch.bid
    assert not redis_db.exists(f"b-{batch.bid}")  # nothing written before the first block
    with batch.jobs():
        jid = Mark.perform_async("one")
    fields = {k.decode(): v.decode() for k, v in redis_db.hgetall(f"b-{batch.bid}").items()}
    assert fields["description"] == "Import" and fields["callback_queue"] == "default"
    assert fields["total"] == "1" and fields["pending"] == "1" and fields["failures"] == "0"
    assert json.loads(fields["tags"]) == ["import", "7"]
    assert json.loads(fields["callbacks"])[0] == ["success", CB, {"tag": "a"}]
    assert ',"' in fields["callbacks"] and ", " not in fields["callbacks"]  # PRO-003 compact
    assert redis_db.smembers(f"b-{batch.bid}-jids") == {jid.encode()}
    assert redis_db.zscore("batches", batch.bid) == pytest.approx(float(fields["created_at"]))
    job = payload.loads(redis_db.lindex("queue:default", 0))
    assert job["bid"] == batch.bid and job["jid"] == jid
    assert batch.include(jid) and not batch.include("nope")
    assert set(BatchSet().scan_tags("import")) == {batch.bid}


def test_success_and_complete_fire_once_after_every_job(redis_db, work):  # PRO-241, PRO-242
    batch = _new("x")
    with batch.jobs():
        for i in range(5):
            Mark.perform_async(i)
    assert Status(batch.bid).pending == 5
    work()  # the jobs, then the callbacks
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:x", f"success:{batch.bid}:x"]
    status = Status(batch.bid)
    assert status.pending == 0 and status.total == 5 and status.complete and status.success
    assert status.complete_at and status.success_at and not status.death_at
    assert redis_db.get(f"b-{batch.bid}-success") == b"1" and redis_db.get(f"b-{batch.bid}-complete") == b"1"
    # The callback read the finished status.
    assert redis_db.lrange("test:callback-pending", 0, -1) == [f"{batch.bid}:0:5".encode()]
    assert 0 < redis_db.ttl(f"b-{batch.bid}") <= 86400  # linger after success (PRO-210)
    # Replays of the gate (a reclaimed re-run acking again) fire nothing more.
    from wurk_django.batch import fire

    fire.maybe_fire(batch.bid, 0, 0, 0)
    work()
    assert len(callbacks(redis_db)) == 2


def test_empty_block_still_fires_both(redis_db, work):  # PRO-222 step 5, PRO-602
    batch = _new("e")
    with batch.jobs():
        pass
    queued = [payload.loads(r) for r in redis_db.lrange("queue:default", 0, -1)]
    assert [j["class"] for j in queued] == ["Sidekiq::Batch::Empty"] and queued[0]["bid"] == batch.bid
    work()
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:e", f"success:{batch.bid}:e"]


def test_open_block_cannot_drain(redis_db, work):  # PRO-272, PRO-602
    batch = _new("o")
    batch.autoflush = 1  # written as pushed, so the worker can run them inside the block
    with batch.jobs():
        Mark.perform_async(1)
        assert redis_db.llen("queue:default") == 1
        work()
        assert _marks(redis_db) == [f"{batch.bid}:1"]
        assert callbacks(redis_db) == []  # the hold keeps it open
    work()
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:o", f"success:{batch.bid}:o"]


def test_buffered_block_writes_at_the_end(redis_db):  # PRO-222 step 4
    batch = _new()
    with batch.jobs():
        jids = [Mark.perform_async(i) for i in range(3)]
        assert all(jids) and redis_db.llen("queue:default") == 0
    assert redis_db.llen("queue:default") == 3 and Status(batch.bid).total == 3


def test_exception_in_block_pushes_nothing_and_never_fires(redis_db, work):  # PRO-222 step 7
    batch = _new("boom")
    with pytest.raises(KeyError), batch.jobs():
        Mark.perform_async(1)
        raise KeyError("stop")
    assert redis_db.llen("queue:default") == 0
    status = Status(batch.bid)
    assert status.exists and status.total == 0 and status.pending == 1  # the hold stays
    work()
    assert callbacks(redis_db) == []
    _assert_every_key_has_ttl(redis_db)  # the abandoned batch expires by itself


def test_autoflush_is_validated_before_any_write(redis_db):
    batch = Batch()
    batch.autoflush = -3
    with pytest.raises(ValueError, match="autoflush"), batch.jobs():
        pass
    batch.autoflush = None
    batch.callback_queue = "bad\nqueue"
    with pytest.raises(ValueError, match="callback_queue"), batch.jobs():
        pass
    assert not redis_db.exists(f"b-{batch.bid}")


def test_callback_registration_rules(redis_db, caplog):  # PRO-220
    batch = Batch()
    with pytest.raises(ValueError, match="event"):
        batch.on("done", Callbacks)
    with pytest.raises(ValueError, match="dict"):
        batch.on("success", Callbacks, ["x"])
    with pytest.raises(ValueError, match="JSON"):
        batch.on("success", Callbacks, {"x": object()})
    with pytest.raises(ValueError, match="target"):
        batch.on("success", 42)
    batch.on("success", Callbacks, {"a": 1}).on("success", Callbacks, {"a": 1})  # staged dedupe
    with batch.jobs():
        Noop.perform_async()
    assert len(json.loads(redis_db.hget(f"b-{batch.bid}", "callbacks"))) == 1
    reopened = Batch(batch.bid)
    reopened.on("success", Callbacks, {"a": 1})  # dedupe in Redis
    reopened.on("complete", "#custom")
    entries = json.loads(redis_db.hget(f"b-{batch.bid}", "callbacks"))
    assert entries == [["success", CB, {"a": 1}], ["complete", "#custom", {}]]
    redis_db.hset(f"b-{batch.bid}", "success", "1")
    with caplog.at_level(logging.WARNING, logger="wurk_django.batch"):
        reopened.on("success", "x.Y")
    assert "already fired" in caplog.text
    with pytest.raises(NoSuchBatch):
        Batch("nosuchbatchxxx")


def test_append_callback_keeps_bytes_dedupes_and_caps(redis_db):  # PRO-278, PRO-600, PRO-221
    bid = "rubybatch00001"
    ruby = '[["success","Ruby::Done",{"id":12345678901234567,"list":[],"url":"a/b"}]]'
    redis_db.hset(f"b-{bid}", mapping={"callbacks": ruby, "total": 0})
    same = '["success","Ruby::Done",{"id":12345678901234567,"list":[],"url":"a/b"}]'
    r = redis_db
    assert batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], [same, "success", 3]) is None
    assert r.hget(f"b-{bid}", "callbacks").decode() == ruby  # unchanged: the entry is there
    other = '["complete","Ruby::Done",{"s":"with \\"]\\" inside"}]'
    batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], [other, "complete", 3])
    assert r.hget(f"b-{bid}", "callbacks").decode() == ruby[:-1] + "," + other + "]"
    assert json.loads(r.hget(f"b-{bid}", "callbacks"))[1][2]["s"] == 'with "]" inside'
    batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], ['["death","A",{}]', "death", 3])
    assert batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], ['["death","B",{}]', "death", 3]) == -2
    assert batch_scripts.APPEND_CALLBACK(r, ["b-missing"], ['["death","B",{}]', "death", 3]) == -1
    r.hset(f"b-{bid}", "callbacks", "[]")
    batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], ['["death","A",{}]', "death", 3])
    assert r.hget(f"b-{bid}", "callbacks") == b'[["death","A",{}]]'
    # PRO-221: the dedupe compares bytes: the same triple with a float written another way
    # (Ruby's 1.0, Python's 1) is stored twice, which only runs the callback twice.
    batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], ['["success","A",{"n":1.0}]', "success", 3])
    batch_scripts.APPEND_CALLBACK(r, [f"b-{bid}"], ['["success","A",{"n":1}]', "success", 3])
    assert [entry[2]["n"] for entry in json.loads(r.hget(f"b-{bid}", "callbacks"))[1:]] == [1.0, 1]


def test_failure_then_retry_success(redis_db, work):  # PRO-230, PRO-274
    batch = _new("f")
    with batch.jobs():
        FailOnce.perform_async("k")
        Mark.perform_async("ok")
    work()
    status = Status(batch.bid)
    assert status.failures == 1 and status.pending == 1 and len(status.failed_jids) == 1
    assert callbacks(redis_db) == []
    assert promote_retries(redis_db) == 1
    work()
    status = Status(batch.bid)
    assert status.failures == 0 and status.pending == 0 and status.failed_jids == []
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:f", f"success:{batch.bid}:f"]


def test_death_fires_death_and_complete_not_success_then_morgue_retry(redis_db, work, monkeypatch):  # PRO-231, PRO-244
    batch = _new("d")
    with batch.jobs():
        jid = AlwaysFails.perform_async("a")
        Mark.perform_async("ok")
    work()
    work()  # the callbacks
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:d", f"death:{batch.bid}:d"]
    status = Status(batch.bid)
    assert status.dead_jids == [jid] and status.failures == 0 and status.pending == 1 and status.dead
    assert list(b.bid for b in DeadBatchSet()) == [batch.bid]
    # A retry from the morgue that succeeds: success fires, death does not fire again.
    from wurk_django.api import DeadSet

    redis_db.delete("test:attempts")
    entry = next(iter(DeadSet()))
    # The bug is fixed. monkeypatch puts the class's own perform back afterwards: a `del`
    # would leave Job.perform (NotImplementedError) to every later test of this process.
    monkeypatch.setattr(AlwaysFails, "perform", lambda self, key="x": None)
    entry.retry()
    assert Status(batch.bid).dead_jids == [] and not Status(batch.bid).dead
    assert DeadBatchSet().size == 0
    promote_retries(redis_db)
    work()
    work()
    monkeypatch.undo()
    assert sorted(callbacks(redis_db)) == sorted([f"complete:{batch.bid}:d", f"death:{batch.bid}:d",
                                                  f"success:{batch.bid}:d"])


def test_nested_batches_parent_fires_after_children(redis_db, work):  # PRO-245, PRO-246
    parent = _new("p")
    with parent.jobs():
        middle = _new("m")
        with middle.jobs():
            leaf = _new("l")
            with leaf.jobs():
                Mark.perform_async("leaf")
            Mark.perform_async("middle")
        sibling = _new("s")
        with sibling.jobs():
            Mark.perform_async("sibling")
    assert Status(middle.bid).parent_bid == parent.bid and Status(leaf.bid).parent_bid == middle.bid
    assert set(Status(parent.bid).children()) == {middle.bid, sibling.bid}
    assert Status(parent.bid).total == 0  # its own jobs: none, the empty marker is not needed
    work()
    order = callbacks(redis_db)
    events = [c.rsplit(":", 1)[1] + ":" + c.split(":")[0] for c in order]
    assert sorted(events) == sorted(f"{t}:{e}" for t in "lmsp" for e in ("complete", "success"))
    assert events.index("l:success") < events.index("m:success") < events.index("p:success")
    assert events.index("s:success") < events.index("p:complete")
    assert events.count("p:success") == 1
    # Child callbacks ran inside the parent batch.
    assert Status(parent.bid).total == 4  # middle's and sibling's complete + success callbacks


def test_callback_opens_the_next_stage_in_the_parent(redis_db, work):  # PRO-223
    parent = Batch()
    parent.on("success", Callbacks, {"tag": "all"})
    with parent.jobs():
        child = Batch()
        child.on("success", NextStage, {"stage": 1})
        with child.jobs():
            Mark.perform_async("stage-1")
    work()
    assert callbacks(redis_db)[-1] == f"success:{parent.bid}:all"
    stages = [c for c in callbacks(redis_db) if c.startswith("stage:")]
    assert [s.rsplit(":", 1)[1] for s in stages] == ["1", "2"]


def test_reopening_from_inside_a_job_adds_siblings(redis_db, work):  # PRO-223
    batch = _new("r")
    with batch.jobs():
        AddSibling.perform_async("a")
    work()
    assert sorted(_marks(redis_db)) == sorted([f"{batch.bid}:a", f"{batch.bid}:a-sibling"])
    status = Status(batch.bid)
    assert status.total == 2 and status.pending == 0
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:r", f"success:{batch.bid}:r"]


def test_scheduled_only_block_does_not_misfire(redis_db, work):  # PRO-224, PRO-602
    batch = _new("s")
    with batch.jobs():
        jid = Mark.perform_in(3600, "later")
    assert Status(batch.bid).total == 1 and redis_db.zcard("schedule") == 1
    stored = payload.loads(redis_db.zrange("schedule", 0, -1)[0])
    assert stored["bid"] == batch.bid and "at" not in stored and "enqueued_at" not in stored
    work()
    assert callbacks(redis_db) == [] and redis_db.llen("queue:default") == 0
    promote_retries(redis_db)
    assert Status(batch.bid).total == 1  # promotion does not count it again
    work()
    assert _marks(redis_db) == [f"{batch.bid}:later"] and jid
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:s", f"success:{batch.bid}:s"]


def test_perform_bulk_inside_jobs(redis_db, work):  # PRO-224
    batch = _new("b")
    with batch.jobs():
        jids = Noop.perform_bulk([[i] for i in range(2500)])
    assert len(set(jids)) == 2500 and Status(batch.bid).total == 2500
    assert redis_db.scard(f"b-{batch.bid}-jids") == 2500
    work()
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:b", f"success:{batch.bid}:b"]


def test_invalidate_skips_jobs_and_drains(redis_db, work):  # PRO-250
    parent = _new("p")
    with parent.jobs():
        Mark.perform_async("p")
        child = _new("c")
        with child.jobs():
            Mark.perform_async("c")
    parent_batch = Batch(parent.bid)
    assert parent_batch.valid
    parent_batch.invalidate_all()
    assert not parent_batch.valid and not Batch(child.bid).valid
    work()
    assert _marks(redis_db) == []  # skipped
    assert f"success:{parent.bid}:p" in callbacks(redis_db) and f"success:{child.bid}:c" in callbacks(redis_db)


def test_remove_jobs_and_delete_fire(redis_db, work):  # PRO-251, PRO-279, PRO-602
    batch = _new("rm")
    with batch.jobs():
        jid = Mark.perform_async(1)
    assert Batch(batch.bid).remove_jobs(jid, "unknown") == 1
    status = Status(batch.bid)
    assert status.total == 0 and status.pending == 0
    work()
    assert f"success:{batch.bid}:rm" in callbacks(redis_db)
    # Deleting the last pending child fires its parent.
    parent = _new("p")
    with parent.jobs():
        child = Batch()
        with child.jobs():
            Mark.perform_async("orphan")
    redis_db.delete("queue:default")
    Status(child.bid).delete()
    assert not any(redis_db.exists(k) for k in keys.batch_keys(child.bid)[:2])
    assert redis_db.zscore("batches", child.bid) is None
    work()
    assert f"success:{parent.bid}:p" in callbacks(redis_db)


def test_a_recovered_job_is_not_counted_twice(redis_db, work):  # PRO-230 step 4
    batch = _new("k")
    with batch.jobs():
        Mark.perform_async(1)
        Mark.perform_async(2)
    raw = redis_db.lindex("queue:default", -1)
    work()
    redis_db.lpush("queue:default", raw)  # the reaper puts a finished job back: it runs again
    work()
    status = Status(batch.bid)
    assert status.pending == 0 and status.total == 2
    assert callbacks(redis_db).count(f"success:{batch.bid}:k") == 1


def test_unresolvable_callback_dies_at_once(redis_db, work, monkeypatch):  # PRO-247
    # Registered where they could not be checked (another service, a Ruby client):
    # batch.on() refuses them here (issue 28 item 8), the worker kills their jobs.
    from wurk_django.batch import callbacks as runner

    monkeypatch.setattr(runner, "problem", lambda *args: None)
    batch = Batch()
    batch.on("success", "tests.jobsapp.batch_jobs.Nothing")
    batch.on("complete", "os.path#join")  # not in an installed app
    with batch.jobs():
        Noop.perform_async()
    work()
    dead = [payload.loads(d) for d in redis_db.zrange("dead", 0, -1)]
    assert len(dead) == 2 and all(d["error_class"] == "wurk_django.batch.callbacks.UnresolvableTarget" for d in dead)
    assert redis_db.zcard("retry") == 0


def test_hash_method_target_uses_callback_class(redis_db, work):
    batch = Batch()
    batch.callback_class = Callbacks
    batch.on("success", "#custom", {"tag": "h"})
    batch.on("complete", f"{CB}#custom", {"tag": "full"})
    with batch.jobs():
        Noop.perform_async()
    work()
    assert sorted(callbacks(redis_db)) == [f"custom:{batch.bid}:full", f"custom:{batch.bid}:h"]


def test_status_data_sets_tags_expiry_linger(redis_db, work):  # PRO-260, PRO-261
    batches = []
    for i in range(3):
        b = Batch().expires_in(600)
        b.tags = ["t"] if i else []
        b.linger = 5
        with b.jobs():
            Noop.perform_async()
        batches.append(b)
    assert 590 < redis_db.ttl(f"b-{batches[0].bid}") <= 600
    assert 590 < redis_db.ttl("tags:t") <= 600
    assert [s.bid for s in BatchSet()] == [b.bid for b in reversed(batches)]
    assert BatchSet().size == 3 and Batch.DeadSet().size == 0
    data = Status(batches[0].bid).data()
    assert set(data) == {"bid", "total", "pending", "failures", "created_at", "complete_at", "success_at",
                         "death_at", "complete", "invalidated", "description", "parent_bid", "tags",
                         "failed_jids", "dead_jids", "child_count"}
    json.dumps(data)
    work()
    assert 0 < redis_db.ttl(f"b-{batches[0].bid}") <= 5  # linger
    with pytest.raises(ValueError):
        Status(" ")


def test_noscript_resend_keeps_push_and_registration_together(redis_db):  # PRO-004
    batch = Batch()
    redis_db.script_flush()
    with batch.jobs():
        Mark.perform_async(1)
    assert redis_db.llen("queue:default") == 1 and Status(batch.bid).total == 1


def test_pushes_inside_jobs_ignore_on_commit(redis_db, db):  # PRO-224
    from django.db import transaction

    batch = Batch()
    with transaction.atomic(), batch.jobs():
        Mark.set(on_commit=True).perform_async(1)
    assert Status(batch.bid).total == 1


def _assert_every_key_has_ttl(redis_db) -> None:
    batch_keys = [k for k in redis_db.scan_iter() if k.startswith((b"b-", b"tags:"))]
    assert batch_keys
    assert [k for k in batch_keys if redis_db.ttl(k) < 0] == []


def test_every_batch_key_has_a_ttl(redis_db, work):  # PRO-211, PRO-602
    """PRO-212: tTL is the only garbage collector."""
    done = _new("x")
    done.tags = ["ttl"]
    with done.jobs():
        FailOnce.perform_async("t")
        AlwaysFails.perform_async()
        child = Batch()
        with child.jobs():
            Mark.perform_async("c")
    work()
    promote_retries(redis_db)
    work()
    work()
    assert Status(done.bid).complete
    _assert_every_key_has_ttl(redis_db)
    # A late retry into an expired batch does not bring keys back without a TTL.
    late = Batch()
    with late.jobs():
        jid = FailOnce.perform_async("late")
    for key in keys.batch_keys(late.bid):
        redis_db.delete(key)
    from wurk_django.client.push import Client

    Client().push({"class": Mark, "args": ["late"], "bid": late.bid, "jid": jid})
    _assert_every_key_has_ttl(redis_db)


def test_job_sees_its_batch_and_validity(redis_db):  # PRO-223
    from wurk_django.job import Job

    batch = Batch()
    with batch.jobs():
        Noop.perform_async()
    job = Job()
    assert job.batch is None and job.valid_within_batch()
    job.bid = batch.bid
    assert job.batch == batch and job.valid_within_batch()
    Batch(batch.bid).invalidate_all()
    assert not job.valid_within_batch()


def test_a_job_changed_by_an_earlier_hook_is_registered_as_written(redis_db):
    """The batch hook works on operations (issue 24 item 3): a hook ahead of it that
    rewrites a batch job's operation cannot make the job miss its registration."""
    from wurk_django.client import operations, writer

    def meddle(ops):
        return [operations.enqueue({**op.job, "meddled": True}) if type(op) is operations.Enqueue else op
                for op in ops]

    writer.register_hook("meddle", meddle, position=10)
    try:
        batch = Batch()
        with batch.jobs():
            jid = Noop.perform_async()
    finally:
        writer.unregister_hook("meddle")
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["meddled"] is True and payload.loads(raw)["jid"] == jid
    assert redis_db.smembers(f"b-{batch.bid}-jids") == {jid.encode()}
    assert redis_db.hget(f"b-{batch.bid}", "total") == b"1"


def test_a_batch_push_wakes_idle_fetchers_when_it_lands(redis_db, monkeypatch):
    """A batch job is pushed by push.lua, whose shared push snippet writes the wake-up
    token: inside a jobs() block it lands (and wakes) when the block's buffer is sent,
    not before; the writer sends no wake-up of its own for it."""
    from wurk_django.client import operations

    woken: list[dict] = []
    real = operations.wake_commands
    monkeypatch.setattr(operations, "wake_commands",
                        lambda counts, earliest, db=0: woken.append(dict(counts)) or real(counts, earliest, db))
    batch = Batch()
    with batch.jobs():
        Noop.perform_async()
        Noop.set(queue="other").perform_async()
        assert not redis_db.exists("wake:default") and not redis_db.exists("queue:default")
    assert redis_db.lrange("wake:default", 0, -1) == [b"1"] and redis_db.lrange("wake:other", 0, -1) == [b"1"]
    assert 0 < redis_db.ttl("wake:other") <= keys.WAKE_TTL
    assert all(not counts for counts in woken)
    assert redis_db.hget(f"b-{batch.bid}", "total") == b"2"


@pytest.mark.parametrize("exit_kind", ["rescheduled", "paused", "shutdown", "caused_by_shutdown", "error"])
def test_runs_that_end_another_way_ack_nothing(redis_db, exit_kind):  # PRO-230 step 1, PRO-232
    from wurk_django import context
    from wurk_django.batch.middleware import BatchServerMiddleware
    from wurk_django.conf import get_config
    from wurk_django.errors import Shutdown
    from wurk_django.outcome import Outcome
    from wurk_django.redis.connection import get_redis

    batch = Batch()
    with batch.jobs():
        jid = Mark.perform_async(1)
    raw = redis_db.lindex("queue:default", 0)
    job = payload.loads(raw)
    where = context.JobContext(get_config(), get_redis(), raw, queue="default", job=job)

    def run():
        # What an inner layer does: a limiter reschedules, perform asks to resume later
        # (the processor's innermost layer records it), a shutdown, a failure.
        if exit_kind == "rescheduled":
            where.outcome = Outcome.RESCHEDULED
            return None
        if exit_kind == "paused":
            where.outcome = Outcome.PAUSED
            return None
        if exit_kind == "shutdown":
            raise Shutdown()
        if exit_kind == "caused_by_shutdown":
            try:
                raise Shutdown()
            except Shutdown as exc:
                raise RuntimeError("wrapped") from exc
        raise RuntimeError("a real failure")

    with context.scope(where):
        if exit_kind in ("rescheduled", "paused"):
            assert BatchServerMiddleware()(Mark(), job, "default", run) is None
        else:
            with pytest.raises(BaseException):  # noqa: B017 - each kind raises its own
                BatchServerMiddleware()(Mark(), job, "default", run)
    status = Status(batch.bid)
    assert status.pending == 1 and batch.include(jid)
    assert status.failures == (1 if exit_kind == "error" else 0)


def test_a_batch_written_by_ruby_runs_and_fires_here(redis_db, work):  # PRO-001, PRO-600
    """Keys and fields as Ruby wurk writes them; a Python worker acks the jobs and fires."""
    bid = "RubyBatch00042"
    callbacks_field = ('[["success","tests.jobsapp.batch_jobs.Callbacks",{"id":12345678901234567,"list":[],'
                       '"tag":"rb"}],["complete","Ruby::Only",{}]]')
    redis_db.hset(f"b-{bid}", mapping={
        "created_at": "1732900000.5", "description": "from ruby", "callback_queue": "rbq", "callback_class": "",
        "parent_bid": "", "tags": '["ruby"]', "linger": "", "callbacks": callbacks_field,
        "total": 2, "pending": 2, "failures": 0})
    redis_db.zadd("batches", {bid: 1732900000.5})
    jids = ["a1" * 12, "b2" * 12]
    redis_db.sadd(f"b-{bid}-jids", *jids)
    for jid in jids:
        redis_db.lpush("queue:default", json.dumps(
            {"retry": True, "queue": "default", "class": "tests.jobsapp.batch_jobs.Mark", "args": [jid[:2]],
             "jid": jid, "created_at": 1732900000500, "enqueued_at": 1732900000500, "bid": bid},
            separators=(",", ":")))
    assert work() == 2
    queued = [payload.loads(r) for r in redis_db.lrange("queue:rbq", 0, -1)]
    by_target = {j["args"][1]: j for j in queued}
    success = by_target["tests.jobsapp.batch_jobs.Callbacks"]
    assert success["class"] == "Wurk::Batch::CallbackJob" and "bid" not in success and success["retry"] is True
    assert success["args"] == [bid, "tests.jobsapp.batch_jobs.Callbacks", "success",
                               {"id": 12345678901234567, "list": [], "tag": "rb"}]
    assert b'"id":12345678901234567,"list":[]' in redis_db.lindex("queue:rbq", -1) + redis_db.lindex("queue:rbq", 0)
    work(("rbq",))
    assert callbacks(redis_db) == [f"success:{bid}:rb"]
    assert json.loads(redis_db.hget(f"b-{bid}", "callbacks")) == json.loads(callbacks_field)  # untouched


def test_an_expired_job_counts_as_done_for_its_batch(redis_db, work):  # PRO-311, PRO-230
    batch = _new("x")
    with batch.jobs():
        Mark.set(expires_in=60).perform_async("late")
        Mark.perform_async("on-time")
    # Age the queued job past its expiry, as if it had waited in the queue.
    [late] = [raw for raw in redis_db.lrange("queue:default", 0, -1) if b'"late"' in raw]
    job = payload.loads(late)
    job["expiry"] = job["created_at"] / 1000 - 1
    redis_db.lrem("queue:default", 1, late)
    redis_db.rpush("queue:default", payload.dumps(job))
    work()
    assert redis_db.lrange("test:marks", 0, -1) == [f"{batch.bid}:on-time".encode()]  # skipped, never run
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:x", f"success:{batch.bid}:x"]
    assert Status(batch.bid).pending == 0


def test_on_refuses_a_target_that_cannot_handle_its_event():
    """Issue 28 item 8: a target this process can import must have the event's method, or
    batch.on() says so at once (its callback job would otherwise die after the batch ran);
    a class it cannot import, such as a Ruby class name, is taken as it is."""
    from tests.jobsapp.batch_jobs import Broken

    batch = Batch()
    with pytest.raises(ValueError, match=r"has no method 'on_complete' for the 'complete' event"):
        batch.on("complete", Broken)  # it has on_success only
    with pytest.raises(ValueError, match="has no method 'on_complete'"):
        batch.on("complete", "tests.jobsapp.batch_jobs.Broken")
    with pytest.raises(ValueError, match="has no class 'Nothing'"):
        batch.on("success", "tests.jobsapp.batch_jobs.Nothing")
    with pytest.raises(ValueError, match="has no method 'missing'"):
        batch.on("success", f"{CB}#missing")
    with pytest.raises(ValueError, match="is private"):
        batch.on("success", f"{CB}#_secret")
    batch.callback_class = Callbacks
    with pytest.raises(ValueError, match="has no method 'nope'"):
        batch.on("success", "#nope")
    batch.on("success", Broken)
    batch.on("complete", f"{CB}#custom")
    batch.on("death", "#on_death")
    batch.on("success", "MyApp::Callbacks")  # a Ruby class: checked by the worker that runs it
    batch.on("success", "reports.callbacks.Done")  # not importable here
    assert len(batch._staged) == 5


def test_pro_240_the_gate_fires_from_pending_live_and_kids_only(redis_db, work):
    """PRO-240: ``maybe_fire(bid, pending, live, kids)`` fires nothing while a job is live
    or a child batch open, nor for a missing hash (``live = -1``, a straggler acking into
    a deleted batch); with none live: complete, then success once nothing is pending and
    no death flag is set in the subtree."""
    from wurk_django.batch.fire import maybe_fire

    def fired(batch) -> list[str]:
        work()  # runs the callback jobs pushed to the default queue
        return sorted(c.split(":")[0] for c in callbacks(redis_db) if batch.bid in c)

    batch, dead = _new("g"), _new("x")
    for each in (batch, dead):
        with each.jobs():
            Mark.set(queue="elsewhere").perform_async("never run here")
    for state in ((0, -1, 0), (0, 1, 0), (0, 0, 1), (1, -1, 0)):
        maybe_fire(batch.bid, *state)
    assert fired(batch) == []
    maybe_fire(batch.bid, 1, 0, 0)
    assert fired(batch) == ["complete"]
    maybe_fire(batch.bid, 0, 0, 0)
    assert fired(batch) == ["complete", "success"]
    redis_db.hset(keys.batch(dead.bid), "death", 1)
    maybe_fire(dead.bid, 0, 0, 0)
    assert fired(dead) == ["complete"]


def test_pro_243_a_death_marks_claims_once_and_cascades_to_every_ancestor(redis_db, work):
    """PRO-243: a job's death marks its batch dead (``death``, ``death_at``, the
    ``dead-batches`` set), claims the death once (its ``:death`` callbacks run once
    however often it is fired) and fires death up the chain: parent and grandparent,
    each once."""
    from wurk_django.batch.fire import fire_death

    root = _new("r")
    with root.jobs():
        middle = _new("m")
        with middle.jobs():
            leaf = _new("l")
            with leaf.jobs():
                AlwaysFails.perform_async("a")
    work()
    work()  # the callbacks
    deaths = sorted(c for c in callbacks(redis_db) if c.startswith("death:"))
    assert deaths == sorted(f"death:{b.bid}:{t}" for b, t in ((root, "r"), (middle, "m"), (leaf, "l")))
    for batch in (root, middle, leaf):
        assert redis_db.hget(keys.batch(batch.bid), "death") == b"1"
        assert redis_db.hget(keys.batch(batch.bid), "death_at")
        assert redis_db.zscore("dead-batches", batch.bid) is not None
    redis_db.hdel(keys.batch(leaf.bid), "death")
    redis_db.zrem("dead-batches", leaf.bid)
    fire_death(leaf.bid)  # again: the mark is applied again, the callbacks are not
    work()
    assert redis_db.hget(keys.batch(leaf.bid), "death") == b"1" and redis_db.zscore("dead-batches", leaf.bid)
    assert sorted(c for c in callbacks(redis_db) if c.startswith("death:")) == deaths


def test_a_batch_opened_in_a_plain_job_names_its_hold_after_that_job(redis_db, work):  # issue 48
    # The batch middleware runs for batch jobs only; the hold of a block opened inside any
    # other job still carries that job's jid (read from its context), so a re-run after a
    # crash takes the same hold instead of leaving a second one open.
    jid = OpensBatch.perform_async()
    work()  # the job, then the child it pushed
    members = [m.decode() for m in redis_db.lrange("test:members", 0, -1)]
    assert members == [f"hold:{jid}"]  # the block's pushes are written when it ends
