"""Embedded mode with real servers: gunicorn (sync and ASGI workers) and runserver (DJ-061..DJ-064, RUN-501..504).

Each server runs the test settings with ``WURK["MODE"] = "embedded"`` and the
URLs of tests/embedded_urls.py, against the test Redis database. Every process
a test starts is stopped by that test, by pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
import redis

from tests.support import ROOT, children_of, stop_process, wait_for
from wurk_django.embed import embedded
from wurk_django.gunicorn import drain_budget

pytestmark = pytest.mark.slow

GUNICORN_CONF = ROOT / "example_project" / "gunicorn.conf.py"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]



class ServerProcess:
    """A web server started with the embedded test setup, stopped by pid."""

    def __init__(self, argv: list[str], *, redis_url: str, extra: dict | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="wurk-embedded-", suffix=".log", delete=False)
        full_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "WURK_TEST_URLCONF": "tests.embedded_urls",
            "WURK_TEST_REDIS_URL": redis_url,
            "WURK_TEST_EXTRA": json.dumps({"MODE": "embedded", **(extra or {})}),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        full_env.pop("WURK_DISABLED", None)
        self.proc = subprocess.Popen(argv, cwd=str(ROOT), env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """``sig``, then KILL if it outlives ``timeout``; always reaps the pid. Its children
        (gunicorn's workers, runserver's reloader child) are KILLed too if they outlive it:
        one left behind runs embedded job threads against the test database for the rest of
        the suite, and every later test that counts a queue fails."""
        children = children_of(self.pid) if self.alive() else set()
        code = stop_process(self.proc, sig, timeout)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return code


class Gunicorn(ServerProcess):
    def __init__(self, *args: str, app: str = "tests.embedded_app:application", config: Path | None = GUNICORN_CONF,
                 workers: int = 2, **kwargs) -> None:
        self.port = free_port()
        argv = [sys.executable, "-m", "gunicorn"]
        if config is not None:
            argv += ["-c", str(config)]
        argv += ["--bind", f"127.0.0.1:{self.port}", "--workers", str(workers), "--no-control-socket", *args, app]
        super().__init__(argv, **kwargs)

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def workers(self) -> set[int]:
        return children_of(self.pid, zombies=True)


class PrivateRedis:
    """A throwaway redis-server on a free port, for the outage test; stopped by pid."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="wurk-embedded-redis-")
        self.url = f"redis://127.0.0.1:{self.port}/12"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--dir", self.dir, "--save", "", "--appendonly", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        wait_for(lambda: _pings(client), timeout=10, message="the private redis-server")
        client.close()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def test_redis_url():
    from django.conf import settings

    return settings.WURK_TEST_REDIS_URL


@pytest.fixture
def servers():
    """Servers a test starts; any still alive at teardown are stopped by pid."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        if server.alive():
            server.stop(signal.SIGKILL, timeout=10)


def heartbeats(client: redis.Redis) -> dict[str, dict]:
    """identity -> parsed info, for every registered process that has beaten."""
    found = {}
    for member in client.smembers("processes"):
        identity = member.decode()
        info = client.hget(identity, "info")
        if info is not None:
            found[identity] = orjson.loads(info)
    return found


def leftovers(client: redis.Redis, identities: list[str], pids: set[int]) -> list[str]:
    """Keys that still belong to one of the stopped processes: heartbeat, work, signals, private lists."""
    marks = list(identities) + [f"|{pid}|" for pid in pids]
    keys = [key.decode() for key in client.scan_iter(count=1000)]
    return [key for key in keys if any(mark in key for mark in marks)]


def embedded_boots(output: str) -> list[int]:
    """Pids that logged an embedded start."""
    prefix = "wurk: running embedded in the web process (pid "
    return [int(line.split(prefix, 1)[1].split(")", 1)[0]) for line in output.splitlines() if prefix in line]


# -- gunicorn, sync workers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("preload", [False, True], ids=["no-preload", "preload"])
def test_gunicorn_runs_one_embedded_worker_per_web_worker_and_drains_on_term(
        redis_db, servers, test_redis_url, preload):
    """DJ-065: many embedded instances are safe; RUN-845: gunicorn hooks module."""
    args = ["--preload"] if preload else []
    # Forking with a live thread warns on 3.12+: shown, so the master is seen to fork thread-free.
    server = Gunicorn(*args, redis_url=test_redis_url, env={"PYTHONWARNINGS": "always::DeprecationWarning"})
    servers.append(server)

    wait_for(lambda: len(heartbeats(redis_db)) >= 2, timeout=30, message="two embedded heartbeats")
    beats = heartbeats(redis_db)
    workers = server.workers()
    assert len(workers) == 2
    assert {info["pid"] for info in beats.values()} == workers
    assert server.pid not in {info["pid"] for info in beats.values()}
    assert all(info["embedded"] is True for info in beats.values())
    assert all(info["concurrency"] == 2 for info in beats.values())

    status, body = server.get("/enqueue/over-http/")
    assert status == 200
    jid = json.loads(body)["jid"]
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"over-http"], timeout=30, message="the job to run")
    assert redis_db.llen("queue:default") == 0

    # A job still running at TERM: TIMEOUT 8 s fits gunicorn's 30 s graceful_timeout, so it finishes.
    status, body = server.get("/slow/2/at-term/")
    assert status == 200
    wait_for(lambda: b"at-term" in redis_db.lrange("test:started", 0, -1), timeout=30, message="the slow job")
    assert server.stop(signal.SIGTERM) == 0

    assert redis_db.lrange("test:finished", 0, -1) == [b"at-term"]
    assert redis_db.llen("queue:default") == 0
    assert redis_db.smembers("processes") == set()
    assert leftovers(redis_db, list(beats), workers) == []
    output = server.output()
    assert sorted(embedded_boots(output)) == sorted(workers), output
    assert "multi-threaded" not in output
    assert jid


def test_gunicorn_term_requeues_a_job_longer_than_the_drain_budget(redis_db, servers, test_redis_url):
    # graceful_timeout 7 leaves 2 s to drain: the 60 s job cannot finish and must go back to its queue.
    server = Gunicorn("--graceful-timeout", "7", redis_url=test_redis_url)
    servers.append(server)
    wait_for(lambda: len(heartbeats(redis_db)) >= 2, timeout=30, message="two embedded heartbeats")
    identities = list(heartbeats(redis_db))
    workers = server.workers()

    status, body = server.get("/slow/60/too-long/")
    assert status == 200
    jid = json.loads(body)["jid"]
    wait_for(lambda: b"too-long" in redis_db.lrange("test:started", 0, -1), timeout=30, message="the slow job")
    assert server.stop(signal.SIGTERM) == 0

    requeued = [orjson.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]
    assert [job["jid"] for job in requeued] == [jid]
    assert redis_db.lrange("test:finished", 0, -1) == []
    assert redis_db.smembers("processes") == set()
    assert leftovers(redis_db, identities, workers) == []
    assert "does not fit gunicorn's graceful_timeout" in server.output()


def test_gunicorn_keeps_serving_while_redis_is_down_and_boots_once_it_is_up(redis_db, servers):
    """DJ-063: embedded boot failure logged; web keeps serving."""
    private = PrivateRedis()  # not started yet: the workers boot against a closed port
    try:
        server = Gunicorn(redis_url=private.url)
        servers.append(server)
        wait_for(lambda: server.output().count("embedded boot failed") >= 2, timeout=30,
                 message="both workers to report the failed boot")
        status, body = server.get("/pid/")
        assert status == 200
        assert int(body) in server.workers()

        private.start()
        client = private.client()
        wait_for(lambda: len(heartbeats(client)) == 2, timeout=60, message="the retried boots")
        beats = heartbeats(client)
        assert {info["pid"] for info in beats.values()} == server.workers()

        assert server.stop(signal.SIGTERM) == 0
        assert client.smembers("processes") == set()
        client.close()
    finally:
        private.stop()
    # Nothing of it reached the suite's own database.
    assert redis_db.smembers("processes") == set()


# -- gunicorn, ASGI worker with the lifespan wrapper -----------------------------------------------------------


def test_asgi_lifespan_starts_embedded_wurk_and_drains_it(redis_db, servers, test_redis_url):
    """RUN-842: the ASGI lifespan wrapper is an entry point: startup runs, shutdown stops."""
    # No hooks config: only the lifespan wrapper starts and stops wurk here.
    server = Gunicorn("--worker-class", "asgi", app="tests.embedded_app:asgi_application", config=None,
                      redis_url=test_redis_url)
    servers.append(server)
    wait_for(lambda: len(heartbeats(redis_db)) >= 2, timeout=30, message="two embedded heartbeats")
    beats = heartbeats(redis_db)
    workers = server.workers()
    assert {info["pid"] for info in beats.values()} == workers
    assert all(info["embedded"] is True for info in beats.values())

    status, _ = server.get("/enqueue/over-asgi/")
    assert status == 200
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"over-asgi"], timeout=30, message="the job to run")

    assert server.stop(signal.SIGTERM) == 0
    assert redis_db.smembers("processes") == set()
    assert leftovers(redis_db, list(beats), workers) == []
    assert sorted(embedded_boots(server.output())) == sorted(workers)


# -- runserver: the reloader parent runs nothing, the child starts on its first request -------------------------


def test_runserver_starts_in_the_reloader_child_on_its_first_request(redis_db, servers, test_redis_url):
    port = free_port()
    server = ServerProcess([sys.executable, str(ROOT / "manage.py"), "runserver", f"127.0.0.1:{port}",
                            "--skip-checks"], redis_url=test_redis_url)
    servers.append(server)
    child: list[int] = []
    try:
        wait_for(lambda: child.extend(children_of(server.pid, zombies=True)) or child, timeout=30,
                 message="the reloader child")

        def answered() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/pid/", timeout=5) as response:
                    return response.status == 200
            except OSError:
                return False

        assert redis_db.smembers("processes") == set()  # nothing before the first request
        wait_for(answered, timeout=30, message="runserver to answer")
        wait_for(lambda: len(heartbeats(redis_db)) >= 1, timeout=30, message="the embedded heartbeat")
        beats = heartbeats(redis_db)
        assert [info["pid"] for info in beats.values()] == child
        assert server.pid not in embedded_boots(server.output())
    finally:
        # SIGINT to the child alone: it exits through atexit, which drains, and the parent follows
        # it. (A terminal's Ctrl-C also hits the parent, whose subprocess.run kills the child
        # 0.25 s later; reliable fetch then brings its jobs back.)
        for pid in child:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        try:
            server.proc.wait(timeout=30)
        finally:
            server.stop(signal.SIGINT)
    assert server.proc.returncode == 0
    assert "wurk: embedded" not in server.output()  # no failed boot, no stop trouble
    assert redis_db.smembers("processes") == set()
    assert leftovers(redis_db, list(beats), set(child)) == []


# -- the embedded API in this process ----------------------------------------------------------------------------


@pytest.fixture
def embedded_settings(settings, test_redis_url):
    settings.WURK = {"REDIS_URL": test_redis_url, "TIMEOUT": 5, "MODE": "embedded"}
    yield settings
    embedded.stop(timeout=0)


def _handlers() -> dict[int, object]:
    names = ("SIGTERM", "SIGINT", "SIGTSTP", "SIGTTIN", "SIGUSR1", "SIGUSR2", "SIGQUIT")
    return {sig: signal.getsignal(sig) for sig in (getattr(signal, n) for n in names)}


def test_start_runs_a_two_thread_embedded_worker_without_touching_signals(redis_db, embedded_settings):
    """DJ-062: embedded concurrency 2, no signal handlers."""
    from tests.jobsapp.jobs import RecordJob

    before = _handlers()
    assert embedded.start() is True
    assert embedded.start() is True  # idempotent: still one worker
    assert _handlers() == before

    launcher = embedded.launcher()
    assert launcher is not None and launcher.embedded
    wait_for(lambda: heartbeats(redis_db), timeout=15, message="the heartbeat")
    [(identity, info)] = heartbeats(redis_db).items()
    assert info["embedded"] is True
    assert info["concurrency"] == 2
    assert info["pid"] == os.getpid()

    RecordJob.perform_async("in-process")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"in-process"], timeout=15, message="the job")

    embedded.stop()
    assert not embedded.running()
    assert launcher.stopped.is_set()
    assert redis_db.smembers("processes") == set()
    assert leftovers(redis_db, [identity], {os.getpid()}) == []


def test_stop_and_start_again_does_not_pile_up_connections(redis_db, embedded_settings):
    """RUN-504: `stop()` drains and disconnects pools."""
    def clients() -> int:
        return sum(1 for c in redis_db.client_list() if c.get("db") == str(redis_db.connection_pool.connection_kwargs["db"]))

    # Other clients of this process (earlier tests' pools, the tasks backend's async
    # client) may share the database; only what the embedded worker adds must go away.
    baseline = clients()
    assert embedded.start() is True
    wait_for(lambda: clients() > baseline, timeout=15, message="the worker to connect")
    embedded.stop()
    wait_for(lambda: clients() == baseline, timeout=15, message="the first run's sockets to close")
    assert embedded.start() is True
    wait_for(lambda: heartbeats(redis_db), timeout=15, message="the second run's heartbeat")
    embedded.stop()
    # The worker's pools were disconnected both times.
    wait_for(lambda: clients() == baseline, timeout=15, message="the second run's sockets to close")
    assert redis_db.smembers("processes") == set()


def test_a_failed_boot_is_logged_and_retried_until_stopped(redis_db, settings, caplog):
    settings.WURK = {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/12", "TIMEOUT": 5}
    try:
        assert embedded.start() is False
        assert "embedded boot failed" in caplog.text
        retry = embedded._current().retry_thread
        assert retry is not None and retry.is_alive()
        assert not embedded.running()
    finally:
        embedded.stop()
    retry.join(timeout=15)
    assert not retry.is_alive()
    assert not embedded.running()


def test_run_503_a_boot_that_fails_half_way_is_undone_and_the_site_keeps_serving(
        redis_db, embedded_settings, monkeypatch, caplog):
    """RUN-503: the drain hook is registered before the boot; a boot that raises after the
    worker's threads started (its heartbeat written) is logged and stopped (deregistered,
    nothing running) and ``start()`` returns False instead of raising. RUN-502: a server
    older than Redis 7 is refused, and not retried."""
    from wurk_django.errors import RedisVersionError
    from wurk_django.redis import connection
    from wurk_django.server.launcher import Launcher

    # This process's embedded worker as if none ever started here, given back afterwards:
    # the tests around this one see what they saw before it.
    monkeypatch.setattr(embedded, "_instance", None)
    monkeypatch.setattr(embedded, "_atexit_pid", None)
    original = Launcher.run
    started = []

    def run_then_fail(self):
        original(self)
        wait_for(lambda: redis_db.scard("processes") == 1, timeout=15, message="the half-booted worker's beat")
        started.append(self)
        raise RuntimeError("a boot step after run() failed")

    monkeypatch.setattr(Launcher, "run", run_then_fail)
    assert embedded.start() is False
    assert embedded._atexit_pid == os.getpid()
    assert "embedded boot failed" in caplog.text and "a boot step after run() failed" in caplog.text
    [launcher] = started
    assert launcher.stopped.is_set() and not embedded.running()
    assert redis_db.smembers("processes") == set()
    embedded.stop(timeout=0)

    monkeypatch.setattr(Launcher, "run", original)

    def too_old(client, config):
        raise RedisVersionError("wurk_django needs Redis 7.0 or newer; the server is 6.2.0.")

    monkeypatch.setattr(connection, "check_server", too_old)
    caplog.clear()
    assert embedded.start() is False
    assert "not retrying" in caplog.text and "6.2.0" in caplog.text
    assert embedded._current().retry_thread is None and not embedded.running()


def test_dj_045_embedded_start_autodiscovers_the_configured_modules(redis_db, embedded_settings, monkeypatch):
    """DJ-045: the embedded start runs ``autodiscover_modules`` for each name of
    ``WURK["AUTODISCOVER"]`` (default ``jobs`` then ``tasks``) before its worker runs."""
    from django.utils import module_loading

    monkeypatch.setattr(embedded, "_instance", None)  # given back afterwards (see above)
    seen = []
    original = module_loading.autodiscover_modules

    def recording(*names, **kwargs):
        seen.append((names, embedded.running()))
        return original(*names, **kwargs)

    monkeypatch.setattr(module_loading, "autodiscover_modules", recording)
    assert embedded.start() is True
    assert seen == [(("jobs",), False), (("tasks",), False)]
    embedded.stop(timeout=0)


def test_run_304_dashboard_signals_are_applied_in_embedded_mode_on_a_retained_thread(redis_db, embedded_settings,
                                                                                   monkeypatch):
    """RUN-304: the web server owns the process's signals, so an embedded worker applies a
    dashboard TSTP as ``quiet()`` and a TERM as ``stop()`` on one retained thread (a second
    TERM starts no other), never on the heartbeat's. A standalone worker re-delivers them
    to itself: tests/server/test_worker.py."""
    monkeypatch.setattr(embedded, "_instance", None)  # given back afterwards (see above)
    assert embedded.start() is True
    instance = embedded._current()
    launcher = embedded.launcher()
    instance._dashboard_signal("TSTP")
    wait_for(lambda: launcher.manager.stop_flag.is_set(), timeout=15, message="the worker to be quiet")
    assert embedded.running()
    instance._dashboard_signal("TERM")
    stopper = instance.stopper
    assert stopper is not None and stopper is not threading.current_thread()
    instance._dashboard_signal("TERM")
    assert instance.stopper is stopper
    wait_for(lambda: launcher.stopped.is_set(), timeout=30, message="the worker to stop")
    assert not embedded.running() and redis_db.smembers("processes") == set()


def test_stop_without_start_is_a_no_op(redis_db):
    before = threading.active_count()
    embedded.stop()
    assert embedded.launcher() is None
    assert threading.active_count() == before


@pytest.mark.parametrize(("wurk", "graceful", "worker_timeout", "budget"), [
    (25, 30, 30, 25),   # the defaults fit exactly
    (25, 20, 30, 15),   # a short graceful_timeout shortens the drain
    (25, 60, 20, 15),   # so does the worker timeout
    (25, 30, 0, 25),    # timeout 0 disables gunicorn's silent-worker kill
    (8, 3, 0, 0),       # never negative: requeue at once
])
def test_drain_budget(wurk, graceful, worker_timeout, budget):
    """RUN-846: gunicorn owns signals; timeout budget."""
    assert drain_budget(wurk, graceful, worker_timeout) == budget


# -- the ASGI wrapper's protocol ---------------------------------------------------------------------------------


def test_wrap_answers_lifespan_and_passes_http_through(redis_db, monkeypatch):
    import asyncio

    from wurk_django.asgi import wrap

    starts = []
    monkeypatch.setattr(embedded, "start", lambda **kwargs: starts.append(kwargs) or True)

    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    app = wrap(inner)
    sent = []
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message["type"])

    async def run():
        await app({"type": "lifespan"}, receive, send)
        await app({"type": "http"}, receive, send)

    asyncio.run(run())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert seen == ["http"]  # lifespan never reaches Django
    assert starts == []  # under pytest the boot decision skips
