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
    if extra["CONN_MAX_AGE"] == 0:
        # The guard after the job closed the connection: the worker holds no idle session.
        wait_for(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                       (pid,)).fetchone()[0] == 0, message="the session to close after the job")
    # Kill the session the worker used, as a database restart or an idle timeout would.
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    DatabaseJob.perform_async("second")
    runs = wait_for(lambda: redis_db.llen("test:db") == 2 and redis_db.lrange("test:db", 0, -1), message="job 2")
    assert runs[1].decode().startswith("second:")
    assert int(runs[1].decode().split(":")[1]) != pid
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
    admin.close()


@pytest.mark.django_db(transaction=True)
def test_the_guard_runs_only_in_a_thread_with_an_open_connection(monkeypatch):
    """RUN-706: a job that never touches the database pays nothing for the guard; one that does
    gets both checks, and under CONN_MAX_AGE = 0 its connection is closed after the job."""
    import threading

    from django.db import connection

    from wurk_django.server.run import database

    calls = []
    real = database.close_old_connections
    monkeypatch.setattr(database, "close_old_connections", lambda: (calls.append(1), real()))
    seen = {}

    def processor_thread() -> None:
        try:
            database.before_job()
            database.after_job()
            seen["no database"] = len(calls)
            database.before_job()
            connection.ensure_connection()  # the job uses the database
            database.after_job()
            seen["used it"] = len(calls)
            seen["closed after the job"] = connection.connection is None
            database.before_job()
            connection.ensure_connection()
            database.after_job()
            seen["used it again"] = len(calls)
        finally:
            database.close_thread_connections()

    thread = threading.Thread(target=processor_thread)
    thread.start()
    thread.join(timeout=30)
    assert (seen["no database"], seen["used it"]) == (0, 1)
    # SQLite's in-memory test database ignores close(); PostgreSQL really closes (see the
    # per-job-connections case above). Once closed, the thread is unmarked until it connects again.
    assert seen["used it again"] == (2 if seen["closed after the job"] else 3)


@pytest.mark.django_db(transaction=True)
def test_under_debug_each_job_starts_with_an_empty_query_log(settings):
    """CORE-116: queries logged under DEBUG do not pile up from job to job."""
    import threading

    from django.db import connection

    from wurk_django.server.run import database

    settings.DEBUG = True
    seen = {}

    def processor_thread() -> None:
        try:
            database.before_job()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            seen["during the first job"] = len(connection.queries)
            database.after_job()
            database.before_job()
            seen["at the start of the next"] = len(connection.queries)
            database.after_job()
        finally:
            database.close_thread_connections()

    thread = threading.Thread(target=processor_thread)
    thread.start()
    thread.join(timeout=30)
    assert seen == {"during the first job": 1, "at the start of the next": 0}
