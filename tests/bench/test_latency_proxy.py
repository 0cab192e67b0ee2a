"""bench/latency_proxy.py (issue 48 item 3): the delaying proxy the latency benchmarks put
in front of Redis. Started as the benchmarks start it (its own process); it must hold every
reply back by at least the delay asked for and hand on every byte unchanged and in order,
on many connections at once. Only lower bounds on time are asserted: the delay is a floor
the proxy guarantees, however loaded the machine."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time

import pytest
import redis

from tests.support import ROOT

DOWN_MS = 40
UP_MS = 25


def _load_proxy():
    spec = importlib.util.spec_from_file_location("latency_proxy", ROOT / "bench" / "latency_proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


latency_proxy = _load_proxy()


@pytest.fixture(scope="module")
def proxied_url():
    """The test Redis database's URL through one proxy process (bytes to Redis held UP_MS,
    replies DOWN_MS), started as the benchmarks start it."""
    from django.conf import settings

    proc, url = latency_proxy.spawn(settings.WURK_TEST_REDIS_URL, DOWN_MS, up_ms=UP_MS)
    try:
        yield url
    finally:
        latency_proxy.stop(proc)
        assert proc.returncode == 0  # a clean exit on SIGTERM


def test_each_round_trip_waits_at_least_both_delays(proxied_url):
    client = redis.Redis.from_url(proxied_url)
    assert client.ping()  # connected: the next ones are round trips alone
    for _ in range(3):
        start = time.perf_counter()
        client.ping()
        assert time.perf_counter() - start >= (UP_MS + DOWN_MS) / 1000
    # A pipeline is one round trip, not one per command.
    pipe = client.pipeline(transaction=False)
    for i in range(50):
        pipe.echo(str(i))
    start = time.perf_counter()
    assert pipe.execute() == [str(i).encode() for i in range(50)]
    assert time.perf_counter() - start >= (UP_MS + DOWN_MS) / 1000
    client.close()


def test_bytes_arrive_intact_and_in_order_on_many_connections(proxied_url, redis_db):
    errors: list[BaseException] = []

    def one_client(n: int) -> None:
        try:
            client = redis.Redis.from_url(proxied_url)
            value = os.urandom(200_000 + n)  # every byte value, several TCP segments each way
            client.set(f"proxy:{n}", value)
            assert client.get(f"proxy:{n}") == value
            pipe = client.pipeline(transaction=False)
            for i in range(300):
                pipe.rpush(f"proxy:list:{n}", i)
            pipe.lrange(f"proxy:list:{n}", 0, -1)
            assert pipe.execute()[-1] == [str(i).encode() for i in range(300)]
            client.close()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one_client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    # What went through the proxy is what Redis holds, read directly.
    assert redis_db.strlen("proxy:7") == 200_007
    assert redis_db.llen("proxy:list:19") == 300


def test_a_closed_upstream_closes_the_client(proxied_url, redis_db):
    host, port = proxied_url.split("//")[1].split("/")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"CLIENT SETNAME proxy-victim\r\n")
        assert sock.recv(100) == b"+OK\r\n"
        victim = [c["id"] for c in redis_db.client_list() if c.get("name") == "proxy-victim"]
        redis_db.client_kill_filter(_id=victim[0])
        # Redis closed the proxy's upstream connection: the proxy closes the client's (EOF),
        # as a direct connection would be closed, rather than leave it hanging.
        assert sock.recv(100) == b""
    # And it takes the next connection.
    client = redis.Redis.from_url(proxied_url)
    assert client.ping()
    client.close()


def test_several_processes_share_the_port(redis_db):
    from django.conf import settings

    proc, url = latency_proxy.spawn(settings.WURK_TEST_REDIS_URL, 5, procs=2)
    try:
        clients = [redis.Redis.from_url(url) for _ in range(6)]
        for n, client in enumerate(clients):
            client.set(f"proxy:shared:{n}", n)
        assert [int(c.get(f"proxy:shared:{n}")) for n, c in enumerate(clients)] == list(range(6))
        for client in clients:
            client.close()
    finally:
        latency_proxy.stop(proc)
    assert proc.returncode == 0  # the parent forwarded SIGTERM and reaped both
