"""wire.py's fast path over TLS (rediss://) and a Unix socket (issue 11, item 6).

Each test starts its own redis-server (certificates made here with the openssl
CLI) and runs pushes and the fetch + ACK batch through ``connection.send_commands``
and ``send_on``, checking the fast path really ran (or, in the suite run with
``WURK_FAST_PATH=0``, that it did not and the results are the same).
"""

from __future__ import annotations

import json

import pytest
import redis as redis_lib

from tests.redis_servers import TLSRedis, UnixRedis
from wurk_django import payload
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.redis import wire
from wurk_django.redis.connection import get_redis, send_commands, send_on
from wurk_django.server.fetch.reliable import ReliableFetch


@pytest.fixture(params=["tls", "unix"])
def transport(request):
    """``(Config, plain redis-py client)`` for a private server on that transport."""
    server = TLSRedis() if request.param == "tls" else UnixRedis()
    server.start()
    options = {"ssl_ca_certs": server.certs["ca.crt"]} if request.param == "tls" else {}
    plain = server.client(2)
    config = Config(raw={"REDIS": {"URL": server.url(2), "OPTIONS": options}, "TAG": "t", "QUEUES": ["default"],
                         "FETCH_POLL_INTERVAL": 0.2})
    try:
        yield config, plain
    finally:
        plain.close()
        get_redis(config=config).connection_pool.disconnect()
        server.stop()


def _via_fast_path(batches: list) -> list:
    """The batches expected through wire.exchange: all of them, none with the fast path off."""
    return batches if wire.enabled() else []


@pytest.fixture
def exchanges(monkeypatch):
    """How many batches went through wire.exchange (the fast path)."""
    calls: list[int] = []
    real = wire.exchange

    def counted(conn, commands, *rest):
        calls.append(len(commands))
        return real(conn, commands, *rest)

    monkeypatch.setattr(wire, "exchange", counted)
    return calls


def _job(**extra) -> dict:
    return {"class": "X", "args": [], "queue": "default", "jid": payload.new_jid(), "created_at": payload.now_ms(),
            **extra}


def test_the_fast_path_is_used_on_this_transport(transport):
    config, _plain = transport
    conn = get_redis(config=config).connection_pool.get_connection()
    try:
        conn.connect()
        assert wire.usable(conn) is wire.enabled()
    finally:
        get_redis(config=config).connection_pool.release(conn)


def test_pushes_round_trip_through_the_fast_path(transport, exchanges):
    config, plain = transport
    jobs = [_job() for _ in range(20)]
    writer = Writer(config)
    for job in jobs:
        writer.push([job])
    assert len(exchanges) == len(_via_fast_path(jobs))
    assert [payload.loads(raw)["jid"] for raw in reversed(plain.lrange("queue:default", 0, -1))] == [
        j["jid"] for j in jobs]
    assert plain.smembers("queues") == {b"default"}


def test_replies_larger_than_one_read_and_error_replies(transport, exchanges):
    config, plain = transport
    client = get_redis(config=config)
    big = b"x" * 300_000  # several TLS records and several reads of the 64 KiB buffer
    replies = send_commands(client, [("SET", "big", big), ("GET", "big"), ("EVALSHA", "0" * 40, 0),
                                     ("STRLEN", "big")], raise_errors=False)
    assert replies[:2] == [b"OK", big] and replies[3] == 300_000
    assert isinstance(replies[2], redis_lib.exceptions.NoScriptError)
    assert exchanges == _via_fast_path([4])
    assert plain.strlen("big") == 300_000


def test_consecutive_batches_reuse_one_connection(transport):
    config, plain = transport
    client = get_redis(config=config)
    first = send_commands(client, [("CLIENT", "ID")])[0]
    assert [send_commands(client, [("CLIENT", "ID")])[0] for _ in range(5)] == [first] * 5
    # Closed by the server while idle: replaced before use, not written to.
    plain.execute_command("CLIENT", "KILL", "ID", first)
    assert send_commands(client, [("SET", "k", "v"), ("GET", "k")]) == [b"OK", b"v"]


def test_fetch_and_ack_batches(transport, exchanges):
    config, plain = transport
    jobs = [_job() for _ in range(5)]
    Writer(config).push(jobs)
    fetcher = ReliableFetch(config)
    try:
        fetched = []
        for _ in jobs:
            unit = fetcher.retrieve_work()
            unit.jid = json.loads(unit.job)["jid"]
            fetched.append(unit.jid)
            unit.acknowledge()
        fetcher.flush_acks()
        assert sorted(fetched) == sorted(j["jid"] for j in jobs)
        # exchanges[0] is the push (with its wake-up); every fetch goes on this thread's
        # connection (send_on): the 1st also sets the thread's "running" marker (SET +
        # LMOVE), the 2nd carries the 1st job's ACK (LREM + DEL + LMOVE), and once the queue
        # proves deep one fetch moves several jobs, so never more than one round trip per
        # job, plus the final flush.
        if wire.enabled():
            assert exchanges[1:3] == [2, 3]
            assert len(exchanges) - 1 <= len(jobs) + 1
        else:
            assert exchanges == []
        assert not [key for key in plain.keys("queue:default|*") if plain.llen(key)]
        assert plain.llen("queue:default") == 0
    finally:
        fetcher.release_thread_connection()
        fetcher.terminate()


def test_send_on_a_connection_of_this_transport(transport, exchanges):
    config, _plain = transport
    pool = get_redis(config=config).connection_pool
    conn = pool.get_connection()
    try:
        assert send_on(conn, [("SET", "a", "1"), ("INCR", "a"), ("GET", "a")]) == [b"OK", 2, b"2"]
        with pytest.raises(redis_lib.ResponseError, match="WRONGTYPE"):
            send_on(conn, [("LPUSH", "a", "x"), ("GET", "a")])
        assert send_on(conn, [("GET", "a")]) == [b"2"]  # still in step after the error
    finally:
        pool.release(conn)
    assert len(exchanges) == len(_via_fast_path([1, 2, 3]))



def test_pushes_poll_for_their_reply_on_a_unix_socket_and_sleep_on_tls(transport, monkeypatch):
    """A push polls the socket for its reply on plain sockets only: TLS keeps bytes
    already decrypted where a non-blocking read of the socket cannot see them. The
    polling reads the clock to know when to stop, and nothing else in exchange() does."""
    config, plain = transport
    if not wire.enabled():
        pytest.skip("the fast path is off (WURK_FAST_PATH=0): redis-py's own calls never poll")
    monkeypatch.setattr(wire, "_spin_allowed", True)
    clock_reads: list[float] = []
    real_clock = wire.perf_counter

    def counted() -> float:
        clock_reads.append(1)
        return real_clock()

    monkeypatch.setattr(wire, "perf_counter", counted)
    writer = Writer(config)
    for job in [_job() for _ in range(5)]:
        writer.push([job])
    assert plain.llen("queue:default") == 5
    tls = config.redis_url.startswith("rediss://")
    assert (len(clock_reads) == 0) if tls else (len(clock_reads) >= 5)


def test_job_code_s_single_commands_on_this_transport(transport, monkeypatch):
    """Issue 48 item 2: redis_client()'s one-call shortcut serves a Unix socket (the yield
    included), and declines TLS, whose decrypted bytes a non-blocking libc recv cannot
    see: every command there takes the full path. Replies are the same either way."""
    from wurk_django import redis_client

    config, plain = transport
    served: list[object] = []
    real = wire.round_trip

    def counted(conn, command, fresh_for):
        reply = real(conn, command, fresh_for)
        served.append(reply is not wire.NOT_SERVED)
        return reply

    monkeypatch.setattr(wire, "round_trip", counted)
    monkeypatch.setattr(wire, "busy_threads", 2)  # as in a worker running several jobs
    app = redis_client(config=config)
    try:
        assert [app.incr("n") for _ in range(20)] == list(range(1, 21))
        assert app.get("missing") is None and plain.get("n") == b"20"
        tls = config.redis_url.startswith("rediss://")
        if not wire.enabled():
            assert served == []  # redis-py's own path throughout
        elif tls:
            assert served and not any(served)
        else:
            assert served.count(True) >= 18  # all but the first use (and a stack refill)
    finally:
        app.connection_pool.disconnect()
