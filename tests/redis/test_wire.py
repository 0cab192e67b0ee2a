"""Hot-path batches on a connection's socket (RUN-706): same replies and errors as redis-py's path.

The tests that call ``wire.exchange`` exercise the fast path itself whatever the switch
says; the ones that go through ``send_on`` check that it is chosen exactly when
``wire.enabled()`` (the suite also runs with ``WURK_FAST_PATH=0``, see .ci/run).
"""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from wurk_django.redis import wire
from wurk_django.redis.connection import get_redis, send_on


@pytest.fixture
def make_conn(redis_db):
    """Connections from a private pool on the test database; all released and closed afterwards."""
    clients: list[redis.Redis] = []
    taken: list[tuple[redis.Redis, object]] = []

    def make(**options):
        client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, **{"protocol": 2, **options})
        clients.append(client)
        conn = client.connection_pool.get_connection()
        taken.append((client, conn))
        return conn

    yield make
    for client, conn in taken:
        client.connection_pool.release(conn)
    for client in clients:
        client.close()


def test_replies_are_the_raw_values_redis_py_would_read(redis_db, make_conn):
    conn = make_conn()
    assert wire.usable(conn) is wire.enabled()
    replies = wire.exchange(conn, [("RPUSH", "l", b"a", "b", 3), ("LRANGE", "l", 0, -1), ("GET", "missing"),
                                   ("SET", "k", "v"), ("GET", "k")])
    assert replies == [3, [b"a", b"b", b"3"], None, b"OK", b"v"]


def test_a_reply_larger_than_the_read_buffer(redis_db, make_conn):
    conn = make_conn()
    big = b"x" * (3 * 65536 + 7)
    assert wire.exchange(conn, [("SET", "big", big), ("GET", "big"), ("STRLEN", "big")]) == [b"OK", big, len(big)]


def test_error_replies_come_back_in_place_as_redis_py_exceptions(redis_db, make_conn):
    conn = make_conn()
    redis_db.set("text", "1")
    replies = wire.exchange(conn, [("LPUSH", "text", "x"), ("EVALSHA", "0" * 40, 0), ("SET", "after", "1")])
    assert type(replies[0]) is redis.ResponseError and "WRONGTYPE" in str(replies[0])
    assert isinstance(replies[1], redis.exceptions.NoScriptError)
    assert replies[2] == b"OK"
    assert wire.exchange(conn, [("PING",)]) == [b"PONG"]  # still in step with the server


def test_send_on_raises_the_first_error_after_running_the_whole_batch(redis_db, make_conn):
    conn = make_conn()
    redis_db.set("text", "1")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        send_on(conn, [("SET", "before", "1"), ("LPUSH", "text", "x"), ("SET", "after", "1")])
    assert redis_db.get("before") == b"1" and redis_db.get("after") == b"1"
    assert send_on(conn, [("GET", "after")]) == [b"1"]


def test_a_connection_killed_by_the_server_raises_connection_error_then_reconnects(redis_db, make_conn):
    conn = make_conn()
    [client_id] = wire.exchange(conn, [("CLIENT", "ID")])
    redis_db.execute_command("CLIENT", "KILL", "ID", client_id)
    with pytest.raises(redis.ConnectionError):
        wire.exchange(conn, [("PING",)])
    assert conn._sock is None  # disconnected, so redis-py reconnects it on next use
    assert wire.exchange(conn, [("SET", "k", "v"), ("GET", "k")]) == [b"OK", b"v"]
    assert wire.exchange(conn, [("CLIENT", "ID")]) != [client_id]


def test_a_read_timeout_raises_timeout_error_and_the_connection_recovers(redis_db, make_conn):
    conn = make_conn(socket_timeout=0.2)
    with pytest.raises(redis.TimeoutError):
        wire.exchange(conn, [("BLPOP", "nothing-here", 2)])
    assert wire.exchange(conn, [("PING",)]) == [b"PONG"]  # a new connection: no stale BLPOP reply


def test_a_plain_socket_waits_with_the_kernels_timeout_and_redis_py_still_reads_it(redis_db, make_conn):
    import socket
    import struct
    import sys

    conn = make_conn(socket_timeout=1.5)
    assert wire.exchange(conn, [("PING",)]) == [b"PONG"]
    if not sys.platform.startswith("linux"):
        pytest.skip("kernel timeouts are used on Linux only")
    sock = conn._sock
    assert sock.gettimeout() is None  # no poll() before each send and recv
    seconds, micros = struct.unpack("ll", sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16))
    assert (seconds, micros) == (1, 500000)
    # redis-py's own path on the same connection, with and without a timeout of its own
    conn.send_command("SET", "k", "v")
    assert conn.read_response() == b"OK"
    assert conn.can_read(timeout=0) is False
    sock.settimeout(1.5)  # as redis-py 5's timed reads leave it
    assert wire.exchange(conn, [("GET", "k")]) == [b"v"]
    assert sock.gettimeout() is None  # taken off again


def test_a_value_hiredis_cannot_pack_gets_redis_pys_data_error(redis_db, make_conn):
    conn = make_conn()
    with pytest.raises(redis.DataError, match="bool.*SET.*True"):
        wire.exchange(conn, [("SET", "flag", True)])
    assert redis_db.get("flag") is None
    assert wire.exchange(conn, [("PING",)]) == [b"PONG"]


def test_resp3_connections_take_redis_pys_path(redis_db, make_conn):
    conn = make_conn(protocol=3)
    assert not wire.usable(conn)
    assert send_on(conn, [("SET", "k", "v"), ("GET", "k")]) == [b"OK", b"v"]
    assert wire.known_state(conn) is None or wire.known_state(conn).reader is None


def test_the_selected_database_is_the_one_written(redis_db, make_conn):
    conn = make_conn()
    wire.exchange(conn, [("SET", "where", "here")])
    assert redis_db.get("where") == b"here"  # same db as the URL: redis-py's handshake ran first


def test_wurk_pools_speak_resp2_so_the_hot_path_applies(redis_db):
    pool = get_redis().connection_pool
    conn = pool.get_connection()
    try:
        assert str(conn.protocol) == "2"
        assert wire.usable(conn) is wire.enabled()
    finally:
        pool.release(conn)


def test_resp3_can_still_be_asked_for(redis_db):
    from django.test import override_settings

    with override_settings(WURK={**settings.WURK, "REDIS": {"URL": settings.WURK_TEST_REDIS_URL,
                                                             "OPTIONS": {"protocol": 3}}}):
        client = get_redis("resp3-test")
        conn = client.connection_pool.get_connection()
        try:
            assert str(conn.protocol) == "3" and not wire.usable(conn)
            assert send_on(conn, [("SET", "k", "v"), ("GET", "k")]) == [b"OK", b"v"]
        finally:
            client.connection_pool.release(conn)


# -- writing without letting go of the GIL (job code's single commands) ----------------------

linux_only = pytest.mark.skipif(wire._send is None, reason="libc send through ctypes is used on Linux only")


@pytest.fixture
def sends(monkeypatch):
    """The lengths each call of the GIL-holding send was asked to write."""
    calls: list[int] = []
    real = wire._send

    def counted(fd, data, length, flags):
        calls.append(length)
        return real(fd, data, length, flags)

    monkeypatch.setattr(wire, "_send", counted)
    return calls


@linux_only
def test_a_write_holding_the_gil_gives_the_same_replies(redis_db, make_conn, sends):
    conn = make_conn()
    assert wire.exchange(conn, [("SET", "k", "v"), ("GET", "k"), ("INCR", "n")], True) == [b"OK", b"v", 1]
    assert len(sends) == 1
    assert wire.exchange(conn, [("GET", "k")]) == [b"v"]  # the default keeps sendall
    assert len(sends) == 1


@linux_only
def test_a_batch_over_the_limit_goes_through_sendall(redis_db, make_conn, sends):
    conn = make_conn()
    big = b"x" * (wire.HOLD_GIL_MAX + 1)
    assert wire.exchange(conn, [("SET", "big", big), ("STRLEN", "big")], True) == [b"OK", len(big)]
    assert sends == []


@linux_only
@pytest.mark.parametrize("took", [-1, 0, 5], ids=["refused", "nothing", "a-part"])
def test_what_the_socket_does_not_take_at_once_is_sent_by_sendall(redis_db, make_conn, monkeypatch, took):
    real = wire._send

    def partial(fd, data, length, flags):
        return real(fd, data, took, flags) if took > 0 else took

    monkeypatch.setattr(wire, "_send", partial)
    conn = make_conn()
    assert wire.exchange(conn, [("SET", "k", "value"), ("GET", "k")], True) == [b"OK", b"value"]
    assert redis_db.get("k") == b"value"


@linux_only
def test_a_killed_connection_raises_connection_error_when_written_holding_the_gil(redis_db, make_conn):
    conn = make_conn()
    [client_id] = wire.exchange(conn, [("CLIENT", "ID")], True)
    redis_db.execute_command("CLIENT", "KILL", "ID", client_id)
    with pytest.raises(redis.ConnectionError):
        wire.exchange(conn, [("INCR", "n")], True)
    assert conn._sock is None
    assert wire.exchange(conn, [("INCR", "n")], True) == [1]  # reconnected; the first INCR never ran


class _PeerThatNeverReads:
    """Just enough of a redis-py connection for exchange(): a Unix socket pair whose
    far end reads nothing, so the near end's send buffer can be filled."""

    def __init__(self, timeout: float) -> None:
        import socket

        self._sock, self.peer = socket.socketpair()
        self._sock.settimeout(timeout)
        self.disconnected = False

    def connect(self) -> None:
        raise AssertionError("exchange() must not reconnect here")

    def disconnect(self) -> None:
        self.disconnected = True
        self._sock.close()
        self.peer.close()


@linux_only
def test_a_full_send_buffer_waits_without_the_gil_and_times_out():
    import threading
    import time

    conn = _PeerThatNeverReads(timeout=0.5)
    conn._sock.setblocking(False)
    try:
        while True:
            conn._sock.send(b"x" * 65536)
    except BlockingIOError:
        pass  # full
    conn._sock.settimeout(0.5)
    longest = 0.0  # the longest the other thread went without running
    stop = threading.Event()

    def count() -> None:
        nonlocal longest
        last = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now

    counter = threading.Thread(target=count)
    counter.start()
    started = time.monotonic()
    try:
        with pytest.raises(redis.TimeoutError):
            wire.exchange(conn, [("PING",)], True)
    finally:
        stop.set()
        counter.join()
        conn.peer.close()  # closed already if exchange() disconnected; this test's own either way
        conn._sock.close()
    assert time.monotonic() - started >= 0.4  # waited for room, as a blocking write does
    assert longest < 0.25  # and let the other thread run meanwhile
    assert conn.disconnected


@pytest.mark.parametrize("protocol", [2, 3])  # 3: redis-py's own path
def test_unanswered_writes_land_and_their_replies_are_dropped_by_the_next_round_trip(redis_db, make_conn, protocol):
    """Issue 28 item 1: a fetch slot names the job it starts in a write it does not wait for."""
    from tests.support import wait_for
    from wurk_django.redis.connection import send_unanswered, settle

    conn = make_conn(protocol=protocol)
    send_on(conn, [("PING",)])  # connected
    send_unanswered(conn, [("SET", "marker", "1")])
    send_unanswered(conn, [("SET", "marker", "2"), ("INCR", "not-a-number-key")])
    # Landed before any reply was read, in order.
    wait_for(lambda: redis_db.get("marker") == b"2", timeout=10, message="the unanswered writes to land")
    assert wire.owes(conn)
    assert send_on(conn, [("GET", "marker"), ("INCR", "n")]) == [b"2", 1]
    assert not wire.owes(conn)
    send_unanswered(conn, [("SET", "marker", "3")])
    settle(conn)  # before the connection goes back to its pool
    assert not wire.owes(conn)
    assert send_on(conn, [("GET", "marker")]) == [b"3"]


@pytest.mark.parametrize("protocol", [2, 3])  # 3: redis-py's own path (it ignores "more")
def test_writes_sent_as_more_to_follow_leave_with_the_next_write_or_the_settle(redis_db, make_conn, protocol):
    """The start markers of jobs fetched ahead wait in the socket's buffer ("more follows")
    and go out with the next fetch; the settle before the pool takes the connection back
    pushes them too, rather than wait for replies to writes Redis has not yet received."""
    from wurk_django.redis.connection import send_unanswered, settle

    conn = make_conn(protocol=protocol, socket_timeout=5)
    send_on(conn, [("PING",)])  # connected
    send_unanswered(conn, [("SET", "marker", "1")], more=True)
    send_unanswered(conn, [("SET", "marker", "2")], more=True)
    assert send_on(conn, [("GET", "marker")]) == [b"2"]  # the next write carried them first
    send_unanswered(conn, [("SET", "marker", "3")], more=True)
    settle(conn)  # pushes them out itself (else Linux sends them on its own only ~200 ms later)
    assert not wire.owes(conn)
    assert redis_db.get("marker") == b"3"
    assert send_on(conn, [("GET", "marker")]) == [b"3"]  # still open: the settle read its replies


def test_replies_owed_on_a_closed_socket_are_forgotten(redis_db, make_conn):
    from wurk_django.redis.connection import send_unanswered

    conn = make_conn()
    send_unanswered(conn, [("SET", "marker", "1")])
    conn.disconnect()
    assert not wire.owes(conn)
    assert send_on(conn, [("GET", "marker")]) == [b"1"]


# -- polling for a push's reply (spin) ---------------------------------------------------------

@pytest.fixture
def spin_allowed(monkeypatch):
    """Polling allowed in this process for the test (an in-process worker earlier in the
    session switches it off for good)."""
    monkeypatch.setattr(wire, "_spin_allowed", True)


def _spin_state(conn):
    return wire._socket_state(conn)[1]


def test_a_reply_polled_for_is_the_reply_redis_py_would_read(redis_db, make_conn, spin_allowed):
    conn = make_conn()
    big = b"y" * (3 * 65536 + 7)  # more than one read of the buffer, polled for piece by piece
    # A generous polling budget: a loaded machine may answer later than 10 ms, which would
    # count as a miss; what is checked here is the replies read while polling.
    replies = wire.exchange(conn, [("SET", "big", big), ("GET", "big"), ("INCR", "n"), ("HGET", "big", "f")],
                            True, 2.0)
    assert replies[:3] == [b"OK", big, 1]
    assert isinstance(replies[3], redis.ResponseError) and "WRONGTYPE" in str(replies[3])
    state = _spin_state(conn)
    assert (state.spin_misses, state.spin_skip) == (0, 0)


def test_replies_that_come_too_late_make_the_connection_poll_less_often(redis_db, make_conn, spin_allowed):
    conn = make_conn()
    late = ("BLPOP", "nothing-here", "0.05")  # the server answers after 50 ms: later than 100 us of polling
    state = None
    for misses, skip in [(1, 1), (2, 3), (3, 7)]:
        assert wire.exchange(conn, [late], True, 0.0001) == [None]
        state = _spin_state(conn)
        assert (state.spin_misses, state.spin_skip) == (misses, skip)
        for left in range(skip - 1, -1, -1):  # the next round trips do not poll at all
            assert wire.exchange(conn, [late], True, 0.0001) == [None]
            assert (state.spin_misses, state.spin_skip) == (misses, left)
    # Prompt replies again (a generous budget, so a busy machine cannot make this one late):
    # one that comes in time resets the count.
    assert wire.exchange(conn, [("PING",)], True, 1.0) == [b"PONG"]
    assert (state.spin_misses, state.spin_skip) == (0, 0)


def test_the_skip_is_capped(redis_db, make_conn, spin_allowed):
    conn = make_conn()
    wire.exchange(conn, [("PING",)])
    state = _spin_state(conn)
    state.spin_misses, state.spin_skip = 10, 0
    assert wire.exchange(conn, [("BLPOP", "nothing-here", "0.02")], True, 0.0001) == [None]
    assert (state.spin_misses, state.spin_skip) == (10, wire.SPIN_SKIP_MAX)


def test_without_spin_or_where_it_is_off_the_reply_is_slept_for(redis_db, make_conn, monkeypatch):
    conn = make_conn()
    late = ("BLPOP", "nothing-here", "0.02")
    monkeypatch.setattr(wire, "_spin_allowed", True)
    assert wire.exchange(conn, [late], True) == [None]  # spin not asked for
    state = _spin_state(conn)
    assert (state.spin_misses, state.spin_skip) == (0, 0)
    wire.spin_off()  # monkeypatch puts the switch back afterwards
    assert not wire.spin_allowed()
    assert wire.exchange(conn, [late], True, 0.0001) == [None]
    assert (state.spin_misses, state.spin_skip) == (0, 0)


def test_a_connection_killed_while_polled_for_raises_connection_error(redis_db, make_conn, spin_allowed):
    conn = make_conn()
    [client_id] = wire.exchange(conn, [("CLIENT", "ID")], True, 0.01)
    redis_db.execute_command("CLIENT", "KILL", "ID", client_id)
    with pytest.raises(redis.ConnectionError):
        wire.exchange(conn, [("INCR", "n")], True, 0.01)
    assert conn._sock is None
    assert wire.exchange(conn, [("INCR", "n")], True, 0.01) == [1]
