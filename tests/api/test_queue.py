"""Queue: listing, size, latency, paging, lookups, exact-bytes delete, clear (CORE-163, CORE-004, CORE-040)."""

from __future__ import annotations

import time

from tests import fixtures
from tests.api.helpers import jid_of, job, raw
from wurk_django.api import JobRecord, Queue


def push(redis_db, *items: dict, queue: str = "default") -> list[bytes]:
    values = [raw(i) for i in items]
    redis_db.sadd("queues", queue)
    for value in values:
        redis_db.lpush(f"queue:{queue}", value)
    return values


def test_all_is_sorted_by_name_and_size_is_llen(redis_db):
    redis_db.sadd("queues", "mailers", "critical", "default")
    push(redis_db, job("a"), job("b"), queue="mailers")
    assert [q.name for q in Queue.all()] == ["critical", "default", "mailers"]
    assert Queue("mailers").size == 2
    assert len(Queue("critical")) == 0
    assert Queue().name == "default"


def test_latency_of_int_ms_enqueued_at(redis_db):
    # CORE-163 / CORE-040: Sidekiq 8 writes int epoch ms; latency is the oldest job's (index -1).
    push(redis_db, job("old", enqueued_at=int((time.time() - 60) * 1000)),
         job("new", enqueued_at=int((time.time() - 5) * 1000)))
    assert 59.5 < Queue("default").latency < 61


def test_latency_of_float_seconds_enqueued_at(redis_db):
    # CORE-040: Sidekiq <= 7 wrote float seconds.
    push(redis_db, job("old", enqueued_at=time.time() - 120.0))
    assert 119.5 < Queue("default").latency < 121


def test_latency_of_empty_or_garbage_queue_is_zero(redis_db):
    assert Queue("default").latency == 0.0
    redis_db.lpush("queue:default", b"garbage")
    assert Queue("default").latency == 0.0


def test_iteration_is_newest_first_across_pages(redis_db):
    # CORE-163: LRANGE 50 per page from the newest (left) end; 120 jobs = 3 pages.
    jids = [f"j{i:03}" for i in range(120)]
    push(redis_db, *(job(j) for j in jids))
    seen = [record.jid for record in Queue("default")]
    assert seen == list(reversed(jids))
    assert all(isinstance(r, JobRecord) and r.queue == "default" for r in Queue("default"))


def test_deleting_while_iterating_skips_nothing(redis_db):
    # CORE-163: iteration compensates for concurrent removals.
    jids = [f"j{i:03}" for i in range(130)]
    push(redis_db, *(job(j) for j in jids))
    seen = []
    for record in Queue("default"):
        seen.append(record.jid)
        assert record.delete()
    assert seen == list(reversed(jids))
    assert redis_db.llen("queue:default") == 0


def test_pushes_during_iteration_do_not_repeat_jobs(redis_db):
    push(redis_db, *(job(f"j{i:03}") for i in range(100)))
    seen = []
    for i, record in enumerate(Queue("default")):
        seen.append(record.jid)
        if i == 10:
            push(redis_db, *(job(f"new{k}") for k in range(7)))
    assert len(seen) == len(set(seen)) == 100


def test_find_job_by_jid(redis_db):
    push(redis_db, *(job(f"j{i:03}") for i in range(70)))
    found = Queue("default").find_job("j003")
    assert found is not None and found.jid == "j003" and found.args == ["j003"]
    assert Queue("default").find_job("j0") is None  # a substring is not a jid


def test_delete_job_uses_exact_bytes(redis_db):
    # CORE-004: two entries for the same jid that differ only in byte layout; only the
    # one whose exact bytes are given goes.
    compact = b'{"class":"HardJob","args":[1],"jid":"same","queue":"default"}'
    spaced = b'{"class": "HardJob", "args": [1], "jid": "same", "queue": "default"}'
    redis_db.lpush("queue:default", compact, spaced)
    queue = Queue("default")
    assert queue.delete_job(spaced) is True
    assert redis_db.lrange("queue:default", 0, -1) == [compact]
    assert queue.delete_job(spaced) is False
    # A record read back keeps the stored bytes, not a re-serialization.
    record = queue.find_job("same")
    assert record.value == compact
    assert record.delete() is True
    assert redis_db.llen("queue:default") == 0


def test_ruby_payload_in_a_queue_is_readable(redis_db):
    redis_db.sadd("queues", "default")
    redis_db.lpush("queue:default", fixtures.raw("sidekiq7_perform_async"))
    record = next(iter(Queue("default")))
    assert record.value == fixtures.raw("sidekiq7_perform_async")
    assert record.jid == fixtures.JID and record.klass == "HardJob"
    assert Queue("default").latency > 0


def test_clear_unlinks_the_list_and_forgets_the_queue(redis_db):
    # CORE-163: MULTI UNLINK queue:<n>; SREM queues <n>.
    push(redis_db, job("a"), job("b"), queue="low")
    push(redis_db, job("c"), queue="other")
    assert Queue("low").clear() is True
    assert redis_db.exists("queue:low") == 0
    assert redis_db.smembers("queues") == {b"other"}
    assert redis_db.llen("queue:other") == 1


def test_paused_reads_the_paused_set(redis_db):
    # CORE-062 / CORE-256: core only reads the Pro/wurk ``paused`` set.
    assert Queue("default").paused is False
    redis_db.sadd("paused", "default")
    assert Queue("default").paused is True
    assert Queue("other").paused is False


def test_explicit_client_is_used(redis_db):
    push(redis_db, job("x"))
    queue = Queue("default", redis=redis_db)
    assert queue.size == 1
    assert jid_of(next(iter(queue)).value) == "x"
