"""send_commands' idle connections (RUN-706): reused, checked like redis-py's checkout, bounded, fork-safe."""

from __future__ import annotations

import os
import threading

import pytest
import redis

from tests.support import wait_for
from wurk_django.redis import connection, wire
from wurk_django.redis.connection import IDLE_PER_POOL, get_redis, send_commands


def _client_id(client) -> int:
    return send_commands(client, [("CLIENT", "ID")])[0]


def test_consecutive_batches_reuse_one_connection(redis_db):
    client = get_redis()
    first = _client_id(client)
    assert [_client_id(client) for _ in range(5)] == [first] * 5


def test_an_idle_connection_closed_by_the_server_is_replaced_before_use(redis_db):
    client = get_redis()
    idle = _client_id(client)
    redis_db.execute_command("CLIENT", "KILL", "ID", idle)
    # Without the readiness check this write would go to a closed socket and fail.
    assert send_commands(client, [("SET", "k", "v"), ("GET", "k")]) == [b"OK", b"v"]
    assert _client_id(client) != idle


def test_stray_bytes_on_an_idle_connection_mean_a_fresh_socket(redis_db):
    client = get_redis()
    send_commands(client, [("PING",)])
    [conn] = connection.idle_stack(client.connection_pool)
    conn.send_command("PING")  # a reply nobody reads: the stream is out of step
    wait_for(lambda: wire.stale(conn), message="the stray PONG to arrive")
    assert send_commands(client, [("ECHO", "mine")]) == [b"mine"]


def test_at_most_idle_per_pool_connections_stay_out(redis_db):
    client = get_redis()
    pool = client.connection_pool
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def push() -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(20):
                send_commands(client, [("INCR", "n")])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=push) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert int(redis_db.get("n")) == 120
    assert len(connection.idle_stack(pool)) <= IDLE_PER_POOL
    # everything else went back to redis-py's pool, usable by ordinary commands
    assert client.ping() is True


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_does_not_write_on_its_parents_idle_connection(redis_db):
    """DJ-005: fork-aware pools: a child never reuses a parent socket; RUN-812: in the child: rebuild pools, reset per-
    process state."""
    client = get_redis()
    parent_id = _client_id(client)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(_client_id(client)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child_id = int(os.read(read, 32) or b"0")
    os.close(read)
    os.waitpid(pid, 0)
    assert child_id and child_id != parent_id
    assert _client_id(client) == parent_id  # the parent's connection is untouched and in step


def test_redis_py_calls_take_the_kept_connection_before_dialing_RUN_130(redis_db):
    """A redis-py client method on the same pool (an idle worker's reaper, its paused-queue
    read) takes the connection send_commands keeps aside instead of opening a second one;
    send_commands then gets it back through the pool. One connection serves both."""
    client = get_redis()
    kept = _client_id(client)
    assert connection.idle_stack(client.connection_pool)  # kept aside, counted as checked out
    assert client.client_id() == kept
    assert _client_id(client) == kept
    assert client.execute_command("CLIENT", "ID") == kept
    with client.pipeline() as pipe:
        assert pipe.execute_command("CLIENT", "ID").execute() == [kept]
    assert _client_id(client) == kept



def _lose_the_reply(client, key: str) -> None:
    """``INCR key`` then a blocking read in one pipeline on one of ``client``'s pooled
    connections; another connection kills that one (found by its name: no other client)
    while it blocks, so the INCR is applied and its reply is lost with the socket."""
    name = f"lose-{os.getpid()}-{threading.get_ident()}"
    killer = connection.probe_redis(timeout=2)
    killed: list[int] = []

    def kill_soon() -> None:
        def blocked():
            return [line["id"] for line in killer.client_list()
                    if line.get("name") == name and line.get("cmd") == "blpop"]

        ids = wait_for(blocked, timeout=10, interval=0.02, message="the pipeline to block")
        killer.execute_command("CLIENT", "KILL", "ID", ids[0])
        killed.append(int(ids[0]))

    thread = threading.Thread(target=kill_soon)
    thread.start()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("CLIENT", "SETNAME", name)
        pipe.incr(key)
        pipe.blpop([f"{key}:never"], 2)
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
    finally:
        thread.join(15)
        killer.connection_pool.disconnect()
    assert killed, "the connection was not killed while it blocked"


@pytest.mark.parametrize("purpose", ["main", "fetch"])
def test_run_831_redis_py_retries_are_off_so_a_lost_reply_is_never_replayed(redis_db, purpose):
    """RUN-831: redis-py's own retries are off (``Retry(NoBackoff(), 0)``) on the engine's
    pools, which are ``BlockingConnectionPool``s with a 1 s checkout timeout. ENT-006 and
    PRO-005: so an ``INCR`` (a poison counter, a stat) whose reply was lost after Redis
    applied it is raised to its caller, not sent again: the counter is 1, not 2."""
    client = get_redis(purpose)
    pool = client.connection_pool
    assert isinstance(pool, redis.BlockingConnectionPool) and pool.timeout == connection.CHECKOUT_TIMEOUT == 1.0
    assert pool.connection_kwargs["retry"]._retries == 0
    _lose_the_reply(client, "test:counter")
    assert redis_db.get("test:counter") == b"1"


def test_run_601_main_and_blocking_fetch_pools_are_separate_and_sized_from_the_concurrency(redis_db):
    """RUN-601: per process, a main pool of ``max(concurrency + 5, 10)`` and a pool for the
    blocking fetch of its own, so an idle fetcher holds no main connection; both are
    forgotten in a forked child (see the fork test above). The fetch pool is
    ``concurrency + 2`` here, not ``concurrency``: see the row."""
    from wurk_django.conf import Config

    config = Config(CONCURRENCY=25)
    main, fetch = get_redis("main", config=config), get_redis("fetch", config=config, block_seconds=2)
    assert main.connection_pool is not fetch.connection_pool
    assert main.connection_pool.max_connections == 30 and fetch.connection_pool.max_connections == 27
    assert connection.pool_size_for(Config(CONCURRENCY=2)) == 10
    assert fetch.connection_pool.connection_kwargs["socket_timeout"] > 2  # longer than the block
