"""Every test gets a flushed, dedicated Redis database (15 by default) and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from tests.support import NotifySocket, WorkerProcess
from wurk_django.client import push_spool

# Configs the tests build themselves (Config(raw=...)) keep RELIABLE_PUSH_SPOOL's default,
# True: their undelivered pushes at the end of the run go to a folder of this run, never to
# the user's real spool folder, where a later process pushing to the same port would find
# them. Never restored: the exit handler that saves them runs after the session ends.
SYSTEM_DEFAULT_SPOOL = push_spool.default_dir
_RUN_SPOOL = Path(tempfile.gettempdir()) / f"wurk-test-spool-{os.getpid()}"
push_spool.default_dir = lambda: _RUN_SPOOL


def _test_client() -> redis.Redis:
    from django.conf import settings

    url = settings.WURK_TEST_REDIS_URL
    client = redis.Redis.from_url(url)
    db = client.connection_pool.connection_kwargs.get("db", 0)
    if int(db) == 0:
        raise RuntimeError(f"refusing to run tests against Redis database 0 ({url}); use a dedicated one")
    return client


@pytest.fixture(autouse=True)
def redis_db():
    """The raw test database, flushed before and after each test (only this one)."""
    from wurk_django.conf import reset_config
    from wurk_django.redis import connection
    from wurk_django.server.fetch import slot as fetch_slot

    client = _test_client()
    client.flushdb()
    reset_config()
    connection.reset()
    # Each test starts as a process before its first heartbeat: naming every job it starts.
    fetch_slot._exact_until = float("inf")
    yield client
    _join_unblockers()
    client.flushdb()
    connection.reset()
    client.close()


def _join_unblockers() -> None:
    """Wait for the threads a fetcher's stop left ending this process's blocked reads
    (wurk_django.redis.blocked): every fetcher of the test process shares one
    connection name, so a late one would end the next test's blocked fetch."""
    import threading

    for thread in threading.enumerate():
        if thread.name == "wurk-unblock":
            thread.join(5)


@pytest.fixture(scope="session")
def redis_cluster_session():
    """A real Redis Cluster (3 primaries, 3 replicas, private ports), started once for the
    session, at the first test that asks for it; every node stopped by its pid at the end."""
    from tests.redis_servers import RedisClusterGroup

    group = RedisClusterGroup().start()
    yield group
    group.stop()


@pytest.fixture
def redis_cluster(redis_cluster_session):
    """The session's Redis Cluster, emptied before and after the test; wurk's memory of
    which servers are clusters is reset as for any test."""
    from wurk_django.redis import cluster

    redis_cluster_session.flush()
    cluster.forget()
    yield redis_cluster_session
    redis_cluster_session.flush()
    cluster.forget()


@pytest.fixture(autouse=True)
def default_language():
    """Every test ends back in ``LANGUAGE_CODE``: the test client runs ``LocaleMiddleware`` in
    this thread, so a request in French left French active for whatever test ran next in the
    process (``wurk_check_periodic`` then said "chaque jour" where a test reads "every day")."""
    from django.utils import translation

    yield
    translation.deactivate()


@pytest.fixture
def worker_factory():
    """Start real ``manage.py wurk`` processes; every one is stopped at teardown by pid."""
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs) -> WorkerProcess:
        proc = WorkerProcess(*args, **kwargs)
        started.append(proc)
        return proc

    yield start
    # TERM to every one first, then wait for each: their drains run side by side, so a test
    # of three workers waits for the slowest stop, not the sum of three (each takes about
    # two seconds idle: a fetch blocked in Redis finishes its block first).
    for proc in started:
        if proc.alive():
            try:
                proc.signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    # One TERM each (a second one is a hard shutdown), KILL for any that outlives the deadline.
    deadline = time.monotonic() + 15
    for proc in started:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def notify_socket():
    """A socket standing in for systemd's notify socket (pass ``.address`` as NOTIFY_SOCKET)."""
    sock = NotifySocket()
    yield sock
    sock.close()


@pytest.fixture
def wake_tokens_wanted(monkeypatch):
    """Pushes write wake-up tokens and ask Redis nothing about them, as while a fetcher in
    the polling fallback runs and they know it (wurk_django.wake_demand): round trips as
    before the question existed."""
    from wurk_django import wake_demand

    state = wake_demand._Known()
    state.wanted, state.sent = True, float("inf")
    monkeypatch.setattr(wake_demand, "known", lambda client: state)


@pytest.fixture
def isolated_registry(monkeypatch):
    """Job names registered by a test are forgotten after it."""
    from wurk_django import registry

    monkeypatch.setattr(registry, "_jobs", dict(registry._jobs))
