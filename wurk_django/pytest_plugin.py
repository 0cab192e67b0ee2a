"""pytest fixtures for projects using wurk_django (DJ-032).

Enable them in the project's root ``conftest.py``::

    pytest_plugins = ["wurk_django.pytest_plugin"]

* ``wurk_fake``: fake mode for the test; yields :mod:`wurk_django.testing`
  (``wurk_fake.jobs(SendEmail)``, ``wurk_fake.drain_all()``...); records are
  cleared afterwards.
* ``wurk_inline``: jobs run as they are pushed.
* ``wurk_worker``: a callable that runs a real worker in the test's process
  until the queues are empty (``wurk_worker(timeout=30)``); jobs run with
  the full retry, middleware and database handling of ``manage.py wurk``.
* ``wurk_redis``: the Redis client of ``settings.WURK``, with that one logical
  database flushed before and after the test. It refuses database 0, so a
  test run cannot wipe a default database by mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import redis as redis_lib

from . import context, testing
from .conf import reset_config
from .redis import connection


@pytest.fixture
def wurk_fake() -> Iterator[ModuleType]:
    testing.clear_all()
    with testing.fake():
        yield testing
    testing.clear_all()


@pytest.fixture
def wurk_inline() -> Iterator[ModuleType]:
    with testing.inline():
        yield testing


def flushable_client() -> redis_lib.Redis:
    """A new client on ``settings.WURK``'s Redis; ``pytest.UsageError`` if that is database 0."""
    from .redis import pools
    from .redis.connection import probe_redis

    reset_config()
    config = context.config()
    # Built like the worker's own clients, so TLS, Sentinel and Unix-socket settings apply.
    client = probe_redis(config, timeout=10)
    db = pools.database_of(client)
    if db == 0:
        client.connection_pool.disconnect()
        raise pytest.UsageError(
            "wurk_redis flushes the configured Redis database; point WURK['REDIS_URL'] at a "
            "dedicated test database (not 0) in the test settings"
        )
    return client


@pytest.fixture
def wurk_redis() -> Iterator[redis_lib.Redis]:
    client = flushable_client()
    connection.reset()
    client.flushdb()
    try:
        yield client
    finally:
        client.flushdb()
        connection.reset()
        client.connection_pool.disconnect()


@pytest.fixture
def wurk_worker():
    """``wurk_worker(timeout=30.0)`` drains the queues with an in-process worker (DJ-032)."""
    # Lazy: this plugin loads with the conftest, before Django's apps are ready;
    # the worker engine is imported only by a test that asks for a worker.
    from .server.burst import run_burst

    return lambda timeout=30.0: run_burst(timeout=timeout)
