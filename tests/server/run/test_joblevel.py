"""A job's ``log_level`` applies to its thread while it runs (issue 31 item 3: CORE-033, CORE-228)."""

from __future__ import annotations

import logging

import pytest

from tests.jobsapp.jobs import ChattyJob
from tests.support import wait_for
from wurk_django.server.run import joblevel


@pytest.mark.slow
def test_a_jobs_log_level_hides_its_lower_lines_only(redis_db, worker_factory):
    quiet = ChattyJob.perform_async("quiet")  # the class's "warn"
    loud = ChattyJob.set(log_level="info").perform_async("loud")  # overridden per push
    worker = worker_factory("-c", "1")
    wait_for(lambda: redis_db.llen("test:ran") == 2, timeout=60, message="both jobs")
    wait_for(lambda: f"jid={loud}" in worker.output() and "chatty-info loud" in worker.output(),
             timeout=30, message="the loud job's lines")
    output = worker.output()
    assert "chatty-warning quiet" in output
    assert "chatty-info quiet" not in output
    assert f"jid={quiet}" not in output  # no start/done lines at WARN
    assert "chatty-info loud" in output and "chatty-warning loud" in output
    assert "ignoring log_level" not in output


def test_levels_in_either_language_and_a_bad_one_ignored(caplog):
    assert [joblevel.parse(v) for v in ("warn", "WARNING", "fatal", "debug", 30, "40")] == [30, 30, 50, 10, 30, 40]
    assert joblevel.parse("loud") is None and joblevel.parse(True) is None
    with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
        previous = joblevel.enter("loud")
        joblevel.enter("loud")
    assert previous is None and joblevel.current() is None
    assert caplog.text.count("ignoring log_level 'loud'") == 1
    joblevel.leave(joblevel.enter("error"))
    assert joblevel.current() is None
