"""Reliable push (issue 31 item 5): ``Client.reliable_push()`` (PRO-320), the
``drop_oldest`` overflow mode, and jobs of a batch left out of a mixed push
(PRO-322). Pushes go to a port where no Redis listens yet; a redis-server started
there afterwards (a port of ``WURK_TEST_PORTS``, stopped by pid) receives what the
buffer kept."""

from __future__ import annotations

import logging

import pytest
import redis as redis_lib

from tests.local_redis import LocalRedis, free_port
from tests.support import wait_for
from wurk_django import payload, signals
from wurk_django.client import reliable_push
from wurk_django.client.push import Client
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.redis import errors as redis_errors


@pytest.fixture(autouse=True)
def fresh_buffers(monkeypatch):
    monkeypatch.setattr(reliable_push, "FLUSH_INTERVAL", 0.1)
    monkeypatch.setattr(reliable_push, "_buffers", {})
    monkeypatch.setattr(redis_errors, "sleep", lambda seconds: None)  # no connect back-off against a dead port
    reliable_push._uninstall()
    yield
    reliable_push._uninstall()
    # What a test left buffered must not reach a later test's Redis on a reused port:
    # an empty buffer's delivery thread ends.
    for buffer in reliable_push._buffers.values():
        with buffer._lock:
            buffer._groups.clear()
            buffer._count = 0


@pytest.fixture
def port():
    return free_port()


def _config(port: int, **extra) -> Config:
    return Config(raw={"REDIS_URL": f"redis://127.0.0.1:{port}/0", "TAG": "t", **extra})


def _job(name: str, **extra) -> dict:
    return {"class": "X", "args": [name], "queue": "default", "jid": payload.new_jid(), "retry": True,
            "created_at": payload.now_ms(), **extra}


def _arrived(port: int) -> list[str]:
    """Start Redis on ``port``, wait for the buffer to empty; the jobs' first arguments,
    in the order workers fetch them."""
    server = LocalRedis("--port", str(port), "--bind", "127.0.0.1")
    client = redis_lib.Redis(port=port)
    try:
        server.start(client.ping)
        wait_for(lambda: reliable_push.buffered() == 0, timeout=20, message="the buffer to drain")
        return [payload.loads(raw)["args"][0] for raw in reversed(client.lrange("queue:default", 0, -1))]
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("kwargs", [{"buffer": 0}, {"buffer": True}, {"buffer": "10"}, {"overflow": "ring"}])
def test_reliable_push_refuses_bad_values_PRO_320(kwargs):
    with pytest.raises(ValueError, match="reliable_push"):
        Client.reliable_push(**kwargs)
    assert not reliable_push.installed()


def test_reliable_push_turns_buffering_on_whatever_the_setting_says_PRO_320(port):
    config = _config(port, RELIABLE_PUSH=False)
    with pytest.raises(redis_lib.ConnectionError):
        Writer(config).push([_job("refused")])  # the setting alone: the push raises
    Client.reliable_push()
    Client.reliable_push()  # idempotent
    assert reliable_push.installed()
    Client(config=config).push({"class": "X", "args": ["kept"], "queue": "default"})
    assert reliable_push.buffered() == 1
    assert _arrived(port) == ["kept"]


def test_the_default_overflow_still_raises(port):
    config = _config(port, RELIABLE_PUSH_BUFFER=2)
    writer = Writer(config)
    writer.push([_job("a")])
    writer.push([_job("b")])
    with pytest.raises(reliable_push.PushBufferFull) as raised:
        writer.push([_job("c")])
    assert [job["args"] for job in raised.value.jobs] == [["c"]]
    assert reliable_push.buffered() == 2


def test_drop_oldest_keeps_the_newest_and_names_every_job_it_drops(port, caplog):
    caplog.set_level(logging.ERROR, logger="wurk_django.client.push")
    Client.reliable_push(buffer=3, overflow="drop_oldest")
    dropped: list[dict] = []

    def receiver(sender, jobs, **kwargs):
        dropped.extend(jobs)

    signals.pushes_dropped.connect(receiver)
    try:
        writer = Writer(_config(port))
        jobs = [_job(f"j{n}") for n in range(5)]
        for job in jobs:
            writer.push([job])  # never raises
        writer.push([_job(f"b{n}") for n in range(2)])  # one bulk push: two more go
    finally:
        signals.pushes_dropped.disconnect(receiver)
    assert reliable_push.buffered() == 3
    assert [job["args"][0] for job in dropped] == ["j0", "j1", "j2", "j3"]
    for job in jobs[:4]:
        assert f"job {job['jid']} (X, queue default) DROPPED" in caplog.text
    assert _arrived(port) == ["j4", "b0", "b1"]


def test_a_bulk_push_bigger_than_the_ring_keeps_its_newest_jobs(port):
    Client.reliable_push(buffer=3, overflow="drop_oldest")
    Writer(_config(port)).push([_job(f"n{n}") for n in range(5)])
    assert reliable_push.buffered() == 3
    assert _arrived(port) == ["n2", "n3", "n4"]


def test_the_setting_chooses_drop_oldest_too(port):
    writer = Writer(_config(port, RELIABLE_PUSH_BUFFER=1, RELIABLE_PUSH_OVERFLOW="drop_oldest"))
    writer.push([_job("old")])
    writer.push([_job("new")])
    assert _arrived(port) == ["new"]


def test_a_mixed_push_buffers_the_jobs_of_no_batch_and_still_raises_PRO_322(port):
    writer = Writer(_config(port))
    with pytest.raises(redis_lib.ConnectionError):
        writer.push([_job("plain1"), _job("batched", bid="b" * 14), _job("plain2")])
    assert reliable_push.buffered() == 2
    # While the buffer waits, a batch's push is not queued behind it: it raises too.
    with pytest.raises(redis_lib.ConnectionError):
        writer.push([_job("batched2", bid="b" * 14)])
    assert reliable_push.buffered() == 2
    assert _arrived(port) == ["plain1", "plain2"]


def test_a_full_ring_leaves_the_group_being_delivered_alone():
    """The group a delivery is sending may be landing in Redis: dropping it would log as
    lost a job that arrived, and trimming it would send part of it twice."""
    buffer = reliable_push.PushBuffer()
    sending = ([_job("s0"), _job("s1")], [], False)
    waiting = ([_job("w0"), _job("w1")], [], False)
    buffer._groups.extend([sending, waiting])
    buffer._count = 4
    buffer._sending = sending
    dropped = buffer._make_room(3, 4)
    assert [job["args"][0] for job in dropped] == ["w0", "w1"]
    assert list(buffer._groups) == [sending] and buffer._count == 2


def test_two_drains_at_once_write_each_buffered_push_once_PRO_320():
    """The pushing thread drains the buffer before its own push while the delivery thread
    may be draining too: each buffered push must reach Redis once, oldest first (found
    by tests/topologies/test_push_polling.py: two drains wrote [a], [a], [b], [b])."""
    import threading
    import time

    written: list[list[str]] = []
    writing = threading.Event()

    class SlowWriter:
        def write(self, jobs, extra=None, front=False, connect_attempts=None):
            writing.set()
            time.sleep(0.05)  # a round trip long enough for the other drain to arrive
            written.append([job["args"][0] for job in jobs])

    buffer = reliable_push.PushBuffer()
    buffer._groups.extend([([_job("a")], [], False), ([_job("b")], [], False)])
    buffer._count = 2
    writer = SlowWriter()
    first = threading.Thread(target=buffer.drain, args=(writer,))
    first.start()
    writing.wait(10)
    assert buffer.drain(writer) is True  # the pushing thread's drain, while the first writes
    first.join(10)
    assert written == [["a"], ["b"]]
    assert len(buffer) == 0


def test_raise_fills_the_room_left_then_names_the_jobs_it_refused_PRO_320(port):
    writer = Writer(_config(port, RELIABLE_PUSH_BUFFER=3))
    writer.push([_job("a")])
    with pytest.raises(reliable_push.PushBufferFull) as raised:
        writer.push([_job("b"), _job("c"), _job("d"), _job("e")])  # one bulk push, room for two
    assert [job["args"] for job in raised.value.jobs] == [["d"], ["e"]]
    assert reliable_push.buffered() == 3
    assert _arrived(port) == ["a", "b", "c"]


def test_pro_323_a_drain_goes_oldest_first_and_stops_with_the_failed_push_at_the_head():
    """PRO-323: each later push first drains the buffer oldest first; the first transient
    failure leaves that push at the head and stops (the later ones wait behind it); a
    non-transient error (OOM here) leaves it there too and propagates; each push
    delivered announces its jobs as recovered (``jobs.recovered.push`` in statsd)."""
    sent: list[str] = []
    failures: list[BaseException] = []

    class Flaky:
        def write(self, jobs, extra=None, front=False, connect_attempts=None):
            if failures:
                raise failures.pop(0)
            sent.append(jobs[0]["args"][0])

    recovered: list[tuple[str, int]] = []

    def receiver(sender, queue, count, **kwargs):
        recovered.append((queue, count))

    buffer = reliable_push.PushBuffer()
    buffer._groups.extend([([_job(name)], [], False) for name in ("a", "b", "c")])
    buffer._count = 3
    signals.pushes_recovered.connect(receiver)
    try:
        failures.append(redis_lib.ConnectionError("down"))
        assert buffer.drain(Flaky()) is False
        assert sent == [] and [g[0][0]["args"][0] for g in buffer._groups] == ["a", "b", "c"]
        failures.append(redis_lib.ResponseError("OOM command not allowed when used memory > 'maxmemory'."))
        with pytest.raises(redis_lib.ResponseError, match="OOM"):
            buffer.drain(Flaky())
        assert len(buffer) == 3 and buffer._groups[0][0][0]["args"] == ["a"]
        assert buffer.drain(Flaky()) is True
    finally:
        signals.pushes_recovered.disconnect(receiver)
    assert sent == ["a", "b", "c"] and len(buffer) == 0
    assert recovered == [("default", 1)] * 3
