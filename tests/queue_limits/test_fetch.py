"""Queue limits in one process: the fetch takes a slot with the job, the settle frees it,
a full queue is skipped, and with no limits the fetch sends what it always did (issue 47 item 4)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from wurk_django import keys, payload
from wurk_django.conf import Config
from wurk_django.queue_limits import caps as queue_caps
from wurk_django.server.fetch import reliable as reliable_fetch
from wurk_django.server.fetch.reliable import ReliableFetch, private_list
from wurk_django.server.reaper import Reaper
from wurk_django.server.state import NONCE, hostname


def _job(jid: str, queue: str) -> bytes:
    return payload.dumps({"retry": True, "queue": queue, "class": "tests.jobsapp.jobs.RecordJob",
                          "args": [jid], "jid": jid, "created_at": 1, "enqueued_at": 1})


def _fetcher(**extra) -> ReliableFetch:
    return ReliableFetch(Config(QUEUES=["reports", "default"], FETCH_POLL_INTERVAL=0.2, **extra))


def _fetch_in_thread(fetcher: ReliableFetch):
    """One fetch on a thread of its own (each thread holds a fetch slot of its own, as each
    processor thread does); the unit it got, or None."""
    got = []
    thread = threading.Thread(target=lambda: got.append(fetcher.retrieve_work()))
    thread.start()
    thread.join(10)
    return got[0]


def test_a_capped_fetch_takes_a_slot_with_the_job_and_skips_a_full_queue(redis_db):
    fetcher = _fetcher(QUEUE_LIMITS={"reports": 1})
    try:
        redis_db.lpush("queue:reports", _job("r1", "reports"), _job("r2", "reports"))
        redis_db.lpush("queue:default", _job("d1", "default"))
        first = fetcher.retrieve_work()
        assert first.queue == "reports" and first.cap == first.private
        assert redis_db.hgetall(keys.queue_limit("reports")) == {first.private.encode(): b"1"}
        # The queue is full: another thread's fetch passes it by, to the next queue.
        second = _fetch_in_thread(fetcher)
        assert second.queue == "default" and second.cap is None
        assert redis_db.llen("queue:reports") == 1  # never moved, so never put back
        # Nothing else it may run: the next fetch takes nothing (and the job stays queued).
        assert _fetch_in_thread(fetcher) is None
        assert redis_db.llen("queue:reports") == 1
        queue_caps.release(first)
        assert first.cap is None and redis_db.hlen(keys.queue_limit("reports")) == 0
        queue_caps.release(first)  # once only: a second call changes nothing
        third = _fetch_in_thread(fetcher)
        assert third.queue == "reports" and third.cap is not None
        assert queue_caps.in_use(redis_db, ["reports"]) == {"reports": 1}
    finally:
        fetcher.terminate()


def test_a_job_put_back_unrun_frees_its_slot(redis_db):
    fetcher = _fetcher(QUEUE_LIMITS={"reports": 2})
    try:
        redis_db.lpush("queue:reports", _job("r1", "reports"))
        unit = fetcher.retrieve_work()
        assert queue_caps.in_use(redis_db, ["reports"]) == {"reports": 1}
        fetcher.bulk_requeue([unit])  # the hard shutdown's path
        assert redis_db.lrange("queue:reports", 0, -1) == [unit.job]
        assert queue_caps.in_use(redis_db, ["reports"]) == {"reports": 0}
    finally:
        fetcher.terminate()


def test_a_lost_reply_gives_the_job_and_its_slot_back(redis_db):
    """The reply of a capped fetch lost: the reconcile finds the job in the private list
    with nobody on it, and gives it back with its slot."""
    fetcher = _fetcher(QUEUE_LIMITS={"reports": 1})
    try:
        redis_db.lpush("queue:default", _job("d1", "default"))
        fetcher.retrieve_work().acknowledge()  # this thread holds its slot now
        private = private_list("reports")
        # As a fetch whose reply never came would have left things.
        redis_db.lpush(private, _job("r1", "reports"))
        redis_db.hset(keys.queue_limit("reports"), private, 1)
        fetcher._stale()
        unit = fetcher.retrieve_work()  # reconciles first, then fetches the job again, with a slot
        assert unit is not None and unit.queue == "reports"
        assert queue_caps.in_use(redis_db, ["reports"]) == {"reports": 1}
    finally:
        fetcher.terminate()


def test_the_slots_of_a_dead_process_are_freed_by_the_reapers_rules(redis_db):
    dead = keys.private_queue("reports", hostname(), 999_999_999, NONCE, 0)  # our nonce: judged by its pid
    mine = private_list("reports")
    redis_db.hset(keys.queue_limit("reports"), mapping={dead: 1, mine: 1, "not a private list": 1})
    freed = queue_caps.free_dead(Reaper(["reports"], grace=0), redis_db, ["reports"])
    assert freed == 2
    assert redis_db.hgetall(keys.queue_limit("reports")) == {mine.encode(): b"1"}
    assert mine.endswith(f"|{os.getpid()}|{NONCE}|0")


def test_without_limits_the_fetch_sends_what_it_always_did(redis_db, monkeypatch):
    """Off by default: no slot key, no script of the feature, the same commands."""
    sent = []
    real = reliable_fetch.send_on

    def spy(conn, commands, **kwargs):
        sent.extend(command[0] for command in commands)
        return real(conn, commands, **kwargs)

    monkeypatch.setattr(reliable_fetch, "send_on", spy)
    monkeypatch.setattr(queue_caps.QueueCaps, "fetch_command",
                        lambda *a, **k: pytest.fail("the queue limits' fetch ran with no limits"))
    fetcher = _fetcher()
    try:
        assert fetcher._caps is None
        redis_db.lpush("queue:default", _job("d1", "default"))
        unit = fetcher.retrieve_work()
        assert unit.queue == "default" and unit.cap is None
        assert sent == ["SET", "LMOVE"]  # the running mark and the move, as before the feature
        assert not redis_db.keys(keys.QUEUE_LIMIT_PREFIX + "*")
    finally:
        fetcher.terminate()


def test_a_limit_on_a_queue_this_worker_does_not_serve_changes_nothing(redis_db):
    fetcher = _fetcher(QUEUE_LIMITS={"elsewhere": 3})
    try:
        assert fetcher._caps is None
    finally:
        fetcher.terminate()


@pytest.mark.parametrize("notifications", [True, False], ids=["push-watch", "wake-lists"])
def test_a_thread_waiting_on_a_full_queue_takes_the_job_once_a_slot_is_freed(redis_db, notifications,
                                                                             monkeypatch):
    """An idle thread does not spin on a full queue: it waits (on the push watch, which
    tracks the slot hash, or on the wake-up lists, which a release feeds) and fetches once
    a slot is freed, long before its poll interval would have made it look again."""
    looks = []
    real = queue_caps.QueueCaps.fetch_command
    monkeypatch.setattr(queue_caps.QueueCaps, "fetch_command",
                        lambda self, *a, **k: looks.append((time.monotonic(), k.get("arm"))) or real(self, *a, **k))
    fetcher = ReliableFetch(Config(QUEUES=["reports", "default"], FETCH_POLL_INTERVAL=30,
                                   FETCH_NOTIFICATIONS=notifications, QUEUE_LIMITS={"reports": 1}))
    got: list = []
    stop = threading.Event()

    def fetch_until_a_job() -> None:
        while not stop.is_set():
            unit = fetcher.retrieve_work()
            if unit is not None:
                got.append(unit)
                return

    try:
        redis_db.lpush("queue:reports", _job("r1", "reports"), _job("r2", "reports"))
        first = fetcher.retrieve_work()
        assert first.queue == "reports"
        waiter = threading.Thread(target=fetch_until_a_job)
        waiter.start()
        looks.clear()
        waiter.join(1.0)
        assert not got and redis_db.llen("queue:reports") == 1  # full: not taken, not moved
        # It looked, armed the watch and waited: a fetch-and-put-back loop or a spin would have
        # looked thousands of times meanwhile. (Not once: Redis tracks key names whatever the
        # database, and every FLUSHDB anywhere wakes a tracking connection, so the other
        # databases of a shared test server make it look again now and then.)
        assert len(looks) <= 50, looks
        queue_caps.release(first)
        waiter.join(20)
        assert got and got[0].queue == "reports" and got[0].cap is not None
    finally:
        stop.set()
        fetcher.terminate()


def test_a_capped_fetch_after_redis_lost_its_scripts_sends_the_text(redis_db, monkeypatch):
    # A SHA Redis does not hold stands for a script cache flushed since (SCRIPT FLUSH is
    # the whole server's, other databases included: not for a test to do).
    monkeypatch.setattr(queue_caps.FETCH, "sha", "0" * 40)
    fetcher = _fetcher(QUEUE_LIMITS={"reports": 1})
    try:
        redis_db.lpush("queue:reports", _job("r1", "reports"))
        unit = fetcher.retrieve_work()
        assert unit.queue == "reports" and unit.cap is not None
        assert queue_caps.in_use(redis_db, ["reports"]) == {"reports": 1}
    finally:
        fetcher.terminate()


def test_an_uncapped_queue_after_a_capped_one_is_still_fetched_ahead(redis_db):
    """The capped queue leads the strict order and is full: the thread's fetches take the
    next queue's jobs several per round trip once its jobs prove short, as they would be
    with no limit (the script moves one job only from a capped queue)."""
    fetcher = _fetcher(QUEUE_LIMITS={"reports": 1})
    try:
        redis_db.lpush("queue:reports", _job("r1", "reports"), _job("r2", "reports"))
        holder = _fetch_in_thread(fetcher)  # another thread holds the only slot
        assert holder.cap is not None
        redis_db.lpush("queue:default", *[_job(f"d{n}", "default") for n in range(60)])
        ahead = []
        queues = set()
        for _ in range(30):
            unit = fetcher.retrieve_work()
            queues.add(unit.queue)
            unit.acknowledge()
            ahead.append(len(fetcher._mine().ahead))
        assert queues == {"default"} and max(ahead) > 0
        assert redis_db.llen("queue:reports") == 1
        # What it fetched ahead went into its private list, and comes out in queue order.
        fetcher.flush_acks()
        rest = fetcher._mine().take_ahead()
        assert [payload.loads(u.job)["jid"] for u in rest] == [f"d{n}" for n in range(30, 30 + len(rest))]
    finally:
        fetcher.terminate()
