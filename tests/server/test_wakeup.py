"""Wake-ups for fetchers that serve several queues (issue 19, goal 1; PRO-121, RUN-130).

No blocking move takes from more than one list, so an idle fetcher serving
several queues blocks on the queues' wake-up lists, which the Writer feeds in
the same round trip as every push. These tests check the signal, and that
nothing depends on it: a lost wake-up or a push that sends none (a Ruby
client's) is still found by polling, and a worker killed with kill -9 loses
nothing. No assertion here is about how fast anything is.

The tokens are what a fetcher serving several queues waits on when Redis's push
notifications are off (``FETCH_NOTIFICATIONS = False``, or a Redis that refuses
``CLIENT TRACKING``), so these fetchers switch them off; tests/server/fetch/test_push_watch.py
covers the notifications.
"""

from __future__ import annotations

import json
import threading

import pytest

from tests.support import wait_for
from wurk_django import keys, payload, wake_demand
from wurk_django.client import operations
from wurk_django.client.push import Client
from wurk_django.conf import Config
from wurk_django.server.fetch.reliable import ReliableFetch
from wurk_django.server.reaper import Reaper


def _raw(jid: str, queue: str) -> bytes:
    """A job as a Ruby Sidekiq client writes it: a bare LPUSH, no wake-up."""
    return payload.dumps({"retry": True, "queue": queue, "class": "tests.jobsapp.jobs.RecordJob",
                          "args": [jid], "jid": jid, "created_at": 1, "enqueued_at": 1})


def _fetcher(poll: float, queues=("a", "b", "c")) -> ReliableFetch:
    return ReliableFetch(Config(QUEUES=list(queues), FETCH_POLL_INTERVAL=poll, FETCH_NOTIFICATIONS=False))


def _blocked_on(redis_db, command: str) -> int:
    """Clients of the test database blocked in ``command`` right now."""
    db = redis_db.connection_pool.connection_kwargs.get("db", 0)
    return sum(1 for c in redis_db.client_list() if c.get("cmd") == command and int(c.get("db", -1)) == int(db))


def _fetch_in_thread(fetcher: ReliableFetch, attempts: list[int]) -> tuple[threading.Thread, list]:
    got: list = []

    def run() -> None:
        while not got and len(attempts) < 50:
            attempts.append(1)
            unit = fetcher.retrieve_work()
            if unit is not None:
                got.append(unit)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_push_leaves_one_token_per_job_on_its_queues_wake_list(redis_db):
    redis_db.set(keys.WAKE_WANTED, "1", ex=60)  # a fetcher in the polling fallback runs (wake_demand.py)
    client = Client()
    client.push({"class": "X", "args": [], "queue": "c"})
    client.push_bulk({"class": "X", "args": [[i] for i in range(100)], "queue": "b"})
    assert redis_db.llen(keys.wake("c")) == 1
    # Bounded: a bulk push wakes at most WAKE_TOKENS_MAX fetchers, and the list expires.
    assert redis_db.llen(keys.wake("b")) == keys.WAKE_TOKENS_MAX
    assert 0 < redis_db.ttl(keys.wake("b")) <= keys.WAKE_TTL
    client.push({"class": "X", "args": [], "queue": "later", "at": 9_999_999_999})
    assert not redis_db.exists(keys.wake("later"))  # scheduled jobs wake the scheduler instead


def test_an_idle_fetcher_on_several_queues_waits_on_their_wake_lists_and_is_woken(redis_db, monkeypatch):
    # A poll interval no test waits for: only the wake-up can end this wait early. No
    # short waits at the start either (tests/server/test_wake_demand.py has those): this
    # pusher knows nothing yet, so it writes the token.
    monkeypatch.setattr(wake_demand, "WINDOW", 0.0)
    fetcher = _fetcher(poll=60)
    attempts: list[int] = []
    thread, got = _fetch_in_thread(fetcher, attempts)
    try:
        wait_for(lambda: _blocked_on(redis_db, "blpop") == 1, message="the fetcher to block on the wake lists")
        assert _blocked_on(redis_db, "blmove") == 0
        jid = Client().push({"class": "tests.jobsapp.jobs.RecordJob", "args": [1], "queue": "c"})
        thread.join(30)
        assert got and got[0].queue == "c" and json.loads(got[0].job)["jid"] == jid
        assert redis_db.lrange(got[0].private, 0, -1) == [got[0].job]  # reliable: in the private list
        assert len(attempts) == 2  # blocked once, woken, found it on the next walk
    finally:
        fetcher.terminate()
        thread.join(5)


def test_strict_order_is_kept_when_woken(redis_db):
    fetcher = _fetcher(poll=60)
    redis_db.lpush("queue:c", _raw("c" * 24, "c"))
    redis_db.lpush("queue:a", _raw("a" * 24, "a"))
    redis_db.lpush(keys.wake("c"), "1")
    assert fetcher.retrieve_work().queue == "a"
    assert fetcher.retrieve_work().queue == "c"


def test_a_lost_wake_up_is_made_up_for_by_polling(redis_db, monkeypatch):
    """The signal is sent but never arrives (here: the writer's wake-up commands are dropped):
    the fetcher finds the job at its next walk, one poll interval later."""
    monkeypatch.setattr(operations, "wake_commands", lambda woken, earliest, db=0: [])
    fetcher = _fetcher(poll=1)
    attempts: list[int] = []
    thread, got = _fetch_in_thread(fetcher, attempts)
    try:
        wait_for(lambda: _blocked_on(redis_db, "blpop") == 1, message="the fetcher to block on the wake lists")
        Client().push({"class": "tests.jobsapp.jobs.RecordJob", "args": [1], "queue": "b"})
        assert not redis_db.exists(keys.wake("b"))
        thread.join(30)
        assert got and got[0].queue == "b"
    finally:
        fetcher.terminate()
        thread.join(5)


def test_a_ruby_style_push_without_a_wake_up_is_picked_up_by_polling(redis_db):
    fetcher = _fetcher(poll=1)
    attempts: list[int] = []
    thread, got = _fetch_in_thread(fetcher, attempts)
    try:
        wait_for(lambda: _blocked_on(redis_db, "blpop") == 1, message="the fetcher to block on the wake lists")
        redis_db.lpush("queue:c", _raw("r" * 24, "c"))  # what Sidekiq's client sends: no token
        thread.join(30)
        assert got and got[0].queue == "c" and got[0].job == _raw("r" * 24, "c")
        assert len(attempts) >= 2  # found by a walk after the blocking wait timed out
    finally:
        fetcher.terminate()
        thread.join(5)


def test_one_queue_blocks_on_the_queue_itself(redis_db):
    """With a single queue the blocking move waits on the queue: a Ruby push is taken at once."""
    fetcher = _fetcher(poll=60, queues=("solo",))
    attempts: list[int] = []
    thread, got = _fetch_in_thread(fetcher, attempts)
    try:
        wait_for(lambda: _blocked_on(redis_db, "blmove") == 1, message="the fetcher to block on queue:solo")
        redis_db.lpush("queue:solo", _raw("s" * 24, "solo"))
        thread.join(30)
        assert got and got[0].queue == "solo" and len(attempts) == 1
    finally:
        fetcher.terminate()
        thread.join(5)


def test_a_stale_token_costs_one_empty_walk(redis_db):
    fetcher = _fetcher(poll=60)
    redis_db.lpush(keys.wake("b"), "1")  # left by a push whose job another worker took
    assert fetcher.retrieve_work() is None  # woken at once, nothing there
    assert not redis_db.exists(keys.wake("b"))


@pytest.mark.slow
def test_kill_9_while_holding_fetched_jobs_loses_nothing(redis_db, worker_factory):
    """A worker serving several queues, woken by pushes, is killed with every thread holding a
    job: the jobs sit in its private lists, and the reaper puts all of them back."""
    from tests.jobsapp.jobs import SlowJob

    extra = {"FETCH_POLL_INTERVAL": 30, "FETCH_NOTIFICATIONS": False}
    worker = worker_factory("-c", "3", "-q", "a", "-q", "b", "-q", "c",
                            env={"WURK_TEST_EXTRA": json.dumps(extra)})
    wait_for(lambda: _blocked_on(redis_db, "blpop") == 3, timeout=30, message="3 idle fetchers on the wake lists")
    client = Client()
    jids = {client.push({"class": SlowJob, "args": [60, f"m{i}"], "queue": q}) for i, q in enumerate("abc")}
    wait_for(lambda: redis_db.llen("test:started") == 3, timeout=30, message="all three jobs to start")
    worker.kill()
    held = [k for k in redis_db.scan_iter(match=f"queue:*|*|{worker.pid}|*")]
    held_jids = {json.loads(raw)["jid"] for k in held for raw in redis_db.lrange(k, 0, -1)}
    assert held_jids == jids  # none in memory only
    # Its heartbeat would expire within a minute; expire it now.
    for identity in redis_db.smembers("processes"):
        if f":{worker.pid}:" in identity.decode():
            redis_db.delete(identity)
    moved = Reaper(["a", "b", "c"], grace=0).boot_sweep()
    assert moved == 3
    back = {json.loads(raw)["jid"] for q in "abc" for raw in redis_db.lrange(f"queue:{q}", 0, -1)}
    assert back == jids


@pytest.mark.slow
def test_kill_9_mid_drain_with_jobs_fetched_ahead_loses_nothing(redis_db, worker_factory):
    """Short jobs on a deep queue: threads fetch several per round trip. Killed mid-drain,
    every job is done, still queued, or in the dead worker's private lists, which the
    reaper moves back."""
    from tests.jobsapp.jobs import RecordJob

    jids = RecordJob.perform_bulk([[i] for i in range(3000)])
    assert len(jids) == 3000
    worker = worker_factory("-c", "3")
    wait_for(lambda: redis_db.llen("test:ran") >= 300, timeout=60, message="the worker to make progress")
    worker.kill()
    ran = {raw.decode() for raw in redis_db.lrange("test:ran", 0, -1)}
    held = {json.loads(raw)["args"][0] for k in redis_db.scan_iter(match=f"queue:default|*|{worker.pid}|*")
            for raw in redis_db.lrange(k, 0, -1)}
    queued = {json.loads(raw)["args"][0] for raw in redis_db.lrange("queue:default", 0, -1)}
    assert {str(i) for i in range(3000)} <= ran | {str(i) for i in held | queued}  # nothing lost
    for identity in redis_db.smembers("processes"):
        if f":{worker.pid}:" in identity.decode():
            redis_db.delete(identity)
    assert Reaper(["default"], grace=0).boot_sweep() == len(held)
    back = {json.loads(raw)["args"][0] for raw in redis_db.lrange("queue:default", 0, -1)}
    assert back == held | queued


def test_the_other_queues_are_tried_in_one_round_trip_in_order(redis_db, monkeypatch):
    """After the first queue misses, the rest are tried by one script call, in the fetcher's
    order, each hit moved into that queue's private list (PRO-122)."""
    from wurk_django.server.fetch import reliable as reliable_fetch

    calls = []
    real = reliable_fetch.FETCH_FIRST

    class Counting:
        def __call__(self, client, keys=(), args=()):
            calls.append(list(keys))
            return real(client, keys=keys, args=args)

    monkeypatch.setattr(reliable_fetch, "FETCH_FIRST", Counting())
    fetcher = _fetcher(poll=60)
    redis_db.lpush("queue:c", _raw("c" * 24, "c"))
    redis_db.lpush("queue:b", _raw("b" * 24, "b"))
    first = fetcher.retrieve_work()
    assert first.queue == "b" and redis_db.lrange(first.private, 0, -1) == [first.job]
    second = fetcher.retrieve_work()
    assert second.queue == "c" and redis_db.lrange(second.private, 0, -1) == [second.job]
    assert [keys[0::2] for keys in calls] == [["queue:b", "queue:c"], ["queue:b", "queue:c"]]
    assert redis_db.llen("queue:b") == redis_db.llen("queue:c") == 0
