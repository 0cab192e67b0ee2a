"""wurk_django.redis_client(): the Redis client for job code, on the fast path where it can be.

With the fast path switched off (the suite's ``WURK_FAST_PATH=0`` run, .ci/run) every
command goes through redis-py's own ``execute_command``; the replies must not change.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis
from django.conf import settings

from wurk_django import redis_client
from wurk_django.conf import Config
from wurk_django.redis import app as app_redis
from wurk_django.redis import cluster, connection, wire
from wurk_django.redis.app import AppRedis


@pytest.fixture
def app(redis_db) -> AppRedis:
    return redis_client()


@pytest.fixture
def slow_path_calls(monkeypatch) -> list[tuple]:
    """Every command of an AppRedis that went through redis-py's own execute_command."""
    calls: list[tuple] = []
    original = redis.Redis.execute_command

    def counting(self, *args, **options):
        if isinstance(self, AppRedis):
            calls.append(args)
        return original(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", counting)
    return calls


def test_is_one_client_per_process_on_the_configured_database(app, redis_db):
    assert redis_client() is app
    app.set("here", "1")
    assert redis_db.get("here") == b"1"


@pytest.mark.parametrize("decode", [False, True])
def test_replies_match_a_plain_redis_py_client(redis_db, slow_path_calls, decode):
    app = redis_client(decode_responses=decode)
    plain = redis.Redis.from_url(settings.WURK["REDIS_URL"], decode_responses=decode, protocol=2)
    try:
        for client in (plain, app):
            redis_db.flushdb()
            results = [
                client.set("s", "v"), client.get("s"), client.get("missing"), client.incr("n"), client.incrbyfloat("f", 0.5),
                client.hset("h", mapping={"a": "1", "b": "2"}), client.hgetall("h"),
                client.zadd("z", {"x": 1.5, "y": 2}), client.zrange("z", 0, -1, withscores=True),
                client.rpush("l", "a", "b", "c"), client.lrange("l", 0, -1), client.exists("s", "n", "missing"),
                client.expire("s", 100), client.ttl("s") > 0, client.sadd("set", "m"), client.smembers("set"),
                client.config_get("maxmemory-policy"), client.type("z"), client.ping(), client.dbsize(),
                client.eval("return {1, 'two'}", 0), client.set("nx", "1", nx=True), client.set("nx", "2", nx=True),
            ]
            if client is plain:
                expected = results
        assert results == expected
    finally:
        plain.close()
    if wire.enabled():
        assert slow_path_calls == []  # every one of those took the fast path
    else:
        # Every one went through redis-py; so did the client's once-per-process question
        # whether its server is a Redis Cluster node (issue 46), which is not one of them.
        asked = [call for call in slow_path_calls if tuple(call[:2]) != ("INFO", "cluster")]
        assert len(asked) == len(expected)


def test_error_replies_raise_redis_py_classes(app):
    app.rpush("l", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        app.get("l")
    with pytest.raises(redis.exceptions.NoScriptError):
        app.evalsha("0" * 40, 0)
    assert app.get("missing") is None  # the connection is still in step after the errors


def test_arguments_redis_py_refuses_still_get_its_error(app, slow_path_calls):
    with pytest.raises(redis.DataError):
        app.set("k", None)
    with pytest.raises(redis.DataError):
        app.set("k", True)
    assert [call[0] for call in slow_path_calls] == ["SET", "SET"]


def test_a_connection_closed_while_idle_is_redialled_and_the_command_runs_once(app, redis_db, monkeypatch):
    monkeypatch.setattr(app_redis, "IDLE_CHECK", 0.05)
    assert app.incr("n") == 1
    own = app.client_id()
    assert redis_db.client_kill_filter(_id=own) == 1
    time.sleep(0.1)
    assert app.incr("n") == 2  # neither lost nor sent twice
    assert app.client_id() != own


def test_a_connection_closed_right_after_use_raises_and_is_not_replayed(app, redis_db):
    assert app.incr("n") == 1
    own = app.client_id()
    assert redis_db.client_kill_filter(_id=own) == 1
    if not wire.enabled():
        # redis-py's pool checks every connection it hands out, so it finds the closed
        # socket before writing: the command runs once, on a new connection.
        assert app.incr("n") == 2
        assert redis_db.get("n") == b"2"
        return
    with pytest.raises(redis.ConnectionError):
        app.incr("n")  # used under IDLE_CHECK ago: not checked, and not sent again
    assert redis_db.get("n") == b"1"
    assert app.incr("n") == 2  # the next command dials again


def test_an_unreachable_redis_raises_connection_error():
    app = redis_client(config=Config(raw={"REDIS_URL": "redis://127.0.0.1:1/0"}))
    with pytest.raises(redis.ConnectionError):
        app.incr("n")


def test_the_client_is_remembered_on_its_config_until_an_answer_changes(redis_db):
    # Job code calls redis_client() per command: the answer is kept on the config, and
    # forgotten when the pools are reset or the cluster answers are (tests reuse URLs).
    config = Config(raw={"REDIS_URL": settings.WURK["REDIS_URL"]})
    first = redis_client(config=config)
    assert redis_client(config=config) is first and "app" in config.memo
    connection.reset()
    second = redis_client(config=config)
    assert second is not first
    assert second.incr("n") == 1
    cluster.forget()
    assert cluster.known(config.redis_target) is None
    assert redis_client(config=config) is second
    assert cluster.known(config.redis_target) is False  # asked the server again


def test_a_client_for_a_server_not_asked_yet_is_not_remembered():
    # Whether it is a cluster node is asked again by the next call; a client kept now
    # would stay a single-node client once the server answers that it is one.
    config = Config(raw={"REDIS_URL": "redis://127.0.0.1:1/0"})
    redis_client(config=config)
    assert "app" not in config.memo


def test_threads_share_it_and_pipelines_still_find_a_connection(app, redis_db):
    errors = []

    def work():
        try:
            for _ in range(200):
                app.incr("n")
            pipe = app.pipeline()
            pipe.incr("p").incr("p")
            pipe.execute()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert redis_db.get("n") == b"2400"
    assert redis_db.get("p") == b"24"
    pool = app.connection_pool
    assert len(pool._connections) <= pool.max_connections


FORK_CHECK = """
import os, sys
from wurk_django import redis_client
from wurk_django.conf import Config

config = Config(raw={"REDIS_URL": sys.argv[1]})
app = redis_client(config=config)
app.incr("n")
pid = os.fork()
if pid == 0:
    child = redis_client(config=config)
    os._exit(0 if child is not app and child.incr("n") == 2 else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert app.incr("n") == 3  # the parent's connection was not disturbed by the child
print("ok")
"""


def test_a_forked_child_gets_its_own_client_and_connections(redis_db):
    # In a fresh, single-threaded interpreter: forking the test process itself (threads
    # running) is what Python warns about.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORK_CHECK, settings.WURK["REDIS_URL"]],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert redis_db.get("n") == b"3"


@pytest.mark.skipif(wire._send is None, reason="libc send through ctypes is used on Linux only")
def test_single_commands_are_written_without_letting_go_of_the_gil(app, monkeypatch):
    written: list[int] = []
    real = wire._send
    monkeypatch.setattr(wire, "_send", lambda fd, data, length, flags: written.append(length) or real(fd, data, length, flags))
    assert app.set("k", "v") is True
    assert app.get("k") == b"v"
    expected = 2 if wire.enabled() else 0  # switched off: redis-py's own sendall, no ctypes
    assert len(written) == expected
    with app.pipeline() as pipe:  # redis-py's own path: its usual write
        pipe.get("k").incr("n")
        assert pipe.execute() == [b"v", 1]
    assert len(written) == expected


# --- the one-call path of a recently used connection (issue 48 item 2) ---------------------------


@pytest.fixture
def full_trips(monkeypatch) -> list[int]:
    """How many commands of AppRedis went the full way (send_commands) instead of wire.round_trip."""
    trips: list[int] = []
    real = connection.send_commands
    monkeypatch.setattr(connection, "send_commands",
                        lambda client, commands, **kw: trips.append(len(commands)) or real(client, commands, **kw))
    return trips


@pytest.mark.skipif(wire._send is None, reason="the one-call path writes with libc send (Linux)")
def test_a_connection_used_a_moment_ago_takes_one_call_and_nil_is_not_mistaken_for_declined(app, full_trips):
    if not wire.enabled():
        pytest.skip("the fast path is switched off: every command goes through redis-py")
    assert app.incr("n") == 1  # on a connection not used yet, the full way, which sets it up
    went_full = len(full_trips)
    assert went_full <= 1
    assert app.get("missing") is None  # a nil reply is a reply, not "not served"
    assert app.incr("n") == 2 and app.get("n") == b"2"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        app.lpush("n", "x")
    assert app.incr("n") == 3  # still in step after the error reply
    assert len(full_trips) == went_full  # none of those five went the full way


def test_round_trip_declines_a_connection_it_cannot_serve_and_sends_nothing(app, redis_db):
    if not wire.enabled():
        pytest.skip("the fast path is switched off")
    app.incr("n")
    conn = app.connection_pool.get_connection()
    try:
        app.connection_pool.release(conn)
        conn = connection.borrow(app)
        connection.send_on(conn, [("INCR", "n")], hold_gil=True)  # set up and used just now
        wire.state_of(conn).used_at = time.monotonic()
        assert wire.round_trip(conn, ("INCR", "n"), 1.0) == 3  # served
        wire.state_of(conn).used_at = time.monotonic() - 5  # idle: Redis may have closed it meanwhile
        assert wire.round_trip(conn, ("INCR", "n"), 1.0) is wire.NOT_SERVED
        wire.state_of(conn).used_at = time.monotonic()
        connection.send_unanswered(conn, [("INCR", "n")])  # a reply owed: the full way reads it first
        assert wire.round_trip(conn, ("INCR", "n"), 1.0) is wire.NOT_SERVED
        connection.settle(conn)
        assert redis_db.get("n") == b"4"  # 3 and the owed one: nothing else was sent
        conn._sock.settimeout(5.0)  # a Python-level timeout (redis-py may put one back): not held-GIL writable
        assert wire.round_trip(conn, ("INCR", "n"), 1.0) is wire.NOT_SERVED
        conn.disconnect()
        assert wire.round_trip(conn, ("INCR", "n"), 1.0) is wire.NOT_SERVED
        assert redis_db.get("n") == b"4"
    finally:
        connection.give_back(app, conn)


def test_a_demoted_primary_is_refused_on_the_one_call_path_and_the_connection_closed():
    from tests.local_redis import LocalRedis, free_port
    from wurk_django.redis.errors import PrimaryRefused

    if not wire.enabled():
        pytest.skip("the fast path is switched off: redis-py raises its own ReadOnlyError")
    port = free_port()
    server = LocalRedis("--port", str(port), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1", str(free_port()))
    probe = redis.Redis(port=port)
    server.start(probe.ping)
    try:
        app = redis_client(config=Config(raw={"REDIS_URL": f"redis://127.0.0.1:{port}/0"}))
        assert app.get("k") is None and app.get("k") is None  # reads work; the second on the one-call path
        own = app.client_id()
        with pytest.raises(PrimaryRefused, match="read only replica"):
            app.set("k", "v")
        assert app.client_id() != own  # closed before it went back: the next command dialled again
    finally:
        probe.close()
        server.stop()
        connection.reset()


def _stacked_state(app) -> wire.ConnectionState:
    """The state of the connection on top of ``app``'s idle stack (the one a lone thread reuses)."""
    return wire.state_of(connection._idle_stacks[id(app.connection_pool)][-1])


@pytest.fixture
def yielding(app, monkeypatch):
    """``app`` on a connection set up and used just now, with no misses of the look after
    the yield counted yet, in a process where other threads are running jobs."""
    if wire._recv is None or wire._sched_yield is None:
        pytest.skip("libc recv through ctypes: Linux only")
    if not wire.enabled():
        pytest.skip("the fast path is switched off")
    app.incr("n")  # sets the connection up (the full way, or round_trip if an earlier test used it)
    state = _stacked_state(app)
    state.used_at = time.monotonic()
    state.yield_skip = state.yield_misses = 0
    monkeypatch.setattr(wire, "busy_threads", 2)
    return app


def test_a_reply_there_after_the_yield_is_read_without_blocking(yielding, monkeypatch):
    # Other threads ran long enough for Redis to answer: the look after the yield finds the reply.
    monkeypatch.setattr(wire, "_sched_yield", lambda: time.sleep(0.005))
    looks: list[int] = []
    real = wire._recv
    monkeypatch.setattr(wire, "_recv", lambda *a: looks.append(1) or real(*a))
    assert [yielding.incr("n") for _ in range(10)] == list(range(2, 12))
    assert yielding.get("missing") is None
    state = _stacked_state(yielding)
    assert len(looks) == 11 and state.yield_misses == 0 and state.yield_skip == 0


def test_a_look_that_finds_nothing_doubles_the_round_trips_that_skip_it(yielding, monkeypatch):
    looks: list[int] = []
    # Nobody else wanted the GIL after all: the reply is never there yet (EAGAIN).
    monkeypatch.setattr(wire, "_recv", lambda *a: looks.append(1) or -1)
    assert [yielding.incr("n") for _ in range(20)] == list(range(2, 22))  # each read by the blocking recv
    assert len(looks) == 4  # round trips 1, 3, 7 and 15: each miss skips 1, 3, 7, then 15 round trips
    state = _stacked_state(yielding)
    assert state.yield_misses == 4 and state.yield_skip == 15 - 5


def test_a_lone_busy_thread_never_yields(yielding, monkeypatch):
    yields: list[int] = []
    monkeypatch.setattr(wire, "_sched_yield", lambda: yields.append(1))
    for busy in (0, 1):  # a web process, a worker running one job
        monkeypatch.setattr(wire, "busy_threads", busy)
        assert yielding.incr("n") == 2 + busy
    assert yields == []
    monkeypatch.setattr(wire, "busy_threads", 2)
    assert yielding.incr("n") == 4
    assert yields == [1]
