"""The guide's examples run once per module on two long-lived workers, so the test
database is flushed when the module starts and ends, not around each test (a flush would
also wipe the Celery worker's queue bindings under it)."""

from __future__ import annotations

import pytest

from tests.conftest import _test_client


@pytest.fixture(scope="module")
def guide_db():
    from wurk_django.conf import reset_config
    from wurk_django.redis import connection

    client = _test_client()
    client.flushdb()
    reset_config()
    connection.reset()
    yield client
    client.flushdb()
    connection.reset()
    client.close()


@pytest.fixture(autouse=True)
def redis_db(guide_db):
    """The module's database, unflushed between its tests."""
    return guide_db
