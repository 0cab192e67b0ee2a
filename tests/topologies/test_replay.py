"""The replay policy of the write path and ``ON_REDIS_ERROR`` (issue 18 item 6,
RUN-603/604): a connection that cannot be made is retried with back-off; a
``READONLY`` after a failover behind a DNS name redials and sends once more; a
round trip that broke after it was written is never replayed. The first three
tests run for the blocking Writer and for the AsyncWriter alike."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis as redis_lib

from tests.local_redis import free_port
from tests.redis_servers import SwitchableProxy, TCPRedis
from wurk_django import payload
from wurk_django.client import writer
from wurk_django.client.operations import Extra
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.redis import connection
from wurk_django.redis import errors as redis_errors
from wurk_django.redis.errors import PrimaryRefused
from wurk_django.server.fetch.reliable import ReliableFetch


@pytest.fixture
def events():
    return []


def _config(url: str, events: list, **extra) -> Config:
    return Config(raw={"REDIS_URL": url, "TAG": "t", "RELIABLE_PUSH": False, "ON_REDIS_ERROR": events.append,
                       **extra})


def _job() -> dict:
    return {"class": "X", "args": [], "queue": "default", "jid": payload.new_jid(), "created_at": payload.now_ms()}


@pytest.fixture
def clock(monkeypatch):
    """Back-off sleeps (blocking and awaited) recorded instead of slept; jitter fixed at 0.1 s."""
    slept: list[float] = []

    async def record(seconds):
        slept.append(seconds)

    monkeypatch.setattr(redis_errors, "sleep", slept.append)
    monkeypatch.setattr(redis_errors, "async_sleep", record)
    monkeypatch.setattr(redis_errors, "jitter", lambda low, high: 0.1)
    yield slept
    connection.reset()


def _push(mode: str, config: Config, jobs: list[dict]) -> None:
    """A push through the Writer, or through the AsyncWriter (``aenqueue``, the tasks backend)."""
    if mode == "sync":
        Writer(config).push(jobs)
    else:
        asyncio.run(writer.AsyncWriter(config).push(jobs))


both = pytest.mark.parametrize("mode", ["sync", "async"])


@both
def test_a_connection_that_cannot_be_made_is_tried_three_times_then_raised(clock, events, mode):
    config = _config(f"redis://127.0.0.1:{free_port()}/0", events)
    with pytest.raises(redis_errors.NotSent):
        _push(mode, config, [_job()])
    assert clock == [0.6, 1.1]  # 0.5 * 2**n + jitter
    assert [(e.attempt, e.retried, e.action, e.pool) for e in events] == [
        (1, True, "retried", "main"), (2, True, "retried", "main"), (3, False, "gave_up", "main")]
    assert all(isinstance(e.error, redis_errors.NotSent) for e in events)


@both
def test_the_push_lands_once_when_the_server_comes_up_during_the_back_off(monkeypatch, events, mode):
    port = free_port()
    server = TCPRedis()
    server.port = port
    server.server.args = ("--port", str(port), "--bind", "127.0.0.1")

    async def start_server(seconds):
        server.start()

    monkeypatch.setattr(redis_errors, "sleep", lambda seconds: server.start())
    monkeypatch.setattr(redis_errors, "async_sleep", start_server)
    config = _config(server.url(), events)
    try:
        job = _job()
        _push(mode, config, [job])
        client = server.client()
        assert [payload.loads(raw)["jid"] for raw in client.lrange("queue:default", 0, -1)] == [job["jid"]]
        client.close()
        assert [e.action for e in events] == ["retried"]
    finally:
        connection.reset()
        server.stop()


@pytest.fixture
def private():
    server = TCPRedis().start()
    yield server
    connection.reset()
    server.stop()


@pytest.fixture
def kill_after_push(private):
    """A write hook that makes the connection die after the push was applied and
    before its reply is read (once): the round trip ends in a blocking read that
    another connection kills. The job is in Redis; the reply is lost."""
    fired: list[bool] = []

    def kill_soon():
        time.sleep(0.3)
        killer = private.client()
        killer.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        killer.close()

    def hook(ops):
        if fired:
            return ops
        fired.append(True)
        threading.Thread(target=kill_soon).start()
        return [*ops, Extra(("BLPOP", "test:never", 2))]

    writer.register_hook("test-kill", hook, position=1000)
    yield fired
    writer.unregister_hook("test-kill")


@both
def test_a_round_trip_lost_after_it_was_written_is_not_replayed(private, kill_after_push, events, mode):
    """PRO-005, PRO-321: a push whose reply was lost after it was written is not replayed."""
    config = _config(private.url(), events)
    job = _job()
    with pytest.raises(redis_lib.ConnectionError) as caught:
        _push(mode, config, [job])
    assert not isinstance(caught.value, redis_errors.NotSent)
    client = private.client()
    assert [payload.loads(raw)["jid"] for raw in client.lrange("queue:default", 0, -1)] == [job["jid"]]  # once
    client.close()
    assert [(e.attempt, e.retried, e.action) for e in events] == [(1, False, "not_replayed")]


def test_with_reliable_push_such_a_job_is_delivered_again_at_least_once(private, kill_after_push, events, monkeypatch):
    """PRO-321: under reliable push the group whose reply was lost (applied, unacknowledged)
    is buffered and delivered again: at least once, never lost."""
    from tests.support import wait_for
    from wurk_django.client import reliable_push

    monkeypatch.setattr(reliable_push, "FLUSH_INTERVAL", 0.1)
    monkeypatch.setattr(reliable_push, "_buffers", {})
    config = _config(private.url(), events, RELIABLE_PUSH=True)
    job = _job()
    Writer(config).push([job])  # not raised: buffered
    client = private.client()
    wait_for(lambda: client.llen("queue:default") == 2, timeout=10, message="the buffered copy")
    assert {payload.loads(raw)["jid"] for raw in client.lrange("queue:default", 0, -1)} == {job["jid"]}
    client.close()


def test_readonly_after_a_failover_behind_a_dns_name(events):
    """The name (a proxy here) points at a new primary; connections opened before
    still reach the demoted one, which answers READONLY. The writer redials once
    and lands on the new primary; a fetcher's next fetch does too."""
    old, new = TCPRedis().start(), None
    proxy = None
    fetcher = None
    try:
        new = TCPRedis("--replicaof", "127.0.0.1", str(old.port)).start()
        proxy = SwitchableProxy(old.port)
        config = _config(proxy.url(), events, QUEUES=["default"], FETCH_POLL_INTERVAL=0.2)
        first = _job()
        Writer(config).push([first])
        fetcher = ReliableFetch(config)
        unit = fetcher.retrieve_work()
        assert payload.loads(unit.job)["jid"] == first["jid"]
        unit.acknowledge()
        # A pool of its own: a redis-py call on the main pool would take the writer's kept
        # connection (connection._sharing_the_idle_stack) and redial it before the push below.
        pool_client = connection.get_redis("readonly-probe", config=config)
        assert pool_client.set("before", "failover")  # a pooled connection to the old primary
        # The failover: the replica becomes the primary, the old one its replica, the name moves.
        new.client().execute_command("REPLICAOF", "NO", "ONE")
        old.client().execute_command("REPLICAOF", "127.0.0.1", str(new.port))
        proxy.point_to(new.port)
        # A pooled connection answered READONLY once is redialled, not met again.
        with pytest.raises(redis_lib.ReadOnlyError):
            pool_client.set("after", "failover")
        assert pool_client.set("after", "failover")
        assert new.client().get("after") == b"failover"

        second = _job()
        Writer(config).push([second])
        # The refusal reaches ON_REDIS_ERROR as the connection error every caller handles.
        assert [(e.action, type(e.error).__name__) for e in events] == [("retried", "PrimaryRefused")]
        assert isinstance(events[0].error.__cause__, redis_lib.ReadOnlyError)
        assert [payload.loads(raw)["jid"] for raw in new.client().lrange("queue:default", 0, -1)] == [second["jid"]]

        fetched = []
        for _ in range(3):  # the first may meet READONLY on the old connection; the next redials
            try:
                unit = fetcher.retrieve_work()
            except (redis_lib.ReadOnlyError, PrimaryRefused):
                continue
            if unit is not None:
                fetched.append(payload.loads(unit.job)["jid"])
                unit.acknowledge()
                break
        assert fetched == [second["jid"]]
    finally:
        if fetcher is not None:
            fetcher.release_thread_connection()
            fetcher.terminate()
        connection.reset()
        if proxy is not None:
            proxy.stop()
        if new is not None:
            new.stop()
        old.stop()

