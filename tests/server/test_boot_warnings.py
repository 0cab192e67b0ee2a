"""Boot warnings (issue 29 items 1 and 2): a worker names the job classes, periodic
entries and batch callbacks whose queue it does not serve, and warns about SQLite
with more than one thread."""

from __future__ import annotations

import logging

import pytest

from tests.jobsapp import jobs as _registered  # noqa: F401 - registers the job classes
from wurk_django.conf import Config
from wurk_django.server import boot_warnings


def test_unserved_queues_name_their_classes_and_periodic_entries():
    config = Config({"QUEUES": ["default"], "PERIODIC": [
        {"cron": "0 4 * * *", "job": "tests.jobsapp.jobs.add_numbers", "queue": "nightly"}]})
    unserved = boot_warnings.unserved_queues(config)
    assert "tests.jobsapp.jobs.add_numbers" in unserved["functions"]
    assert unserved["nightly"] == ["periodic tests.jobsapp.jobs.add_numbers"]
    assert "default" not in unserved


def test_batch_callbacks_are_named_when_default_is_not_served():
    unserved = boot_warnings.unserved_queues(Config({"QUEUES": ["functions"]}))
    assert unserved["default"][-1].startswith("batch callbacks")
    assert "functions" not in unserved


def test_sqlite_with_threads_warns_and_one_thread_does_not(caplog, settings):
    assert settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        boot_warnings.log_all(Config({"CONCURRENCY": 1, "QUEUES": ["default", "functions"]}))
    assert "SQLite" not in caplog.text
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        boot_warnings.log_all(Config({"CONCURRENCY": 4}))
    assert "database 'default' is SQLite" in caplog.text and "with 4 threads" in caplog.text


@pytest.mark.slow
def test_a_worker_logs_them_at_boot(worker_factory):
    worker = worker_factory("--burst", "-q", "default", "-c", "2")
    assert worker.wait(timeout=60) == 0
    out = worker.output()
    assert "jobs for these queues will wait for another worker" in out
    assert "'functions': tests.jobsapp.jobs.add_numbers" in out
    assert "is SQLite" in out


def test_the_served_queues_are_shell_quoted(caplog):
    # Issue 26 item 7: a queue name may hold a space; the hint must be a usable command line.
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        boot_warnings.log_all(Config({"CONCURRENCY": 1, "QUEUES": ["mailers/high", "with space"]}))
    assert "serves only -q mailers/high -q 'with space';" in caplog.text
