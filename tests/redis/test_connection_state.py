"""wurk's per-connection state (issue 41 item 4): one ConnectionState per redis-py
connection, kept beside it (never on it), on every kind of pool; its socket's part
forgotten with the socket, across ``connection.reset()`` and in a forked child.

These run on whichever path the suite runs (``WURK_FAST_PATH=0`` too: then redis-py's
own calls read what is owed, and the state still says how much)."""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import threading
import time

import pytest
import redis
from django.conf import settings

from wurk_django.conf import get_config
from wurk_django.redis import connection, wire
from wurk_django.redis.app import FastRedis
from wurk_django.redis.connection import (
    borrow,
    get_redis,
    give_back,
    keep_open_first,
    send_commands,
    send_on,
    send_unanswered,
    set_aside,
    taken_back,
    trim_idle,
)


def _no_attribute_of_ours(conn) -> bool:
    return not any(name.startswith("_wurk") for name in vars(conn)) \
        and not any(isinstance(value, wire.ConnectionState) for value in vars(conn).values())


def test_the_state_lives_beside_the_connection_on_wurks_own_pools(redis_db):
    client = get_redis(config=get_config())
    conn = borrow(client, check_idle_after=1.0)
    try:
        send_on(conn, [("PING",)])
        send_unanswered(conn, [("SET", "k", "v")])
        assert wire.owes(conn)
    finally:
        connection.settle(conn)
        give_back(client, conn, check_idle_after=1.0)
    state = wire.known_state(conn)
    assert isinstance(state, wire.ConnectionState)
    assert state.used_at > 0  # noted by give_back, read by the next borrow
    assert state.owed == 0
    assert _no_attribute_of_ours(conn)


@pytest.mark.parametrize("build", ["from_url", "django-redis style pool"])
def test_the_state_lives_beside_the_connection_on_a_pool_someone_else_built(redis_db, build):
    """A FastRedis on a pool built outside wurk (django-redis's REDIS_CLIENT_CLASS): plain
    redis-py connections, the same state beside them."""
    if build == "from_url":
        client = FastRedis.from_url(settings.WURK_TEST_REDIS_URL)
    else:
        client = FastRedis(connection_pool=redis.ConnectionPool.from_url(settings.WURK_TEST_REDIS_URL, protocol=2))
    try:
        assert client.set("k", "v") and client.get("k") == b"v"  # FastRedis's own path (either)
        assert send_commands(client, [("GET", "k")], check_idle_after=1.0) == [b"v"]
        conns = [*(connection.idle_stack(client.connection_pool) or [])]
        assert conns, "the connection is kept aside for the next command"
        for conn in conns:
            assert type(conn) is redis.Connection
            assert _no_attribute_of_ours(conn)
            assert wire.known_state(conn).used_at > 0
            if wire.enabled():
                assert wire.known_state(conn).reader is not None  # the fast path read on it
    finally:
        client.close()
        client.connection_pool.disconnect()


def test_a_state_goes_when_its_connection_does(redis_db):
    client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, protocol=2)
    conn = client.connection_pool.get_connection()
    send_on(conn, [("PING",)])
    key = id(conn)
    state = wire.state_of(conn)
    assert wire.known_state(conn) is state
    assert key in wire._states
    client.connection_pool.release(conn)
    client.close()
    del conn, client, state
    gc.collect()
    assert key not in wire._states


def test_what_a_socket_owed_goes_with_it_what_the_connection_is_stays(redis_db):
    client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, protocol=2)
    conn = client.connection_pool.get_connection()
    try:
        send_on(conn, [("SET", "k", "before")])
        send_unanswered(conn, [("SET", "k", "owed")])
        keep_open_first(conn)
        assert wire.owes(conn)
        conn.disconnect()
        assert not wire.owes(conn)  # the reply to the lost write went with the socket
        # the next round trip dials again and reads its own reply, not the old one's
        assert send_on(conn, [("GET", "k"), ("INCR", "n")]) == [b"owed", 1]
        assert wire.state_of(conn).armed  # the push watch's mark is the connection's, not the socket's
        keep_open_first(conn, False)
        assert not wire.state_of(conn).armed
    finally:
        client.connection_pool.release(conn)
        client.close()


def test_set_aside_and_taken_back_are_noted_in_the_state(redis_db):
    client = get_redis("ack", config=get_config())
    pool = client.connection_pool
    conn = taken_back(pool.get_connection())
    set_aside(pool, conn)
    assert wire.state_of(conn).set_aside_at is not None
    again = pool.get_connection()
    assert again is conn  # the pool is last-in first-out
    taken_back(again)
    assert wire.state_of(conn).set_aside_at is None
    pool.release(again)


def test_trim_keeps_the_connection_marked_first_open(redis_db):
    """The push watch's armed connection is the one an idle trim keeps, whichever the pool
    would hand out first (the mark the push watch used to write on the connection)."""
    client = get_redis("trim-test", pool_size=4, config=get_config())
    pool = client.connection_pool
    conns = [pool.get_connection() for _ in range(3)]
    for conn in conns:
        send_on(conn, [("PING",)])
    marked = conns[0]
    keep_open_first(marked)
    for conn in conns:
        pool.release(conn)  # marked first: it ends at the bottom, the others above it
    try:
        trim_idle(keep=1)
        # Read off the socket itself: with the fast path off, an old redis-py cannot tell.
        assert marked._sock is not None
        assert [conn._sock for conn in conns[1:]] == [None, None]
    finally:
        keep_open_first(marked, False)


def test_connection_reset_loses_what_the_old_sockets_owed(redis_db):
    config = get_config()
    client = get_redis(config=config)
    conn = borrow(client)
    send_on(conn, [("SET", "k", "before")])
    send_unanswered(conn, [("SET", "k", "owed")])
    assert wire.owes(conn)
    connection.reset()  # every pool closed, in-use connections too
    assert not wire.owes(conn)
    # A holder of the old client still gets its own replies on the redialled socket.
    assert send_on(conn, [("GET", "k")]) == [b"owed"]
    give_back(client, conn)
    fresh = get_redis(config=config)
    assert fresh is not client
    assert send_commands(fresh, [("GET", "k")]) == [b"owed"]
    fresh_conn = connection.idle_stack(fresh.connection_pool)[-1]
    assert fresh_conn is not conn and wire.state_of(fresh_conn).owed == 0


def _read_report(read_fd: int, pid: int, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 0.1)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    os.close(read_fd)
    if not data:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert data, "the child reported nothing (stuck on a lock its parent held at the fork?)"
    return json.loads(data)


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_starts_with_no_state_and_free_locks_and_its_parent_keeps_its_own(redis_db):
    """RUN-812: a forked child rebuilds its pools and per-process state. It knows nothing
    of its parent's connections (what they owe is the parent's to read), and the pool
    lock another thread of the parent held at the fork is free in the child (a co-hosted
    respawn forks while host threads run: server/child.py relies on it)."""
    config = get_config()
    client = get_redis(config=config)
    conn = borrow(client)
    send_on(conn, [("SET", "parent", "before")])
    send_unanswered(conn, [("SET", "parent", "owed")])
    held, release = threading.Event(), threading.Event()

    def hold_the_pool_lock() -> None:
        with connection._lock:
            held.set()
            release.wait(20)

    holder = threading.Thread(target=hold_the_pool_lock)
    holder.start()
    assert held.wait(5)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            report = {"known": wire.known_state(conn) is not None, "table": len(wire._states)}
            mine = get_redis(config=config)  # takes the pool lock: held forever if copied held
            report["new_client"] = mine is not client
            report["get"] = send_commands(mine, [("GET", "parent")])[0].decode()
            child_conn = connection.idle_stack(mine.connection_pool)[-1]
            report["new_connection"] = child_conn is not conn
            report["fresh"] = wire.state_of(child_conn).owed == 0
            os.write(write_fd, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        report = _read_report(read_fd, pid)
    finally:
        release.set()
        holder.join()
    assert report == {"known": False, "table": 0, "new_client": True, "get": "owed", "new_connection": True,
                      "fresh": True}
    # The parent's state is its own still: it reads the reply it was owed, then its own.
    assert wire.owes(conn)
    assert send_on(conn, [("GET", "parent")]) == [b"owed"]
    give_back(client, conn)
