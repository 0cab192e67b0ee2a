"""An idle worker holds a few Redis connections, not one per thread (issue 30 item 3).

Twenty-five fetching threads all walk their queues at once when they start, so the
process opens about one connection per thread; once they wait, their connections go
back to the pools, and the heartbeat's :func:`~wurk_django.redis.connection.trim_idle`
closes what the pools hold unused beyond one each. Connections are counted with
``CLIENT LIST`` on a private redis-server that only this process talks to. No
assertion is about timing.
"""

from __future__ import annotations

import json

import pytest
import redis as redis_lib

from tests.redis_servers import TCPRedis
from tests.support import Fetching, wait_for
from wurk_django.conf import Config
from wurk_django.redis import connection
from wurk_django.server.fetch.reliable import ReliableFetch

THREADS = 25
#: One queue: the blocker's connection (and at most one free one beside it), the main
#: pool's and the slots' pool's one each, and the scheduler has none here. Several queues:
#: the subscription, the push watch's own, the main pool's and the slots' pool's.
MOST_IDLE = 5


@pytest.fixture(scope="module")
def server():
    started = TCPRedis().start()
    try:
        yield started
    finally:
        started.stop()


def _theirs(client: redis_lib.Redis) -> int:
    """Connections to the server other than ``client``'s own."""
    mine = client.client_id()
    return len([c for c in client.client_list() if int(c["id"]) != mine])


def _waiting(client: redis_lib.Redis, queues: list[str]) -> None:
    """Until a thread waits in Redis: blocked on the one queue, or armed on several."""
    db = int(client.connection_pool.connection_kwargs.get("db", 0))

    def armed() -> bool:
        for c in client.client_list():
            if int(c["db"]) != db:
                continue
            if len(queues) == 1 and c.get("cmd") == "blmove":
                return True
            if len(queues) > 1 and "t" in c.get("flags", "") and c.get("cmd") in ("evalsha", "eval"):
                return True
        return False

    wait_for(armed, timeout=60, message="a thread to wait in Redis")



@pytest.mark.parametrize("queues", [["a"], ["a", "b", "c"]], ids=["one-queue", "three-queues"])
def test_an_idle_fetcher_of_25_threads_holds_a_few_connections_RUN_130(server, queues):
    config = Config(REDIS_URL=server.url(), QUEUES=queues, CONCURRENCY=THREADS, FETCH_POLL_INTERVAL=60)
    client = server.client()
    client.flushall()
    fetching = Fetching(ReliableFetch(config), THREADS)
    try:
        # Every thread has walked once at least: every slot is handed out.
        wait_for(lambda: len(fetching.fetcher._slots) >= THREADS, timeout=60, message="every thread to fetch")
        _waiting(client, queues)
        held = []

        def few() -> bool:
            connection.trim_idle()  # what each heartbeat does
            held.append(_theirs(client))
            return held[-1] <= MOST_IDLE

        wait_for(few, timeout=60, message=f"the idle fetcher to hold at most {MOST_IDLE} connections")
        # The closed connections dial again when needed: a job pushed by any client is fetched.
        job = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["x"], "queue": queues[-1], "jid": "idle1",
               "retry": True, "created_at": 1, "enqueued_at": 1}
        client.lpush(f"queue:{queues[-1]}", json.dumps(job))
        wait_for(lambda: len(fetching.got) == 1, timeout=60, message="the pushed job to be fetched")
    finally:
        fetching.stop()
        client.close()


def test_trim_idle_keeps_the_most_recent_connection_open_and_the_rest_redial(server):
    config = Config(REDIS_URL=server.url(1), CONCURRENCY=8)
    client = server.client()
    pool = connection.get_redis(config=config).connection_pool
    taken = [pool.get_connection() for _ in range(6)]
    for conn in taken:
        conn.send_command("PING")
        assert conn.read_response() in (b"PONG", "PONG", True)
        pool.release(conn)
    db1 = [c for c in client.client_list() if int(c["db"]) == 1]
    assert len(db1) == 6
    assert connection.trim_idle() >= 5
    # The server learns of the closes when it reads their sockets, maybe after this
    # CLIENT LIST: waited for, not asserted at once.
    wait_for(lambda: len([c for c in client.client_list() if int(c["db"]) == 1]) == 1,
             message="the server to see five of the six closed")
    # The one left open is the last released, and the pool hands it out first.
    again = pool.get_connection()
    try:
        assert again is taken[-1]
    finally:
        pool.release(again)
    # Two at once: the second dials again, and works.
    first, second = pool.get_connection(), pool.get_connection()
    try:
        for conn in (first, second):
            conn.send_command("PING")
            assert conn.read_response() in (b"PONG", "PONG", True)
    finally:
        pool.release(first)
        pool.release(second)
    client.close()


def _calls(client: redis_lib.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_an_idle_thread_on_one_queue_only_blocks_no_walk_between_RUN_130(server):
    """Between two blocking moves that found nothing, an idle thread with nothing to
    acknowledge sends no ``LMOVE``: the blocking move takes a queued job at once anyway.
    Nor do the threads waiting for their turn when their wait ends (every ``QUIET_POLLS``
    poll intervals, 1.5 s here): another thread is blocked on the queue."""
    config = Config(REDIS_URL=server.url(2), QUEUES=["solo"], CONCURRENCY=4, FETCH_POLL_INTERVAL=0.1)
    client = server.client(2)
    client.flushdb()
    client.config_resetstat()  # the counts are the server's: earlier tests' commands out
    fetching = Fetching(ReliableFetch(config), 4)
    try:
        wait_for(lambda: _calls(client, "blmove") >= 2, timeout=60, message="a thread to block")
        wait_for(lambda: len(fetching.fetcher._slots) >= 4, timeout=60, message="every thread to fetch")
        # Every thread's first walk (an LMOVE that marks its slot) is done once the waiters
        # have each timed out once: 15 more poll intervals after the last walk began.
        blmoves = _calls(client, "blmove")
        wait_for(lambda: _calls(client, "blmove") >= blmoves + 20, timeout=60, message="20 more blocking moves")
        lmoves, blmoves = _calls(client, "lmove"), _calls(client, "blmove")
        # 20 more: the blocker's timeouts, and each waiter's wait ends at least once meanwhile.
        wait_for(lambda: _calls(client, "blmove") >= blmoves + 20, timeout=60, message="20 more blocking moves")
        assert _calls(client, "lmove") == lmoves
        job = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["y"], "queue": "solo", "jid": "idle2",
               "retry": True, "created_at": 1, "enqueued_at": 1}
        client.lpush("queue:solo", json.dumps(job))
        wait_for(lambda: len(fetching.got) == 1, timeout=60, message="the pushed job to be fetched")
        unit = fetching.got[0]
        assert unit.private.startswith("queue:solo|")  # moved into the thread's private list
        # Its ACK rides the next walk (an LMOVE), then the thread blocks again.
        wait_for(lambda: client.llen(unit.private) == 0, timeout=60, message="the ACK to be sent")
    finally:
        fetching.stop()
        client.close()


def test_a_slot_connection_nobody_took_for_a_while_is_closed_even_the_last_RUN_130(server, monkeypatch):
    """An idle thread on one queue blocks on the fetch pool and never takes its slot's
    connection again; once it has sat unused for ``UNUSED_SECONDS`` the heartbeat's trim
    closes it, the last open one of its pool included, and it dials again when needed."""
    monkeypatch.setattr(connection, "UNUSED_SECONDS", 0.0)
    config = Config(REDIS_URL=server.url(3), QUEUES=["alone"], CONCURRENCY=3, FETCH_POLL_INTERVAL=60)
    client = server.client(3)
    client.flushdb()
    fetching = Fetching(ReliableFetch(config), 3)
    try:
        wait_for(lambda: len(fetching.fetcher._slots) >= 3, timeout=60, message="every thread to fetch")
        _waiting(client, ["alone"])

        def slot_connections() -> list[dict]:
            # A slot's connection last ran a walk (LMOVE); the blocker's, BLMOVE.
            return [c for c in client.client_list() if c.get("cmd") == "lmove" and int(c["db"]) == 3]

        def none_open() -> bool:
            connection.trim_idle()
            return not slot_connections()

        wait_for(none_open, timeout=60, message="the slots' connections to be closed")
        job = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["z"], "queue": "alone", "jid": "idle3",
               "retry": True, "created_at": 1, "enqueued_at": 1}
        client.lpush("queue:alone", json.dumps(job))
        wait_for(lambda: len(fetching.got) == 1, timeout=60, message="the pushed job to be fetched")
        # Its ACK goes out on a slot connection dialed again.
        wait_for(lambda: client.llen(fetching.got[0].private) == 0, timeout=60, message="the ACK to be sent")
    finally:
        fetching.stop()
        client.close()


@pytest.mark.parametrize("queues", [["a"], ["a", "b", "c"]], ids=["one-queue", "three-queues"])
def test_an_idle_worker_of_one_thread_holds_two_connections_like_sidekiq_RUN_130(server, queues, monkeypatch):
    """Issue 30 item 3: an idle ``-c 1`` Sidekiq holds two connections (its fetch's and its
    pool's). So does an idle ``-c 1`` worker here, scheduler and heartbeat running: the one
    subscribed connection (the push watch's notices and the scheduler's wake-ups share
    it) and its pool's one, which the watch arms with tracking. No blocking fetch of its
    own, and yet a bare ``LPUSH`` is run (the watch hears it: the poll interval is a
    minute), and so is a job scheduled after the worker started (the scheduler heard its
    push: its first sweep is 30 s away)."""
    from wurk_django.client.push import Client
    from wurk_django.server import scheduler as scheduler_module
    from wurk_django.server.launcher import Launcher

    monkeypatch.setattr(connection, "UNUSED_SECONDS", 0.0)  # the fetch slot's connection goes at once
    monkeypatch.setattr(scheduler_module, "INITIAL_WAIT", 30)
    db = 4 if len(queues) == 1 else 5
    client = server.client(db)
    client.flushdb()
    config = Config(REDIS_URL=server.url(db), QUEUES=queues, CONCURRENCY=1, FETCH_POLL_INTERVAL=60,
                    AVERAGE_SCHEDULED_POLL_INTERVAL=600)
    launcher = Launcher(config, embedded=True)
    launcher.run()
    try:
        _waiting_on_watch_in(client, db)
        held: list[list[str]] = []

        def two() -> bool:
            connection.trim_idle()  # what each heartbeat does
            # This database's: the module's earlier tests leave pools of their own on the server.
            held.append(sorted(_kind(c) for c in client.client_list()
                               if int(c["id"]) != client.client_id() and int(c["db"]) == db))
            return held[-1] == ["armed", "subscribed"]

        wait_for(two, timeout=60, message="the idle -c 1 worker to hold its two connections")
        job = {"class": "tests.jobsapp.jobs.ContextRecordJob", "args": ["test:ran"], "queue": queues[-1],
               "jid": "bare-lpush", "retry": True, "created_at": 1, "enqueued_at": 1}
        client.lpush(f"queue:{queues[-1]}", json.dumps(job))
        wait_for(lambda: client.llen("test:ran") == 1, timeout=30, message="the bare LPUSH to run")
        import time

        Client(config=config).push({"class": "tests.jobsapp.jobs.ContextRecordJob", "args": ["test:ran"],
                             "queue": queues[0], "at": time.time() + 0.5})
        wait_for(lambda: client.llen("test:ran") == 2, timeout=20, message="the scheduled job to run")
    finally:
        launcher.stop(timeout=5)
        client.close()


def _kind(entry: dict) -> str:
    flags = entry.get("flags", "")
    if "P" in flags:
        return "subscribed"
    if "t" in flags:
        return "armed"
    return f"other ({entry.get('cmd')})"


def _waiting_on_watch_in(client: redis_lib.Redis, db: int) -> None:
    # Tracking on (flag t) says a connection was armed; its last command may be the
    # heartbeat's by now, which takes the same pooled connection.
    wait_for(lambda: any("t" in c.get("flags", "") and int(c["db"]) == db for c in client.client_list()),
             timeout=60, message="the worker to arm its push watch")


def test_a_pool_replaced_by_a_bigger_one_has_its_idle_connections_closed_RUN_130(server):
    """get_redis builds a bigger pool when a config asks for more (a component reading the
    settings' CONCURRENCY inside a -c 1 worker did, every minute): the smaller one's open
    connection was never trimmed again, a third connection on an idle worker for good."""
    client = server.client(7)
    small = connection.get_redis(config=Config(REDIS_URL=server.url(7), CONCURRENCY=1))
    connection.send_commands(small, [("PING",)])
    db7 = lambda: [c for c in client.client_list() if int(c["db"]) == 7 and int(c["id"]) != client.client_id()]  # noqa: E731
    assert len(db7()) == 1
    big = connection.get_redis(config=Config(REDIS_URL=server.url(7), CONCURRENCY=40))
    assert big is not small
    connection.send_commands(big, [("PING",)])
    assert len(db7()) == 2
    connection.trim_idle()
    assert len(db7()) == 1  # the bigger pool's; the replaced one holds none open
    assert connection.send_commands(small, [("ECHO", "still works")]) == [b"still works"]  # it dials again
    client.close()
