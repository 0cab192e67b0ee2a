"""Database hygiene around jobs (CORE-116, RUN-848, DJ-042) with a real worker on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from tests.jobsapp.jobs import DatabaseJob
from tests.support import wait_for

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow


def _postgres():
    try:
        return psycopg.connect(host="127.0.0.1", dbname="test", user="postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not reachable: {exc}")


@pytest.mark.parametrize("extra", [{"CONN_MAX_AGE": 0}, {"CONN_MAX_AGE": 600, "CONN_HEALTH_CHECKS": True}],
                         ids=["per-job-connections", "persistent-with-health-checks"])
def test_a_killed_database_session_between_jobs_does_not_fail_the_next_job(redis_db, worker_factory, extra):
    admin = _postgres()
    worker_factory("-c", "1", settings="tests.settings_pg", env={"WURK_TEST_PG_EXTRA": json.dumps(extra)})
    DatabaseJob.perform_async("first")
    first = wait_for(lambda: redis_db.lrange("test:db", 0, -1), message="the first job")
    pid = int(first[0].decode().split(":")[1])
    # Kill the session the worker used, as a database restart or an idle timeout would.
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    DatabaseJob.perform_async("second")
    runs = wait_for(lambda: redis_db.llen("test:db") == 2 and redis_db.lrange("test:db", 0, -1), message="job 2")
    assert runs[1].decode().startswith("second:")
    assert int(runs[1].decode().split(":")[1]) != pid
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
    admin.close()
