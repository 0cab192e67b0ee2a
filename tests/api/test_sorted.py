"""Scheduled/Retry/Dead sets and their entries (CORE-165, CORE-166, CORE-141, CORE-128, CORE-140)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import orjson
import pytest

from tests import fixtures
from tests.api.helpers import job, raw, wurk
from wurk_django import payload
from wurk_django.api import DeadSet, RetrySet, ScheduledSet, SortedEntry

CALLS: list[tuple[dict, BaseException]] = []


def record_death(job: dict, exc: BaseException) -> None:
    CALLS.append((job, exc))


class StampMiddleware:
    """Client middleware that marks every push it sees (CORE-082)."""

    def __call__(self, job_class, job, queue, redis, call_next):
        job["stamped"] = job.get("stamped", 0) + 1
        return call_next()


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def zadd(redis_db, key: str, item: dict | bytes, score: float) -> bytes:
    value = item if isinstance(item, bytes) else raw(item)
    redis_db.zadd(key, {value: score})
    return value


def queued(redis_db, queue: str = "default") -> list[dict]:
    return [orjson.loads(v) for v in redis_db.lrange(f"queue:{queue}", 0, -1)]


# -- entries ---------------------------------------------------------------------


def test_entry_score_at_id_and_error(redis_db):
    # CORE-165: score (float), at (UTC), id "<score>|<jid>", error = has error_class.
    zadd(redis_db, "retry", fixtures.raw("sidekiq8_retry_first"), 1_700_000_100.25)
    entry = next(iter(RetrySet()))
    assert isinstance(entry, SortedEntry)
    assert entry.score == 1_700_000_100.25
    assert entry.at == datetime.fromtimestamp(1_700_000_100.25, tz=UTC)
    assert entry.id == f"1700000100.25|{fixtures.JID}"
    assert entry.key == f"1700000100.25-{fixtures.JID}"  # CORE-182 URL form
    assert entry.error is True
    assert entry.value == fixtures.raw("sidekiq8_retry_first")
    assert entry.queue == "default"
    zadd(redis_db, "schedule", fixtures.raw("sidekiq8_schedule_member"), fixtures.AT)
    assert next(iter(ScheduledSet())).error is False


def test_iteration_is_highest_score_first_across_pages(redis_db):
    # CORE-166: highest score first, 50 per page; 125 entries = 3 pages.
    for i in range(125):
        zadd(redis_db, "retry", job(f"j{i:03}"), 1000 + i)
    seen = [e.jid for e in RetrySet()]
    assert seen == [f"j{i:03}" for i in reversed(range(125))]


def test_deleting_while_iterating_skips_nothing(redis_db):
    for i in range(120):
        zadd(redis_db, "dead", job(f"j{i:03}"), 1000 + i)
    seen = []
    for entry in DeadSet():
        seen.append(entry.jid)
        assert entry.delete() is True
    assert seen == [f"j{i:03}" for i in reversed(range(120))]
    assert redis_db.zcard("dead") == 0


def test_size_clear_and_schedule(redis_db):
    scheduled = ScheduledSet()
    scheduled.schedule(1_700_000_000.5, job("a"))
    scheduled.schedule(datetime(2030, 1, 1, tzinfo=UTC), job("b"))
    assert scheduled.size == 2 == len(scheduled)
    assert redis_db.zrange("schedule", 0, 0, withscores=True)[0][1] == 1_700_000_000.5
    assert [e.jid for e in scheduled] == ["b", "a"]
    assert scheduled.fetch(datetime(2030, 1, 1, tzinfo=UTC))[0].jid == "b"
    assert scheduled.clear() is True
    assert redis_db.exists("schedule") == 0


def test_fetch_by_score_range_and_jid(redis_db):
    # CORE-166 / CORE-182: ZRANGE BYSCORE WITHSCORES, optionally filtered by jid.
    zadd(redis_db, "retry", job("a"), 100.5)
    zadd(redis_db, "retry", job("b"), 100.5)
    zadd(redis_db, "retry", job("c"), 200.0)
    assert sorted(e.jid for e in RetrySet().fetch(100.5)) == ["a", "b"]
    assert [e.jid for e in RetrySet().fetch(100.5, "b")] == ["b"]
    assert RetrySet().fetch(100.5, "c") == []
    assert sorted(e.jid for e in RetrySet().fetch((100, 300))) == ["a", "b", "c"]
    assert all(e.score in (100.5, 200.0) for e in RetrySet().fetch((0, 1000)))


def test_find_job_and_scan(redis_db):
    # CORE-166: find_job = ZSCAN MATCH *jid* + exact jid compare; scan wraps in * unless given.
    zadd(redis_db, "dead", job("abc123", klass="Alpha"), 1.0)
    zadd(redis_db, "dead", job("abc1234", klass="Beta"), 2.0)
    zadd(redis_db, "dead", b"not json at all", 3.0)
    assert DeadSet().find_job("abc123").klass == "Alpha"
    assert DeadSet().find_job("abc12") is None
    assert sorted(e.klass for e in DeadSet().scan("abc1")) == ["Alpha", "Beta"]
    assert [e.klass for e in DeadSet().scan('*"class":"Beta"*')] == ["Beta"]
    assert [e.args for e in DeadSet().scan("json at")] == [["not json at all"]]


# -- movers ----------------------------------------------------------------------


def test_retry_decrements_retry_count_and_pushes_through_the_client(redis_db):
    # CORE-165 / CORE-128 / CORE-130: retry count lowered, new enqueued_at, same jid/created_at,
    # unknown keys kept, entry removed.
    item = fixtures.load("sidekiq8_retry_second")
    item.update(fixtures.load("sidekiq8_unknown_keys"))
    item.update(retry_count=4)
    zadd(redis_db, "retry", item, 1_700_000_500.0)
    entry = RetrySet().find_job(fixtures.JID)
    before = payload.now_ms()
    assert entry.retry() is True
    assert redis_db.zcard("retry") == 0
    assert redis_db.smembers("queues") == {b"default"}
    [pushed] = queued(redis_db)
    assert pushed["retry_count"] == 3
    assert pushed["jid"] == fixtures.JID
    assert pushed["created_at"] == fixtures.NOW_MS
    assert pushed["enqueued_at"] >= before
    assert pushed["cattr"] == {"tenant_id": 7} and pushed["custom"] == {"nested": [1, 2.5, None, True]}
    assert pushed["error_class"] == "NoMethodError"
    # CORE-165: the entry is gone, so a second retry does nothing.
    assert entry.retry() is False
    assert len(queued(redis_db)) == 1


def test_retry_of_first_failure_goes_to_minus_one(redis_db):
    # CORE-128 with Ruby semantics: retry_count 0 is present, so it becomes -1 (next failure makes it 0).
    zadd(redis_db, "retry", fixtures.raw("sidekiq8_retry_first"), 10.0)
    assert next(iter(RetrySet())).retry() is True
    assert queued(redis_db)[0]["retry_count"] == -1


def test_add_to_queue_keeps_retry_count_and_drops_a_stray_at(redis_db):
    # CORE-128: add_to_queue pushes unchanged; CORE-018: a stray ``at`` must not reschedule it.
    item = job("sched", queue="critical", retry_count=2, at=1.0)
    zadd(redis_db, "schedule", item, 50.0)
    assert next(iter(ScheduledSet())).add_to_queue() is True
    [pushed] = queued(redis_db, "critical")
    assert pushed["retry_count"] == 2
    assert "at" not in pushed
    assert redis_db.zcard("schedule") == 0


def test_movers_run_client_middleware(redis_db):
    # CORE-082: UI/API re-pushes go through the client middleware.
    zadd(redis_db, "retry", job("mw"), 10.0)
    with wurk(client_middleware=[StampMiddleware]):
        assert next(iter(RetrySet())).retry() is True
    assert queued(redis_db)[0]["stamped"] == 1


def test_concurrent_double_retry_pushes_once(redis_db):
    # CORE-165: two clicks on the same entry race; the atomic take lets only one push.
    value = zadd(redis_db, "retry", job("race", retry_count=5), 777.0)
    sibling = zadd(redis_db, "retry", job("sibling"), 777.0)  # same score, must survive
    entries = [SortedEntry(RetrySet(), 777.0, value) for _ in range(8)]
    barrier = threading.Barrier(len(entries))
    results: list[bool] = []

    def click(entry: SortedEntry) -> None:
        barrier.wait()
        results.append(entry.retry())

    threads = [threading.Thread(target=click, args=(e,)) for e in entries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [False] * 7 + [True]
    assert [j["jid"] for j in queued(redis_db)] == ["race"]
    assert queued(redis_db)[0]["retry_count"] == 4
    assert redis_db.zrange("retry", 0, -1, withscores=True) == [(sibling, 777.0)]


def test_take_picks_the_right_member_among_equal_scores(redis_db):
    # CORE-165: members sharing the score go back at the same score; only ours moves.
    a = zadd(redis_db, "schedule", job("a"), 5.5)
    zadd(redis_db, "schedule", job("b"), 5.5)
    c = zadd(redis_db, "schedule", job("c"), 5.5)
    entry = [e for e in ScheduledSet() if e.jid == "b"][0]
    assert entry.add_to_queue() is True
    assert [j["jid"] for j in queued(redis_db)] == ["b"]
    assert sorted(redis_db.zrange("schedule", 0, -1, withscores=True)) == sorted([(a, 5.5), (c, 5.5)])


def test_mover_holding_stale_bytes_does_nothing(redis_db):
    # CORE-165: the entry we read is gone (here: replaced by another copy of the same jid at the
    # same score); an entry read from Redis only ever moves its own bytes.
    stale = raw(job("same", note=1))
    fresh = zadd(redis_db, "retry", job("same", note=2), 4.0)
    entry = SortedEntry(RetrySet(), 4.0, stale)
    assert entry.retry() is False
    assert redis_db.zrange("retry", 0, -1, withscores=True) == [(fresh, 4.0)]
    assert redis_db.llen("queue:default") == 0


def test_entry_built_from_a_dict_is_found_by_jid(redis_db):
    # CORE-165: delete() falls back to score + jid when we do not hold the stored bytes.
    stored = b'{"class": "HardJob", "args": [], "jid": "loose", "queue": "default"}'
    redis_db.zadd("retry", {stored: 9.0})
    entry = SortedEntry(RetrySet(), 9.0, {"class": "HardJob", "args": [], "jid": "loose", "queue": "default"})
    assert entry.delete() is True
    assert redis_db.zcard("retry") == 0
    redis_db.zadd("retry", {stored: 9.0})
    assert entry.retry() is True
    assert [j["jid"] for j in queued(redis_db)] == ["loose"]
    assert redis_db.zcard("retry") == 0


def test_delete_uses_exact_bytes_and_is_idempotent(redis_db):
    # CORE-004 / CORE-165.
    value = zadd(redis_db, "dead", job("gone"), 3.0)
    other = zadd(redis_db, "dead", job("stays"), 3.0)
    entry = DeadSet().find_job("gone")
    assert entry.delete() is True
    assert entry.delete() is False
    assert redis_db.zrange("dead", 0, -1) == [other]
    assert DeadSet().delete_by_value(value) is False
    assert DeadSet().delete_by_jid(3.0, "stays") is True
    assert redis_db.zcard("dead") == 0


def test_reschedule_moves_by_the_difference(redis_db):
    # CORE-165: ZINCRBY by ts - score on the stored value; a vanished entry is not re-created.
    value = zadd(redis_db, "schedule", job("later"), 1000.0)
    entry = next(iter(ScheduledSet()))
    assert entry.reschedule(5000.0) is True
    assert redis_db.zscore("schedule", value) == 5000.0
    assert entry.score == 5000.0
    redis_db.zrem("schedule", value)
    assert entry.reschedule(9000.0) is False
    assert redis_db.zcard("schedule") == 0


def test_kill_moves_to_dead_trims_and_notifies(redis_db):
    # CORE-165 / CORE-141 / CORE-140: ZADD dead now, both trims, death handlers get RuntimeError.
    # CORE-054: the dead entry is the stored bytes scored at the death, and the set is trimmed on insert.
    now = time.time()
    zadd(redis_db, "dead", job("ancient"), now - 10_000)  # older than dead_timeout below
    for i in range(4):
        zadd(redis_db, "dead", job(f"d{i}"), now - 100 + i)
    value = zadd(redis_db, "retry", job("victim"), 42.0)
    with wurk(dead_max_jobs=3, dead_timeout_in_seconds=3600, death_handlers=[record_death]):
        entry = next(iter(RetrySet()))
        assert entry.kill() is True
        assert entry.kill() is False  # already gone: nothing more happens
    assert redis_db.zcard("retry") == 0
    # The rank trim 0..-3 keeps max_jobs - 1 = 2 entries: the newest.
    members = redis_db.zrange("dead", 0, -1, withscores=True)
    assert len(members) == 2
    assert orjson.loads(members[0][0])["jid"] == "d3"
    assert members[1][0] == value  # the exact bytes moved, not a re-serialization (CORE-004)
    assert members[1][1] >= now
    assert len(CALLS) == 1
    dead_job, exc = CALLS[0]
    assert dead_job["jid"] == "victim"
    assert isinstance(exc, RuntimeError) and str(exc) == "Job killed by API"


def test_movers_refuse_unparseable_entries_without_losing_them(redis_db):
    redis_db.zadd("dead", {b"{broken": 1.0})
    entry = next(iter(DeadSet()))
    assert entry.parse_error
    with pytest.raises(ValueError):
        entry.retry()
    assert redis_db.zrange("dead", 0, -1) == [b"{broken"]


# -- bulk ------------------------------------------------------------------------


def test_retry_all_decrements_and_pushes_every_job(redis_db):
    # CORE-166: ZPOPMIN up to the initial size, decrement retry_count, push; not transactional.
    for i in range(60):
        zadd(redis_db, "retry", job(f"r{i:02}", retry_count=i), 100 + i)
    redis_db.zadd("retry", {b"unreadable": 1.0})
    invalid = zadd(redis_db, "retry", {"class": "HardJob", "jid": "noargs"}, 2.0)  # rejected by the client
    assert RetrySet().retry_all() == 60
    pushed = queued(redis_db)
    assert len(pushed) == 60
    assert {j["jid"]: j["retry_count"] for j in pushed} == {f"r{i:02}": i - 1 for i in range(60)}
    # Oldest score first, LPUSHed: the first popped is the next to be fetched.
    assert pushed[-1]["jid"] == "r00"
    assert redis_db.zrange("retry", 0, -1) == [b"unreadable", invalid]


def test_dead_retry_all_and_scheduled_retry_all(redis_db):
    zadd(redis_db, "dead", fixtures.raw("sidekiq8_dead"), 5.0)
    zadd(redis_db, "schedule", fixtures.raw("sidekiq7_schedule_member"), 6.0)
    assert DeadSet().retry_all() == 1
    assert ScheduledSet().retry_all() == 1
    pushed = {j["jid"]: j for j in queued(redis_db)}
    assert len(queued(redis_db)) == 2
    assert pushed[fixtures.JID]["created_at"] in (fixtures.NOW_MS, 1700000000.1234567)
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("schedule") == 0


def test_kill_all_moves_untrimmed_then_trims_once_without_notifying(redis_db):
    # CORE-166: kill each with trim=False, trim once at the end; notify_failure defaults to False.
    for i in range(5):
        zadd(redis_db, "retry", job(f"k{i}"), 10 + i)
    with wurk(dead_max_jobs=4, death_handlers=[record_death]):
        assert RetrySet().kill_all() == 5
    assert redis_db.zcard("retry") == 0
    assert redis_db.zcard("dead") == 3  # 0..-4 rank trim keeps max_jobs - 1
    assert CALLS == []


def test_kill_all_can_notify(redis_db):
    zadd(redis_db, "schedule", job("n1"), 1.0)
    zadd(redis_db, "schedule", job("n2"), 2.0)
    boom = ValueError("cleanup")
    with wurk(death_handlers=[record_death]):
        assert ScheduledSet().kill_all(notify_failure=True, ex=boom) == 2
    assert [c[0]["jid"] for c in CALLS] == ["n1", "n2"]
    assert all(c[1] is boom for c in CALLS)
    assert redis_db.zcard("dead") == 2


def test_dead_set_kill_and_trim(redis_db):
    # CORE-141: kill(raw, notify_failure=True, trim=True, ex=None).
    now = time.time()
    for i in range(5):
        zadd(redis_db, "dead", job(f"old{i}"), now - 50 + i)
    zadd(redis_db, "dead", job("expired"), now - 7200)
    with wurk(dead_max_jobs=3, dead_timeout_in_seconds=3600, death_handlers=[record_death]):
        dead = DeadSet()
        assert dead.kill(raw(job("untrimmed")), notify_failure=False, trim=False) is True
        assert redis_db.zcard("dead") == 7
        assert CALLS == []
        dead.trim()
        assert redis_db.zcard("dead") == 2
        assert [orjson.loads(m)["jid"] for m in redis_db.zrange("dead", 0, -1)] == ["old4", "untrimmed"]
        dead.kill(b"raw garbage")
    # Unparseable data still reaches the handlers, as {"args": [raw]}.
    assert CALLS[0][0] == {"args": ["raw garbage"]}
    assert redis_db.zcard("dead") == 2
