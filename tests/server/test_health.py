"""The health listener (issue 28 item 3, issue 25 item 2): its bind address, its limits
against slow or flooding clients, and ``/ready`` through the one Redis factory under
every topology. The listener runs in this process, in front of a stand-in launcher."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from tests.local_redis import free_port
from tests.support import wait_for
from wurk_django.conf import Config, get_config
from wurk_django.server import health
from wurk_django.server.health import HealthListener


def _launcher(config: Config) -> SimpleNamespace:
    state = SimpleNamespace(last_fetch=time.monotonic(), identity="test:1:abc", busy_count=lambda: 0)
    return SimpleNamespace(config=config, state=state, quieting=False, stopping=False, stopped=threading.Event(),
                           concurrency=config.concurrency)


@pytest.fixture
def start_listener():
    started: list[HealthListener] = []

    def start(config: Config | None = None, **kwargs) -> HealthListener:
        config = config or get_config()
        listener = HealthListener(_launcher(config), free_port(), **kwargs)
        listener.start()
        started.append(listener)
        wait_for(lambda: listener.server is not None, message="the listener to bind")
        return listener

    yield start
    for listener in started:
        listener.stop()


def _get(listener: HealthListener, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{listener.port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}


def test_the_port_binds_loopback_unless_told_otherwise(start_listener):
    config = get_config()
    assert config.health_bind == "127.0.0.1"
    listener = start_listener(config, host=config.health_bind)
    assert listener.server.server_address[0] == "127.0.0.1"
    assert Config(raw={"HEALTH_BIND": "0.0.0.0"}).health_bind == "0.0.0.0"
    from wurk_django.conf import problems

    assert [p.key for p in problems({"HEALTH_BIND": ""})] == ["HEALTH_BIND"]
    # The default of HealthListener itself is loopback too (embedders build it directly).
    assert start_listener().server.server_address[0] == "127.0.0.1"


def test_two_hundred_half_sent_requests_cost_no_thread_and_leave_room_for_probes(start_listener, redis_db):
    # Issue 43 item 5: held connections never take the probe's place; past the cap the oldest
    # one that has not sent a whole request is closed for the newcomer.
    listener = start_listener()
    assert _get(listener, "/live")[0] == 200
    before = threading.active_count()
    sockets = []
    try:
        for _ in range(200):
            sock = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
            sock.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\n")  # the request never ends
            sockets.append(sock)
        cap = health.MAX_CONNECTIONS
        wait_for(lambda: listener.server.evicted >= 200 - cap, message="the oldest connections closed")
        assert listener.server.open_connections() <= cap
        assert threading.active_count() <= before + 1  # at most the PING's thread
        # While every other connection is held, the probes answer at once.
        assert _get(listener, "/live")[0] == 200
        assert _get(listener, "/ready")[0] == 200
    finally:
        for sock in sockets:
            sock.close()


def test_concurrent_ready_requests_share_one_ping(start_listener, monkeypatch):
    calls = []

    def slow_ping():
        calls.append(time.monotonic())
        time.sleep(0.5)
        return None

    listener = start_listener()
    monkeypatch.setattr(listener.server, "_ping", slow_ping)
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(_get(listener, "/ready")[0])) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert statuses == [200] * 40
    assert 1 <= len(calls) <= 3, calls  # 40 requests within ~0.5 s: a PING or two, never 40


def test_a_request_that_is_not_http_or_not_get_is_answered_and_closed(start_listener):
    listener = start_listener()
    for raw, status in ((b"hello\r\n\r\n", b" 400 "), (b"POST /live HTTP/1.1\r\nHost: x\r\n\r\n", b" 405 "),
                        (b"GET /nope HTTP/1.0\r\n\r\n", b" 404 "), (b"HEAD /live HTTP/1.1\r\n\r\n", b" 200 ")):
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
            sock.sendall(raw)
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        assert status in answer.split(b"\r\n", 1)[0], (raw, answer)
    assert answer.endswith(b"\r\n\r\n")  # HEAD: no body


def test_a_request_trickled_a_byte_at_a_time_is_cut_off(start_listener, monkeypatch):
    monkeypatch.setattr(health, "READ_TIMEOUT", 1.0)
    listener = start_listener()
    sock = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    request = b"GET /live HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    cut_after = None
    try:
        for sent, byte in enumerate(request):
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                cut_after = sent
                break
            readable, _, _ = __import__("select").select([sock], [], [], 0.2)
            if readable and sock.recv(1024) == b"":
                cut_after = sent
                break
    finally:
        sock.close()
    # 0.2 s a byte: without a deadline on the whole request the 200 bytes would take 40 s.
    assert cut_after is not None and cut_after < len(request)


# -- /ready through the one factory, under every topology (issue 25 item 2) ------------


@pytest.mark.slow
def test_ready_under_sentinel_and_503_while_the_primary_is_gone(start_listener):
    from tests.redis_servers import SentinelGroup

    group = SentinelGroup().start()
    try:
        config = Config(raw={"REDIS": {"SENTINELS": group.addresses, "SERVICE": group.service}, "TAG": "t"})
        listener = start_listener(config)
        status, body = _get(listener, "/ready")
        assert (status, body["reasons"]) == (200, [])
        group.replica.stop()  # no replica to promote: the primary stays gone
        group.primary.stop()
        wait_for(lambda: _get(listener, "/ready")[0] == 503, message="/ready failing without a primary")
        assert any(r.startswith("redis: ") for r in _get(listener, "/ready")[1]["reasons"])
    finally:
        group.stop()


def _tls_config(server) -> Config:
    return Config(raw={"REDIS": {"URL": server.url(), "OPTIONS": {"ssl_ca_certs": server.certs["ca.crt"]}},
                       "TAG": "t"})


def _unix_config(server) -> Config:
    return Config(raw={"REDIS_URL": server.url(), "TAG": "t"})


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["TLSRedis", "UnixRedis"])
def test_ready_over_tls_and_a_unix_socket(start_listener, kind):
    from tests import redis_servers

    server = getattr(redis_servers, kind)().start()
    try:
        listener = start_listener(_tls_config(server) if kind == "TLSRedis" else _unix_config(server))
        assert _get(listener, "/ready")[0] == 200
        server.server.stop()
        wait_for(lambda: _get(listener, "/ready")[0] == 503, message="/ready failing without Redis")
    finally:
        server.stop()


def test_live_answers_503_once_quiet_or_stopping(start_listener, redis_db):
    # RUN-201: a quiet process never fetches again; for the orchestrator it is leaving.
    listener = start_listener()
    launcher = listener.launcher
    assert _get(listener, "/live") == (200, {"status": "ok", "reasons": [], "identity": "test:1:abc"})
    launcher.quieting = True
    assert _get(listener, "/live")[0] == 503 and _get(listener, "/live")[1]["reasons"] == ["quiet"]
    launcher.stopping = True
    assert _get(listener, "/live")[1]["reasons"] == ["stopping"]
