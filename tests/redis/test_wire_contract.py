"""What wire.py assumes of redis-py and hiredis, checked on the redis-py this suite runs
with (CI installs the oldest and the newest supported, constraints/redis-*.txt).

These tests call the fast path directly, whatever ``WURK_FAST_PATH`` says, so both CI
suites check the assumptions; the fallback tests break one assumption on purpose and
check that redis-py's own calls are then chosen and give the same results.
"""

from __future__ import annotations

import logging
import socket
import ssl

import hiredis
import pytest
import redis
import redis.client
import redis.connection
from django.conf import settings
from django.test import override_settings

from tests.redis import test_wire
from tests.support import ROOT
from wurk_django import conf, redis_client
from wurk_django.redis import connection, wire

DOCS = ROOT / "docs" / "redis.md"
#: The fixture of tests/redis/test_wire.py: connections from a private RESP2 pool, closed afterwards.
make_conn = test_wire.make_conn


@pytest.fixture
def decided_again():
    """wire's once-per-process decision is forgotten before and after the test, so a
    test may change what it depends on and the rest of the suite decides afresh."""
    wire.reset()
    yield
    wire.reset()
    connection.reset()  # clients built meanwhile (AppRedis reads the decision once) go too


# -- the assumptions, on this redis-py ---------------------------------------------------------

def test_every_assumption_holds_on_this_redis_py():
    assert wire.assumption_problem() is None, f"redis-py {redis.__version__}"


def test_a_connection_keeps_its_socket_and_parser_where_the_fast_path_looks(make_conn):
    conn = make_conn()
    conn.connect()
    assert isinstance(conn._sock, (socket.socket, ssl.SSLSocket))
    for name in ("sendall", "recv_into", "fileno", "gettimeout", "settimeout", "setsockopt"):
        assert callable(getattr(conn._sock, name))
    assert isinstance(conn._parser.parse_error("READONLY You can't write against a read only replica."),
                      redis.exceptions.ReadOnlyError)
    assert type(conn._parser.parse_error("WRONGTYPE Operation against a key")) is redis.ResponseError
    assert str(conn.protocol) == "2" and conn.encoder.decode_responses is False
    conn.disconnect()
    assert conn._sock is None  # what ready() and maybe_connected() read


def test_redis_py_connect_returns_at_once_on_a_connected_socket(make_conn):
    """The fallback of ready() calls connect() on every batch."""
    conn = make_conn()
    conn.connect()
    sock = conn._sock
    conn.connect()
    assert conn._sock is sock


COMMANDS = [
    ("SET", "key", "value"),
    ("SET", "k\u00e9y \u2603", "\u00fcnic\u00f8de \U0001f600"),
    ("SET", b"bin\x00\r\nkey", b"\x00\xff\r\n$3\r\n"),
    ("ZADD", "z", 1.5, "a", -2, "b", 0, "c", 1e-07, "d", 1000000000000000.5, "e", 1e300, "f"),
    ("INCRBY", "n", -9223372036854775808),
    ("SET", "empty", ""),
    ("SET", "big", b"x" * 70_000),  # over redis-py's buffer cutoff: packed in several pieces
    ("RPUSH", "l", *[str(i) for i in range(300)]),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c[0]) + str(len(c)))
def test_hiredis_packs_the_bytes_redis_py_packs(command, make_conn):
    conn = make_conn()
    ours = hiredis.pack_command(command)
    assert ours == b"".join(conn.pack_command(*command))  # redis-py's path, whatever packer it picked
    if hasattr(redis.connection, "PythonRespSerializer"):  # and its pure-Python packer, the reference
        python = redis.connection.PythonRespSerializer(6000, conn.encoder.encode)
        assert ours == b"".join(python.pack(*command))


# Replies of every RESP2 shape: status, bulk, nil, integer, array, nested array, empty
# array, errors of several redis-py classes, a reply larger than one socket read.
SCRIPT_NESTED = "return {1, 'two', {3, {'four'}}, false, redis.status_reply('FINE')}"
SCRIPT_ERROR = "return redis.error_reply('MYERR custom failure')"
READ_BATCH = [
    ("PING",),
    ("SET", "s", "v\u00e9"),
    ("GET", "s"),
    ("GET", "missing"),
    ("INCR", "n"),
    ("INCRBYFLOAT", "f", "0.25"),
    ("RPUSH", "l", "a", "\u00e9".encode(), "c"),
    ("LRANGE", "l", 0, -1),
    ("LRANGE", "nothing", 0, -1),
    ("HSET", "h", "a", "1", "b", "2"),
    ("HGETALL", "h"),
    ("ZADD", "z", 1.5, "x", 2, "y"),
    ("ZRANGE", "z", 0, -1, "WITHSCORES"),
    ("EVAL", SCRIPT_NESTED, 0),
    ("EVAL", SCRIPT_ERROR, 0),
    ("EVALSHA", "0" * 40, 0),
    ("LPUSH", "s", "x"),
    ("SET", "big", b"y" * 200_000),
    ("GET", "big"),
    ("UNKNOWNCOMMAND",),
    ("CONFIG", "GET", "maxmemory-policy"),
    ("EXISTS", "s", "n", "missing"),
]


def _comparable(replies: list) -> list:
    """Error replies compared by class and text (two exception objects are never equal)."""
    return [(type(r), str(r)) if isinstance(r, Exception) else r for r in replies]


def _through_redis_py(conn, commands: list[tuple]) -> list:
    conn.send_packed_command(conn.pack_commands(commands), False)
    replies = []
    for _ in commands:
        try:
            replies.append(conn.read_response())
        except redis.ResponseError as exc:
            replies.append(exc)
    return replies


@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
def test_reading_through_the_fast_path_equals_reading_through_redis_py(redis_db, make_conn, decode):
    theirs_conn = make_conn(decode_responses=decode)
    ours_conn = make_conn(decode_responses=decode)
    theirs = _comparable(_through_redis_py(theirs_conn, READ_BATCH))
    redis_db.flushdb()
    ours = _comparable(wire.exchange(ours_conn, READ_BATCH))
    assert ours == theirs
    # spot checks, so that two equally wrong paths cannot pass
    assert theirs[0] == (b"PONG" if not decode else "PONG")
    assert theirs[13][0] == 1 and theirs[13][3] is None
    assert theirs[14] == (redis.ResponseError, "MYERR custom failure")
    assert theirs[15][0] is redis.exceptions.NoScriptError
    assert len(theirs[18]) == 200_000


def test_redis_py_and_the_fast_path_can_take_turns_on_one_connection(make_conn):
    conn = make_conn()
    assert wire.exchange(conn, [("SET", "k", "1")]) == [b"OK"]
    assert _through_redis_py(conn, [("INCR", "k"), ("GET", "k")]) == [2, b"2"]
    assert wire.exchange(conn, [("INCR", "k"), ("GET", "k")]) == [3, b"3"]


def test_the_response_callbacks_make_what_redis_py_returns(redis_db):
    """finish_reply() stands in for Redis.parse_response: same options, same callbacks."""
    client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, protocol=2)
    try:
        conn = client.connection_pool.get_connection()
        try:
            client.zadd("z", {"a": 1.5})
            [raw] = wire.exchange(conn, [("ZRANGE", "z", 0, -1, "WITHSCORES")])
            assert wire.finish_reply(client, "ZRANGE", raw, {"withscores": True, "score_cast_func": float}) \
                == client.zrange("z", 0, -1, withscores=True) == [(b"a", 1.5)]
            [error] = wire.exchange(conn, [("EVALSHA", "0" * 40, 0)])
            with pytest.raises(redis.exceptions.NoScriptError):
                wire.finish_reply(client, "EVALSHA", error, {})
            assert wire.finish_reply(client, "GET", error, {redis.client.EMPTY_RESPONSE: "fallback"}) == "fallback"
            assert wire.skips_decoding({redis.client.NEVER_DECODE: []})
        finally:
            client.connection_pool.release(conn)
    finally:
        client.close()


# -- the switch --------------------------------------------------------------------------------

def test_the_environment_variable_switches_it_off_with_one_info_line(decided_again, monkeypatch, caplog):
    monkeypatch.setenv(wire.ENV_SWITCH, "0")
    with caplog.at_level(logging.INFO, logger="wurk_django.redis"):
        assert not wire.enabled()
        assert not wire.enabled()  # decided once
    assert wire.why_not() == "switched off (WURK_FAST_PATH=0)"
    lines = [r for r in caplog.records if "fast path" in r.getMessage()]
    assert [r.levelname for r in lines] == ["INFO"]


def test_the_setting_switches_it_off_and_the_environment_wins(decided_again, monkeypatch):
    monkeypatch.delenv(wire.ENV_SWITCH, raising=False)
    with override_settings(WURK={**settings.WURK, "FAST_PATH": False}):
        assert not wire.enabled() and wire.why_not() == 'switched off (WURK["FAST_PATH"])'
        wire.reset()
        monkeypatch.setenv(wire.ENV_SWITCH, "1")
        assert wire.enabled() and wire.why_not() is None
    assert conf.problems({"FAST_PATH": "no"})  # manage.py check refuses anything but a bool
    assert not conf.problems({"FAST_PATH": False})


# -- the fallback, when an assumption breaks ---------------------------------------------------

def _renamed_socket(monkeypatch):
    """A redis-py whose connections keep their socket under another name."""

    class Renamed(redis.connection.Connection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.__dict__["_socket"] = self.__dict__.pop("_sock")

    # Only the check builds connections from the module attribute; the pools already
    # bound the real class, which keeps working for redis-py's own calls.
    monkeypatch.setattr(redis.connection, "Connection", Renamed)
    return "no _sock attribute"


def _parser_without_errors(monkeypatch):
    """A redis-py whose reply parser no longer makes exceptions out of error lines."""

    class Bare(redis.connection.Connection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._parser = object()

    monkeypatch.setattr(redis.connection, "Connection", Bare)
    return "_parser.parse_error"


def _hiredis_missing(monkeypatch):
    monkeypatch.setattr(wire, "hiredis", None)
    return "hiredis is not installed"


def _float_packed_otherwise(monkeypatch):
    """A hiredis that writes a float differently from redis-py."""
    real = hiredis.pack_command

    def pack(command):
        return real(tuple(f"{v:.2f}" if isinstance(v, float) else v for v in command))

    monkeypatch.setattr(wire.hiredis, "pack_command", pack)
    return "hiredis packs"


def _workload() -> list:
    """Pushes and fetch-style batches through connection.send_commands/send_on, and job
    code's commands through redis_client(), as comparable values."""
    from wurk_django.redis.connection import get_redis, send_commands, send_on

    client = get_redis()
    out: list = []
    out.append(_comparable(send_commands(client, [("RPUSH", "q", "a", "b"), ("LMOVE", "q", "p", "LEFT", "RIGHT"),
                                                  ("EVALSHA", "0" * 40, 0), ("LRANGE", "p", 0, -1)],
                                         raise_errors=False)))
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        out.append(send_on(conn, [("LREM", "p", 1, "a"), ("LLEN", "q")]))
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            send_on(conn, [("SET", "before", "1"), ("LPUSH", "before", "x"), ("SET", "after", "1")])
        out.append(send_on(conn, [("MGET", "before", "after")]))
    finally:
        pool.release(conn)
    app = redis_client()
    out += [app.set("s", "v"), app.get("s"), app.incr("n"), app.hset("h", mapping={"a": "1"}), app.hgetall("h"),
            app.zadd("z", {"x": 1.5}), app.zrange("z", 0, -1, withscores=True), app.eval("return {1, 'two'}", 0)]
    with pytest.raises(redis.exceptions.NoScriptError):
        app.evalsha("0" * 40, 0)
    out.append(redis_client(decode_responses=True).get("s"))
    return out


@pytest.mark.parametrize("breaking", [_renamed_socket, _parser_without_errors, _hiredis_missing,
                                      _float_packed_otherwise],
                         ids=["socket-renamed", "parser-changed", "no-hiredis", "packing-differs"])
def test_a_broken_assumption_means_redis_pys_own_calls_and_the_same_results(
        redis_db, decided_again, monkeypatch, caplog, breaking):
    monkeypatch.delenv(wire.ENV_SWITCH, raising=False)
    assert wire.enabled()
    expected = _workload()  # on the fast path
    redis_db.flushdb()
    connection.reset()

    reason = breaking(monkeypatch)
    wire.reset()
    fast_calls: list = []
    real_exchange = wire.exchange
    monkeypatch.setattr(wire, "exchange", lambda *a, **k: fast_calls.append(a) or real_exchange(*a, **k))
    with caplog.at_level(logging.INFO, logger="wurk_django.redis"):
        got = _workload()
        _workload()  # the decision is not made, nor logged, again

    assert got == expected
    assert fast_calls == []  # the fast path was not chosen
    assert not wire.enabled() and reason in wire.why_not()
    assert redis.__version__ in wire.why_not()
    warnings = [r for r in caplog.records if "fast path" in r.getMessage()]
    assert [r.levelname for r in warnings] == ["WARNING"]
    if breaking is _renamed_socket:  # the line docs/redis.md shows
        assert warnings[0].getMessage() == _docs_section()[1].replace("9.0.0", redis.__version__)


def test_a_check_that_cannot_run_turns_it_off_instead_of_raising(decided_again, monkeypatch, caplog):
    def broken() -> None:
        raise TypeError("vars() argument must have __dict__ attribute")

    monkeypatch.delenv(wire.ENV_SWITCH, raising=False)
    monkeypatch.setattr(wire, "assumption_problem", broken)
    with caplog.at_level(logging.WARNING, logger="wurk_django.redis"):
        assert not wire.enabled()
    assert "checking the fast path's assumptions failed: TypeError" in wire.why_not()
    assert [r.levelname for r in caplog.records if "fast path" in r.getMessage()] == ["WARNING"]


def _docs_section() -> tuple[str, str]:
    """docs/redis.md's "The socket fast path": its python block and its example log line."""
    text = DOCS.read_text().split("## The socket fast path", 1)[1].split("\n## ", 1)[0]
    python = text.split("```python\n", 1)[1].split("```", 1)[0]
    [line] = [x.strip() for x in text.splitlines() if x.startswith("    Redis fast path off")]
    return python, line


def test_the_settings_block_in_the_docs_switches_it_off(decided_again, monkeypatch):
    namespace: dict = {}
    exec(_docs_section()[0], namespace)
    assert conf.problems(namespace["WURK"]) == []
    monkeypatch.delenv(wire.ENV_SWITCH, raising=False)
    with override_settings(WURK=namespace["WURK"]):
        assert not wire.enabled()


# The rule that only wire.py and pools.py reach into redis-py's private parts is
# tests/redis/test_internals_layout.py.


# -- a worker process, end to end --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("switch", ["0", "1"])
def test_a_worker_runs_jobs_either_way_and_says_when_the_fast_path_is_off(redis_db, worker_factory, switch):
    from tests.jobsapp.jobs import RecordJob
    from tests.support import wait_for

    for i in range(20):
        RecordJob.perform_async(i)
    worker = worker_factory("-c", "4", env={wire.ENV_SWITCH: switch})
    wait_for(lambda: redis_db.llen("test:ran") == 20, message="20 jobs")
    assert sorted(int(v) for v in redis_db.lrange("test:ran", 0, -1)) == list(range(20))
    assert worker.stop() == 0
    said = "Redis fast path switched off (WURK_FAST_PATH=0)" in worker.output()
    assert said is (switch == "0")
