"""tests/parallel.py: each xdist worker gets a database, a port slice and a SQLite file of its own."""

from __future__ import annotations

import pytest

from tests import parallel


def _applied(**environ: str) -> dict[str, str]:
    env = dict(environ)
    parallel.apply(env)
    return env


def test_outside_xdist_nothing_changes():
    env = {"WURK_TEST_REDIS_URL": "redis://127.0.0.1:6379/15", "WURK_TEST_PORTS": "7100-7199"}
    assert _applied(**env) == env


def test_each_worker_takes_its_own_url_ports_and_sqlite_file():
    base = {"WURK_TEST_REDIS_URLS": "redis://127.0.0.1:6379/15, redis://127.0.0.1:6379/12",
            "WURK_TEST_PORTS": "7100-7199", "WURK_TEST_SQLITE": "/tmp/ci/py312-tests.sqlite3",
            "PYTEST_XDIST_WORKER_COUNT": "2"}
    first = _applied(**base, PYTEST_XDIST_WORKER="gw0")
    second = _applied(**base, PYTEST_XDIST_WORKER="gw1")
    assert (first["WURK_TEST_REDIS_URL"], second["WURK_TEST_REDIS_URL"]) == (
        "redis://127.0.0.1:6379/15", "redis://127.0.0.1:6379/12")
    assert (first["WURK_TEST_PORTS"], second["WURK_TEST_PORTS"]) == ("7100-7149", "7150-7199")
    assert (first["WURK_TEST_SQLITE"], second["WURK_TEST_SQLITE"]) == (
        "/tmp/ci/py312-tests-gw0.sqlite3", "/tmp/ci/py312-tests-gw1.sqlite3")


def test_without_a_list_the_databases_count_down_from_the_base():
    env = _applied(WURK_TEST_REDIS_URL="redis://127.0.0.1:6379/15", PYTEST_XDIST_WORKER="gw1",
                   PYTEST_XDIST_WORKER_COUNT="2")
    assert env["WURK_TEST_REDIS_URL"] == "redis://127.0.0.1:6379/14"
    assert env["WURK_TEST_PORTS"] == "7150-7199"


def test_a_process_started_by_a_worker_keeps_the_workers_values():
    """A worker process a test starts inherits PYTEST_XDIST_WORKER and the sliced values:
    slicing again would move it to another database and ports than its test's."""
    env = _applied(WURK_TEST_REDIS_URLS="redis://h/15 redis://h/12", WURK_TEST_PORTS="7100-7199",
                   PYTEST_XDIST_WORKER="gw1", PYTEST_XDIST_WORKER_COUNT="2")
    again = dict(env)
    parallel.apply(again)
    assert again == env
    assert env["WURK_TEST_REDIS_URL"] == "redis://h/12" and env["WURK_TEST_PORTS"] == "7150-7199"


@pytest.mark.parametrize(("env", "message"), [
    ({"WURK_TEST_REDIS_URLS": "redis://h/15", "PYTEST_XDIST_WORKER": "gw1"}, "gw1 has no database"),
    ({"WURK_TEST_REDIS_URL": "redis://h/1", "PYTEST_XDIST_WORKER": "gw1"}, "cannot derive a database"),
    ({"WURK_TEST_PORTS": "7100-7109", "PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "2"},
     "too small"),
])
def test_what_cannot_be_shared_safely_is_refused(env, message):
    with pytest.raises(RuntimeError, match=message):
        parallel.apply(dict(env))
