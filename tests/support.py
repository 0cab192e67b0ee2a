"""Helpers for tests that run real worker processes against the test Redis."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The wurk_django package the tests run against: the checkout's own, or the installed wheel's
# when .ci/run runs the suite from a copy of the tree without wurk_django/ (found without
# importing it, so a test module can name it before Django is set up).
PACKAGE = Path(importlib.util.find_spec("wurk_django").origin).resolve().parent


def wurk_settings(**extra):
    """``override_settings`` with ``extra`` merged into the test ``WURK`` dict."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(WURK={**settings.WURK, **extra})


def queued(redis_db, name: str = "default") -> list[dict]:
    """The jobs on ``queue:<name>``, parsed, newest first (LPUSH order)."""
    from wurk_django import payload

    return [payload.loads(raw) for raw in redis_db.lrange(f"queue:{name}", 0, -1)]


def wait_for(condition: Callable[[], object], timeout: float = 15.0, interval: float = 0.05,
             message: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def beating(redis_db, pid: int) -> bool:
    """Whether the worker of ``pid`` has written its first heartbeat. A worker killed before
    it is seen by no rule that judges at once: its jobs wait out the reaper's orphan grace."""
    return any(m.decode().split(":")[-2] == str(pid) and redis_db.hget(m, "info")
               for m in redis_db.smembers("processes"))


def stop_process(proc: subprocess.Popen, sig: int, timeout: float) -> int | None:
    """Send ``sig``, then KILL if the process outlives ``timeout``; always reaps the pid."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, sig)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass
    return proc.returncode


class WorkerProcess:
    """``python manage.py wurk`` as a child process, stopped by pid at teardown."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, settings: str = "tests.settings") -> None:
        self.args = args
        self.log = tempfile.NamedTemporaryFile(prefix="wurk-worker-", suffix=".log", delete=False)
        full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "wurk", *args],
            cwd=str(ROOT), env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.proc.pid

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """TERM, then KILL if it outlives ``timeout``; always reaps the pid."""
        return stop_process(self.proc, signal.SIGTERM, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A private redis-server for outage tests: append-only with fsync always, so a
    stop and start keeps every acknowledged write. Stopped by pid."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="wurk-redis-")
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis(port=self.port)
        wait_for(lambda: _pings(client), timeout=10, message="redis-server to start")
        client.close()

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, signal.SIGTERM, 10)  # redis-server shuts down cleanly on TERM
        self.proc = None


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


class StandInUnit:
    """A fetched job's unit of work without a fetcher: counts its acknowledgements and
    requeues, for tests that run the real processor on one job in this process."""

    def __init__(self, job: dict, queue: str = "default") -> None:
        from wurk_django import payload

        self.job, self.queue, self.jid = payload.dumps(job), queue, None
        self.acked = self.requeued = 0

    def acknowledge(self) -> None:
        self.acked += 1

    def requeue(self) -> None:
        self.requeued += 1


def processor_manager(chain=None, **patch):
    """What a :class:`~wurk_django.server.run.processor.Processor` needs of its manager, with
    the worker's real parts (retrier, job log, metrics) and ``chain`` (the configured
    server chain by default); ``patch`` sets attributes of the retrier."""
    import threading
    from types import SimpleNamespace

    from wurk_django.conf import get_config
    from wurk_django.metrics.tracker import MetricsTracker
    from wurk_django.middleware import server_chain
    from wurk_django.redis.connection import get_redis
    from wurk_django.server.retry import Retrier
    from wurk_django.server.run.joblog import JobLogger
    from wurk_django.server.state import WorkerState

    config = get_config()
    manager = SimpleNamespace(fetcher=None, config=config, state=WorkerState(), retrier=Retrier(config),
                              joblog=JobLogger([], True), server_chain=chain or server_chain(config),
                              metrics=MetricsTracker(), stop_flag=threading.Event(), name="test",
                              redis=lambda: get_redis(config=config))
    for name, value in patch.items():
        setattr(manager.retrier, name, value)
    return manager


def children_of(ppid: int, *, zombies: bool = False) -> set[int]:
    """Pids whose parent is ``ppid``, read from /proc; exited children not yet reaped
    (zombies) only when asked."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name may hold spaces; the fields after its closing paren are fixed.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == ppid and (zombies or fields[0] != "Z"):
            found.add(int(entry.name))
    return found


class Fetching:
    """``threads`` threads calling a fetcher's ``retrieve_work`` until told to stop, as
    processors do: each acknowledges what it got and gives its connection back at the end;
    ``got`` is what they fetched, in order."""

    def __init__(self, fetcher, threads: int = 1) -> None:
        import threading

        self.fetcher = fetcher
        self.got: list = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            unit = self.fetcher.retrieve_work()
            if unit is not None:
                self.got.append(unit)
                unit.acknowledge()
        self.fetcher.release_thread_connection()

    def stop(self) -> None:
        self._stop.set()
        self.fetcher.terminate()
        for thread in self._threads:
            thread.join(10)


class NotifySocket:
    """What systemd listens on: an AF_UNIX datagram socket, by path or abstract name."""

    def __init__(self, abstract: bool = False) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract:
            name = f"wurk-notify-test-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.dir = tempfile.mkdtemp(prefix="wurk-notify-")
            self.address = str(Path(self.dir) / "notify")
            self.sock.bind(self.address)
        self.received: list[tuple[int, str]] = []  # (sender pid, message)

    def receive(self, timeout: float) -> tuple[int, str] | None:
        self.sock.settimeout(timeout)
        try:
            data, ancillary, _flags, _addr = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except TimeoutError:
            return None
        pid = -1
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        self.received.append((pid, data.decode()))
        return self.received[-1]

    def wait_for(self, line: str, timeout: float = 30.0) -> tuple[int, str]:
        """The first message (from now on, or already received) holding ``line``."""
        for message in self.received:
            if line in message[1].splitlines():
                return message
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.receive(max(deadline - time.monotonic(), 0.01))
            if message is not None and line in message[1].splitlines():
                return message
        raise AssertionError(f"no {line!r} within {timeout}s; received {self.received}")

    def lines(self) -> list[str]:
        return [line for _pid, message in self.received for line in message.splitlines()]

    def close(self) -> None:
        self.sock.close()
