"""systemd's notify protocol (``Type=notify``), spoken by ``manage.py wurk``.

Each test binds a datagram socket of its own and hands its name to the code or
to a real worker as ``$NOTIFY_SOCKET``, as systemd does; with ``SO_PASSCRED``
the kernel stamps every message with its sender's pid, which is how systemd
enforces ``NotifyAccess=main`` too.
"""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from tests.jobsapp.jobs import RecordJob
from tests.support import NotifySocket, children_of, wait_for
from wurk_django.server import systemd

# -- the module ------------------------------------------------------------------------


def test_without_notify_socket_nothing_is_sent(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert systemd.enabled() is False
    assert systemd.notify("READY=1") is False
    assert systemd.watchdog_interval() is None
    monkeypatch.setattr(socket, "socket", None)  # a socket opened now would raise
    systemd.Watchdog().tick()
    assert systemd.notify("STOPPING=1") is False


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_one_datagram_with_every_line(monkeypatch, abstract):
    sock = NotifySocket(abstract=abstract)
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", sock.address)
        assert systemd.notify("READY=1", "STATUS=fetching") is True
        pid, message = sock.receive(2)
        assert (pid, message) == (os.getpid(), "READY=1\nSTATUS=fetching")
    finally:
        sock.close()


def test_a_socket_nobody_listens_on_is_logged_not_raised(monkeypatch, caplog):
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent/wurk/notify")
    assert systemd.notify("READY=1") is False
    assert "could not notify systemd" in caplog.text


@pytest.mark.parametrize(("usec", "pid", "expected"), [
    ("4000000", None, 2.0),
    ("4000000", "self", 2.0),
    ("4000000", "1", None),  # meant for another process (a parent whose environment we inherited)
    ("0", None, None),
    ("soon", None, None),
    (None, None, None),
])
def test_watchdog_interval_is_half_the_usec_for_this_pid(monkeypatch, notify_socket, usec, pid, expected):
    monkeypatch.setenv("NOTIFY_SOCKET", notify_socket.address)
    for name, value in (("WATCHDOG_USEC", usec), ("WATCHDOG_PID", str(os.getpid()) if pid == "self" else pid)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert systemd.watchdog_interval() == expected


def test_watchdog_pings_once_per_interval(monkeypatch, notify_socket):
    monkeypatch.setenv("NOTIFY_SOCKET", notify_socket.address)
    monkeypatch.setenv("WATCHDOG_USEC", "400000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    watchdog = systemd.Watchdog()
    watchdog.tick()
    watchdog.tick()  # within the interval: nothing
    time.sleep(0.25)
    watchdog.tick()
    assert [notify_socket.receive(1), notify_socket.receive(1), notify_socket.receive(0.1)] == [
        (os.getpid(), "WATCHDOG=1"), (os.getpid(), "WATCHDOG=1"), None]


# -- a real worker ---------------------------------------------------------------------


@pytest.mark.slow
def test_worker_says_ready_when_fetching_and_stopping_on_term(redis_db, worker_factory, notify_socket):
    worker = worker_factory("-c", "2", "-t", "3", env={"NOTIFY_SOCKET": notify_socket.address})
    pid, _ready = notify_socket.wait_for("READY=1")
    assert pid == worker.pid
    # Ready means fetching: the process is listed, and a job pushed now runs.
    assert len(redis_db.smembers("processes")) == 1
    assert "STATUS=fetching: 2 threads on default" in notify_socket.lines()
    RecordJob.perform_async("after READY")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"after READY"], message="a job run after READY")
    assert "STOPPING=1" not in notify_socket.lines()

    worker.signal(signal.SIGTSTP)
    notify_socket.wait_for("STATUS=quiet: running jobs finish, nothing new is fetched")
    worker.signal(signal.SIGTERM)
    pid, stopping = notify_socket.wait_for("STOPPING=1")
    assert pid == worker.pid
    assert "STATUS=stopping: draining for up to 3s" in stopping.splitlines()
    assert worker.wait(20) == 0
    assert notify_socket.lines().count("READY=1") == 1


@pytest.mark.slow
def test_worker_pings_the_watchdog_while_it_runs(redis_db, worker_factory, notify_socket):
    worker = worker_factory("-c", "1", env={"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "1000000"})
    notify_socket.wait_for("READY=1")
    started = time.monotonic()
    pings = 0
    while pings < 3:
        pid, _ping = _next_ping(notify_socket)
        assert pid == worker.pid
        pings += 1
    # Every half second (half of WATCHDOG_USEC), give or take the loop's own 0.5 s wait.
    assert time.monotonic() - started < 3.5
    assert worker.stop() == 0


def _next_ping(sock: NotifySocket) -> tuple[int, str]:
    while True:
        message = sock.receive(3)
        assert message is not None, f"no watchdog ping within 3s; received {sock.received}"
        if message[1] == "WATCHDOG=1":
            return message


@pytest.mark.slow
def test_swarm_notifies_from_the_supervisor_once_every_child_fetches(redis_db, worker_factory, notify_socket):
    worker = worker_factory("--processes", "2", "-c", "1", env={"NOTIFY_SOCKET": notify_socket.address})
    pid, ready = notify_socket.wait_for("READY=1", timeout=40)
    assert pid == worker.pid
    assert "STATUS=supervising 2 children, all fetching" in ready.splitlines()
    children = children_of(worker.pid)
    assert len(children) == 2
    listed = {member.decode() for member in redis_db.smembers("processes")}
    assert len(listed) == 2 and all(int(identity.split(":")[1]) in children for identity in listed)

    worker.signal(signal.SIGTERM)
    notify_socket.wait_for("STOPPING=1")
    assert worker.wait(30) == 0
    # Only the supervisor spoke: systemd's default NotifyAccess=main would drop a child's message.
    assert {pid for pid, _message in notify_socket.received} == {worker.pid}
