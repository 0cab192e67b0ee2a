"""Pushes from any client wake an idle fetcher serving several queues (issue 25 item 4; PRO-121, RUN-130).

Redis tells the fetcher's push watch (``CLIENT TRACKING``) when any client writes
one of its queues: a bare ``LPUSH`` or a Ruby Sidekiq push, which write no wake-up
token. Every test here sets ``FETCH_POLL_INTERVAL`` to 60 s (an idle thread with
the watch on then looks on its own only every 15 minutes), so a job found within
the tests' generous waits was found through the watch, not by polling. No
assertion is about how fast anything is.
"""

from __future__ import annotations

import json
import logging

import pytest

from tests.redis_servers import TCPRedis
from tests.support import Fetching, wait_for
from wurk_django import payload
from wurk_django.conf import Config
from wurk_django.pause import pause, unpause
from wurk_django.redis import wire
from wurk_django.redis.connection import get_redis, send_commands
from wurk_django.server.fetch.reliable import ReliableFetch

POLL = 60  # no wait below ends by polling
WAIT = 30  # generous, far below POLL


def _raw(jid: str, queue: str) -> bytes:
    """A job as Ruby Sidekiq's client writes it: one LPUSH, no wake-up token."""
    return payload.dumps({"retry": True, "queue": queue, "class": "tests.jobsapp.jobs.RecordJob",
                          "args": [jid], "jid": jid, "created_at": 1, "enqueued_at": 1})


def _fetcher(queues=("a", "b", "c"), **settings) -> ReliableFetch:
    return ReliableFetch(Config(QUEUES=list(queues), FETCH_POLL_INTERVAL=POLL, **settings))



def _tracking(client) -> list[dict]:
    """Clients of ``client``'s database with key tracking on (flag ``t``): the connections the push watches armed."""
    db = int(client.connection_pool.connection_kwargs.get("db", 0))
    return [c for c in client.client_list() if "t" in c.get("flags", "") and int(c.get("db", -1)) == db]


def _waiting_on_watch(client, count: int = 1) -> None:
    """Until ``count`` watches have armed (a pooled connection of theirs ran the fetch-and-watch script)."""
    wait_for(lambda: len([c for c in _tracking(client) if c.get("cmd") in ("evalsha", "eval")]) >= count,
             timeout=WAIT, message="the fetcher to arm its push watch")


@pytest.mark.parametrize("queues", [("a", "b", "c"), ("a,3", "b,2", "c,1")], ids=["strict", "weighted"])
def test_a_bare_lpush_wakes_an_idle_fetcher_on_several_queues(redis_db, queues):
    fetching = Fetching(_fetcher(queues), threads=2)
    try:
        _waiting_on_watch(redis_db)
        for i in range(3):
            redis_db.lpush("queue:c", _raw(f"bare{i}", "c"))
            wait_for(lambda i=i: len(fetching.got) == i + 1, timeout=WAIT, message=f"job {i} to be fetched")
        unit = fetching.got[0]
        assert unit.queue == "c" and json.loads(unit.job)["jid"] == "bare0"
        assert not redis_db.exists("wake:c")  # nothing but the job was written
    finally:
        fetching.stop()


def test_a_woken_fetcher_keeps_the_job_in_its_private_list(redis_db):
    fetcher = _fetcher()
    fetching = Fetching(fetcher)
    try:
        _waiting_on_watch(redis_db)
        fetching._stop.set()  # the next job fetched is the last
        redis_db.lpush("queue:b", _raw("kept", "b"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job to be fetched")
        unit = fetching.got[0]
        assert redis_db.lrange(unit.private, 0, -1) == [unit.job]  # reliable: never in memory only
    finally:
        fetching.stop()


def test_strict_order_holds_for_jobs_landing_together(redis_db):
    fetching = Fetching(_fetcher())
    try:
        _waiting_on_watch(redis_db)
        pipe = redis_db.pipeline(transaction=True)
        pipe.lpush("queue:c", _raw("last", "c"))
        pipe.lpush("queue:a", _raw("first", "a"))
        pipe.execute()
        wait_for(lambda: len(fetching.got) == 2, timeout=WAIT, message="both jobs to be fetched")
        assert [unit.queue for unit in fetching.got] == ["a", "c"]
    finally:
        fetching.stop()


def test_several_jobs_pushed_at_once_wake_enough_threads(redis_db):
    """One write notifies the watch once; a thread that fetched and sees more queued
    wakes the next, so every job is fetched without a poll."""
    fetching = Fetching(_fetcher(), threads=3)
    try:
        _waiting_on_watch(redis_db)
        redis_db.lpush("queue:b", *[_raw(f"many{i}", "b") for i in range(5)])
        wait_for(lambda: len(fetching.got) == 5, timeout=WAIT, message="all five jobs to be fetched")
    finally:
        fetching.stop()


def test_a_paused_queue_is_skipped_and_its_unpause_wakes_the_fetcher(redis_db):
    pause("c")
    fetching = Fetching(_fetcher())
    try:
        _waiting_on_watch(redis_db)
        redis_db.lpush("queue:c", _raw("held", "c"))
        redis_db.lpush("queue:a", _raw("free", "a"))
        wait_for(lambda: len(fetching.got) == 1, timeout=WAIT, message="the unpaused queue's job")
        assert fetching.got[0].queue == "a" and redis_db.llen("queue:c") == 1
        unpause("c")  # the paused set is watched too
        wait_for(lambda: len(fetching.got) == 2, timeout=WAIT, message="the job of the unpaused queue")
        assert fetching.got[1].queue == "c"
    finally:
        fetching.stop()


def test_the_watch_comes_back_after_its_own_connection_is_killed(redis_db):
    """A fetcher of several threads arms on the watch's own connection: the subscriber's
    look at it each second (no command; any mode) sees it closed, and the waiting
    thread arms again."""
    fetching = Fetching(_fetcher())
    try:
        _waiting_on_watch(redis_db)
        (armed,) = _tracking(redis_db)
        redis_db.client_kill_filter(_id=armed["id"])
        wait_for(lambda: [c for c in _tracking(redis_db) if c["id"] != armed["id"] and c.get("cmd") == "evalsha"],
                 timeout=WAIT, message="a new armed connection")
        redis_db.lpush("queue:c", _raw("after-kill", "c"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the kill")
    finally:
        fetching.stop()


@pytest.mark.parametrize("noticed_by", ["look", "next-use"])
def test_a_killed_pooled_armed_connection_resets_the_watch(redis_db, noticed_by):
    """A fetcher of one thread arms on a pooled connection. Killed, it is noticed by the
    subscriber's look at its socket (the fast path's socket), or in every mode when the
    pool next uses it (a worker's heartbeat, every 10 s): that redial resets the watch,
    and the waiting thread arms again and hears the next push."""
    if noticed_by == "look" and not wire.enabled():
        pytest.skip("the fast path is off (WURK_FAST_PATH=0): no socket to look at; next-use covers that mode")
    fetching = Fetching(_fetcher(CONCURRENCY=1))
    try:
        _waiting_on_watch(redis_db)
        (armed,) = _tracking(redis_db)
        redis_db.client_kill_filter(_id=armed["id"])
        if noticed_by == "next-use":
            send_commands(get_redis(config=fetching.fetcher.config), [("PING",)])  # what a heartbeat does
        wait_for(lambda: [c for c in _tracking(redis_db) if c["id"] != armed["id"] and c.get("cmd") == "evalsha"],
                 timeout=WAIT, message="a new armed connection")
        redis_db.lpush("queue:c", _raw("after-kill", "c"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the kill")
    finally:
        fetching.stop()


def test_threads_of_one_fetcher_arm_one_connection_so_a_push_sends_one_notice():
    """Four idle threads each arm the watch, all on the watch's own connection: one push
    then sends the subscriber one notice, and one thread walks for it. (Armed on a pooled
    connection each, a push sent four notices and woke all four, and every heartbeat's
    trim closed three armed connections, which made all four arm again.)"""
    server = TCPRedis().start()
    fetching = None
    try:
        client = server.client()
        fetching = Fetching(_fetcher(REDIS_URL=server.url(), CONCURRENCY=4), threads=4)

        def calls(command: str) -> int:
            return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))

        # Each arming sends CLIENT TRACKING once (the walks before it run scripts too).
        wait_for(lambda: calls("client|tracking") >= 4, timeout=WAIT, message="all four threads to arm")
        assert len(_tracking(client)) == 1
        client.lpush("queue:b", _raw("one-notice", "b"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job to be fetched")
        assert len(_tracking(client)) == 1
    finally:
        if fetching is not None:
            fetching.stop()
        server.stop()


def test_the_watch_comes_back_after_its_subscriber_is_killed(redis_db):
    fetching = Fetching(_fetcher())
    try:
        _waiting_on_watch(redis_db)
        (armed,) = _tracking(redis_db)
        listener = int(armed["redir"])
        redis_db.client_kill_filter(_id=listener)
        wait_for(lambda: [c for c in _tracking(redis_db) if int(c["redir"]) != listener and c.get("cmd") == "evalsha"],
                 timeout=WAIT, message="tracking redirected to a new subscriber")
        redis_db.lpush("queue:a", _raw("after-subscriber-kill", "a"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the kill")
    finally:
        fetching.stop()


@pytest.mark.slow
def test_the_watch_comes_back_after_a_redis_restart_on_its_own_server():
    """A fetcher bound to another server (a shard) watches that server, and sets its watch
    up again when that server restarts."""
    server = TCPRedis().start()
    port = server.port
    fetching = None
    try:
        client = server.client()
        fetching = Fetching(_fetcher(REDIS_URL=server.url()))
        _waiting_on_watch(client)
        server.server.stop()
        server = TCPRedis.__new__(TCPRedis)
        server.port = port
        from tests.local_redis import LocalRedis

        server.server = LocalRedis("--port", str(port), "--bind", "127.0.0.1")
        server.start()
        client = server.client()
        _waiting_on_watch(client)
        client.lpush("queue:b", _raw("after-restart", "b"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the restart")
        assert fetching.got[0].queue == "b"
    finally:
        if fetching is not None:
            fetching.stop()
        server.stop()


@pytest.mark.slow
def test_a_redis_refusing_tracking_is_logged_once_and_polled(caplog):
    """Some managed services (and Dragonfly) refuse CLIENT TRACKING: the fetcher says so
    once, and finds other clients' pushes by polling, as before."""
    server = TCPRedis("--rename-command", "CLIENT", "").start()
    fetching = None
    try:
        client = server.client()
        caplog.set_level(logging.WARNING, logger="wurk_django.worker")
        fetcher = ReliableFetch(Config(REDIS_URL=server.url(), QUEUES=["a", "b"], FETCH_POLL_INTERVAL=0.5))
        fetching = Fetching(fetcher, threads=2)
        client.lpush("queue:b", _raw("polled", "b"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job to be found by polling")

        def refusals():
            return [r for r in caplog.records if "refused CLIENT TRACKING" in r.getMessage()]

        # Polling can find the job before the subscriber thread has dialed and been refused,
        # so the warning is waited for, then counted once more after another poll cycle.
        wait_for(refusals, timeout=WAIT, message="the refusal to be logged")
        client.lpush("queue:a", _raw("polled-again", "a"))
        wait_for(lambda: len(fetching.got) == 2, timeout=WAIT, message="a second job to be found by polling")
        assert len(refusals()) == 1
    finally:
        if fetching is not None:
            fetching.stop()
        server.stop()


def test_switched_off_the_fetcher_waits_on_wake_up_lists(redis_db):
    fetching = Fetching(ReliableFetch(Config(QUEUES=["a", "b"], FETCH_POLL_INTERVAL=1, FETCH_NOTIFICATIONS=False)))
    try:
        db = redis_db.connection_pool.connection_kwargs.get("db", 0)
        wait_for(lambda: [c for c in redis_db.client_list() if c.get("cmd") == "blpop" and int(c["db"]) == int(db)],
                 timeout=WAIT, message="the fetcher to block on the wake lists")
        assert not _tracking(redis_db)
    finally:
        fetching.stop()


def test_parked_acks_go_out_before_the_thread_waits_on_the_watch(redis_db):
    fetcher = _fetcher()
    redis_db.lpush("queue:a", _raw("acked", "a"))
    fetching = Fetching(fetcher)  # fetches it, parks its ACK, walks again (the ACK rides it), waits
    try:
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job to be fetched")
        _waiting_on_watch(redis_db)
        assert redis_db.llen(fetching.got[0].private) == 0  # acknowledged before the wait (RUN-204)
    finally:
        fetching.stop()


def test_one_idle_thread_per_process_and_interval_takes_the_safety_look():
    """Idle threads wake on their own only for a safety look, and one per interval takes
    it: ten threads each walking ten queues would cost Redis more than Sidekiq's polling."""
    from wurk_django.server.fetch.push_watch import PushWatch

    watch = PushWatch(Config(QUEUES=["a", "b"]))
    assert watch.claim_look(30) is True
    assert [watch.claim_look(30) for _ in range(9)] == [False] * 9
    watch._looked_at -= 30  # an interval later
    assert watch.claim_look(30) is True


def test_a_process_that_keeps_losing_the_race_looks_a_little_later():
    """Every idle process hears every push; one that found nothing on its last walks
    (another process took the jobs) waits a little before its next, up to a cap, so at
    high push rates an idle process walks a bounded number of times a second."""
    from wurk_django.server.fetch import push_watch

    watch = push_watch.PushWatch(Config(QUEUES=["a", "b"]))
    assert watch.loss_pause() == 0  # a lone worker never waits
    watch.walked(False)
    watch.walked(False)
    assert watch.loss_pause() == 2 * push_watch.LOSS_PAUSE
    for _ in range(100):
        watch.walked(False)
    assert watch.loss_pause() == push_watch.MOST_LOSS_PAUSE
    watch.walked(True)
    assert watch.loss_pause() == 0


def test_a_notice_about_a_private_list_only_wakes_no_thread():
    """Redis 7.0 tracks every key a script names, the thread's private lists among them:
    their acknowledgements must not wake a thread (it would walk for nothing, and count
    as a lost race). A queue, the paused set, or a flush (no key named) does wake one."""
    from wurk_django.server.fetch.push_watch import PushWatch

    watch = PushWatch(Config(QUEUES=["a", "c"]))
    watch._watched = watch._watched | {b"queue:c"}  # as fetch_and_arm records it
    watch._heard([b"queue:c|host|1|nonce|0"])  # a message's data: the keys written
    assert watch._permits == 0
    for written in ([b"queue:c"], [b"paused"], None):
        watch._heard(written)
    assert watch._permits == 3


def test_the_safety_look_runs_the_script_again_not_a_walk(monkeypatch):
    """An idle thread's safety look (every 15 poll intervals, 1.5 s here) fetches and arms
    again with the script on a pooled connection. A walk would take the fetch slot's
    connection, which would then never sit unused for the minute after which the
    heartbeat closes it: a third connection on an idle -c 1 worker."""
    taken = _slot_connections_taken(monkeypatch)
    server = TCPRedis().start()
    fetching = None
    try:
        client = server.client()
        config = Config(REDIS_URL=server.url(), QUEUES=["a", "b"], CONCURRENCY=1, FETCH_POLL_INTERVAL=0.1)
        fetching = Fetching(ReliableFetch(config), threads=1)
        _waiting_on_watch(client)

        def scripts() -> int:
            return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))

        walks, armed = len(taken), scripts()
        wait_for(lambda: scripts() >= armed + 3, timeout=WAIT, message="three safety looks")
        assert len(taken) == walks  # no walk took the slot's connection meanwhile
        client.lpush("queue:b", _raw("after-looks", "b"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the looks")
    finally:
        if fetching is not None:
            fetching.stop()
        server.stop()


def test_a_reset_watch_arms_again_in_place_without_a_walk(monkeypatch):
    """A reset (an armed connection lost, the subscription made anew) has the waiting
    thread run the script again where it waits: no walk on the fetch slot's connection,
    which would then stay open a minute (the idle -c 1 bench showed it as a third)."""
    taken = _slot_connections_taken(monkeypatch)
    server = TCPRedis().start()
    fetching = None
    try:
        client = server.client()
        fetching = Fetching(_fetcher(REDIS_URL=server.url(), CONCURRENCY=1))
        _waiting_on_watch(client)

        def scripts() -> int:
            return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))

        walks, armed = len(taken), scripts()
        fetching.fetcher._watch._lost_armed("a test's reset")
        wait_for(lambda: scripts() > armed, timeout=WAIT, message="the thread to arm again")
        assert len(taken) == walks
        client.lpush("queue:a", _raw("after-reset", "a"))
        wait_for(lambda: fetching.got, timeout=WAIT, message="the job pushed after the reset")
    finally:
        if fetching is not None:
            fetching.stop()
        server.stop()


def _slot_connections_taken(monkeypatch) -> list[int]:
    """A list that grows by one each time a fetch slot takes its connection (a walk)."""
    from wurk_django.server.fetch.slot import FetchSlot

    taken: list[int] = []
    real = FetchSlot.connection

    def counted(self):
        taken.append(1)
        return real(self)

    monkeypatch.setattr(FetchSlot, "connection", counted)
    return taken
