"""Fixtures of the status tests: a real worker process allowed to import tests.status; the
rest as the results tests have them."""

from __future__ import annotations

from tests.admin.conftest import admin_client  # noqa: F401 - the admin's signed-in client fixture
from tests.results.conftest import due, importing, tasks_backend, worker_fixture  # noqa: F401 - fixtures

worker = worker_fixture(importing("tests.status"))
