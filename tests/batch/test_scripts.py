"""The batch scripts one by one, on a real Redis (PRO-270..280): what each writes and
returns, including the cases a whole batch's run rarely reaches (a morgue retry, a
missing hash, a sibling finishing at the same time); and where the open batch is kept."""

from __future__ import annotations

from wurk_django import payload
from wurk_django.batch import scripts

BID = "b1"


def _run(redis, script, command):
    """Run an ``EVALSHA`` command tuple (as a round trip would send it) now."""
    count = command[2]
    return script(redis, list(command[3:3 + count]), list(command[3 + count:]))


def _raw(jid: str) -> bytes:
    return payload.dumps({"class": "X", "args": [], "jid": jid, "queue": "default", "bid": BID})


def _hash(redis_db, bid: str = BID) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in redis_db.hgetall(f"b-{bid}").items()}


def test_push_counts_a_jid_once_and_a_morgue_retry_not_at_all(redis_db):
    """PRO-270: a new jid is added to ``-jids`` with ``total`` and ``pending`` +1; the same jid
    pushed again is not counted again; a jid back from ``-died`` becomes live without a
    recount and, the last dead one back, the batch loses ``death`` and its ``dead-batches``
    entry. Both keys get the expiry only if they had none; the job lands on its queue."""
    redis_db.hset(f"b-{BID}", mapping={"total": 0, "pending": 0})
    _run(redis_db, scripts.PUSH, scripts.push_command(BID, "default", "j1", _raw("j1")))
    _run(redis_db, scripts.PUSH, scripts.push_command(BID, "default", "j1", _raw("j1")))
    assert (_hash(redis_db)["total"], _hash(redis_db)["pending"]) == ("1", "1")
    assert redis_db.smembers(f"b-{BID}-jids") == {b"j1"}
    assert redis_db.lrange("queue:default", 0, -1) == [_raw("j1")] * 2 and redis_db.sismember("queues", "default")
    assert 0 < redis_db.ttl(f"b-{BID}") <= scripts.DEFAULT_EXPIRY
    redis_db.expire(f"b-{BID}", 500)
    redis_db.srem(f"b-{BID}-jids", "j1")
    redis_db.sadd(f"b-{BID}-died", "j1")
    redis_db.hset(f"b-{BID}", "death", "1")
    redis_db.zadd("dead-batches", {BID: 1})
    _run(redis_db, scripts.PUSH, scripts.push_command(BID, "default", "j1", _raw("j1")))
    fields = _hash(redis_db)
    assert (fields["total"], fields["pending"], "death" in fields) == ("1", "1", False)
    assert redis_db.smembers(f"b-{BID}-jids") == {b"j1"} and redis_db.zcard("dead-batches") == 0
    assert redis_db.ttl(f"b-{BID}") <= 500  # EXPIRE NX: a live batch's clock is not extended


def test_schedule_counts_a_new_jid_and_adds_it_to_the_schedule(redis_db):
    """PRO-271: SADD-guarded ``total``/``pending`` +1, both keys' expiry NX, the payload in
    ``schedule`` at its score."""
    command = scripts.schedule_command(BID, 1_700_000_000.5, "j1", _raw("j1"))
    assert _run(redis_db, scripts.SCHEDULE, command) == 1
    _run(redis_db, scripts.SCHEDULE, command)
    assert (_hash(redis_db)["total"], _hash(redis_db)["pending"]) == ("1", "1")
    assert redis_db.zrange("schedule", 0, -1, withscores=True) == [(_raw("j1"), 1_700_000_000.5)]
    assert redis_db.ttl(f"b-{BID}-jids") > 0


def test_ack_success_takes_a_failure_back_and_decrements_pending_once(redis_db):
    """PRO-273: a missing hash only takes the jid out (``[removed, 0, -1, -1]``); a jid in
    ``-failed`` gives back its failure; ``pending`` goes down once per jid; the reply is
    ``[removed, pending, live, pending kids]``."""
    redis_db.sadd(f"b-{BID}-jids", "j1")
    assert scripts.ack_success(redis_db, BID, "j1") == [1, 0, -1, -1]
    redis_db.hset(f"b-{BID}", mapping={"total": 2, "pending": 2, "failures": 1})
    redis_db.sadd(f"b-{BID}-jids", "j1", "j2")
    redis_db.sadd(f"b-{BID}-failed", "j1")
    redis_db.sadd(f"b-{BID}-pkids", "kid")
    assert scripts.ack_success(redis_db, BID, "j1") == [1, 1, 1, 1]
    assert _hash(redis_db)["failures"] == "0"
    assert scripts.ack_success(redis_db, BID, "j1") == [0, 1, 1, 1]  # twice: counted once


def test_ack_complete_records_a_death_and_says_whether_it_is_the_first(redis_db):
    """PRO-275: the jid leaves ``-jids`` (and ``-failed``, giving back its failure) for
    ``-died``; the first death of the batch says so; ``pending`` is never decremented by a
    death; the reply is ``[live, died, first death, pending kids, pending]``."""
    redis_db.hset(f"b-{BID}", mapping={"total": 2, "pending": 2, "failures": 1})
    redis_db.sadd(f"b-{BID}-jids", "j1", "j2")
    redis_db.sadd(f"b-{BID}-failed", "j1")
    assert scripts.ack_complete(redis_db, BID, "j1") == [1, 1, 1, 0, 2]
    assert scripts.ack_complete(redis_db, BID, "j2") == [0, 2, 0, 0, 2]
    assert _hash(redis_db)["failures"] == "0" and redis_db.ttl(f"b-{BID}-died") > 0


def test_kid_done_reports_the_parent_in_the_same_step(redis_db):
    """PRO-276: the child leaves the parent's ``-pkids``; ``[pending, live, pending kids]``
    of the parent, ``[0, -1, -1]`` when the parent is gone."""
    redis_db.hset("b-p", mapping={"pending": 3})
    redis_db.sadd("b-p-jids", "a", "b")
    redis_db.sadd("b-p-pkids", "k1", "k2")
    assert scripts.kid_done(redis_db, "p", "k1") == [3, 2, 1]
    assert scripts.kid_done(redis_db, "p", "k2") == [3, 2, 0]
    assert scripts.kid_done(redis_db, "gone", "k1") == [0, -1, -1]


def test_invalidate_flags_the_batch_and_keeps_its_jobs(redis_db):
    """PRO-277: 0 for a missing hash; otherwise ``invalidated`` is set and ``-jids`` is kept."""
    assert scripts.invalidate(redis_db, BID) == 0 and not redis_db.exists(f"b-{BID}")
    redis_db.hset(f"b-{BID}", "total", 1)
    redis_db.sadd(f"b-{BID}-jids", "j1")
    assert scripts.invalidate(redis_db, BID) == 1
    assert _hash(redis_db)["invalidated"] == "1" and redis_db.smembers(f"b-{BID}-jids") == {b"j1"}


def test_delete_unlinks_every_own_key_and_leaves_the_indexes_parent_and_tags(redis_db):
    """PRO-280: every own key (``b-<bid>`` and its suffixes) is unlinked; the bid leaves both
    indexes, its parent's ``-kids``/``-pkids`` and every tag set; the parent's state is
    returned, ``[0, -1, -1]`` without a parent."""
    own = ["", "-jids", "-failed", "-died", "-complete", "-success", "-death", "-notify", "-cbsucc", "-kids",
           "-pkids", "-tags"]
    for suffix in own:
        redis_db.set(f"b-{BID}{suffix}", 1) if suffix else redis_db.hset(f"b-{BID}", "total", 1)
    redis_db.zadd("batches", {BID: 1})
    redis_db.zadd("dead-batches", {BID: 1})
    redis_db.hset("b-p", "pending", 4)
    redis_db.sadd("b-p-jids", "x")
    redis_db.sadd("b-p-kids", BID, "other")
    redis_db.sadd("b-p-pkids", BID)
    redis_db.sadd("tags:red", BID, "other")
    assert scripts.delete(redis_db, BID, "p", ["red"]) == [4, 1, 0]
    assert [s for s in own if redis_db.exists(f"b-{BID}{s}")] == []
    assert redis_db.zcard("batches") == 0 and redis_db.zcard("dead-batches") == 0
    assert redis_db.smembers("b-p-kids") == {b"other"} and redis_db.scard("b-p-pkids") == 0
    assert redis_db.smembers("tags:red") == {b"other"}
    assert scripts.delete(redis_db, "lone", None, []) == [0, -1, -1]


def test_the_counters_mean_what_they_say(redis_db):
    """PRO-203: ``total`` counts distinct jobs, a hold sentinel adds to ``pending`` but not to
    ``total``, ``failures`` is a gauge that comes down when the failed job succeeds or dies,
    and a death does not decrement ``pending``."""
    _run(redis_db, scripts.HOLD, scripts.hold_command(BID, "sentinel", scripts.DEFAULT_EXPIRY))
    for jid in ("j1", "j2", "j1"):
        _run(redis_db, scripts.PUSH, scripts.push_command(BID, "default", jid, _raw(jid)))
    assert (_hash(redis_db)["total"], _hash(redis_db)["pending"]) == ("2", "3")
    for jid in ("j1", "j2"):
        assert scripts.ack_failed(redis_db, BID, jid) >= 0
    assert _hash(redis_db)["failures"] == "2" and redis_db.scard(f"b-{BID}-failed") == 2
    scripts.ack_success(redis_db, BID, "j1")
    scripts.ack_complete(redis_db, BID, "j2")
    fields = _hash(redis_db)
    assert (fields["total"], fields["pending"], fields["failures"]) == ("2", "2", "0")


def test_the_open_batch_is_per_thread_and_per_task_and_restored_on_exit(redis_db):
    """PRO-006: the batch whose ``jobs()`` block is open lives in a ``ContextVar``: another
    thread does not see it, a change made in an asyncio task stays in that task, and
    leaving a nested block restores the outer one (then none)."""
    import asyncio
    import threading

    from wurk_django.batch import Batch
    from wurk_django.batch.context import current_batch

    outer, inner = Batch(), Batch()
    seen: dict[str, object] = {}
    with outer.jobs():
        assert current_batch.get() is outer
        with inner.jobs():
            assert current_batch.get() is inner
            thread = threading.Thread(target=lambda: seen.update(thread=current_batch.get()))
            thread.start()
            thread.join(10)

            async def in_a_task():
                seen["task"] = current_batch.get()

            async def elsewhere():
                current_batch.set(None)  # a task of its own: its context is a copy
                await asyncio.create_task(in_a_task())

            asyncio.run(elsewhere())
            assert current_batch.get() is inner  # the task's change stayed in the task
        assert current_batch.get() is outer
    assert current_batch.get() is None
    assert seen == {"thread": None, "task": None}
