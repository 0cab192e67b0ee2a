"""``WURK["QUEUE_LIMITS"]`` is checked, each bad entry named (issue 47 item 4)."""

from __future__ import annotations

import pytest

from tests.support import wurk_settings
from wurk_django.conf import Config, problems
from wurk_django.errors import ConfigurationError
from wurk_django.server.fetch.basic import BasicFetch


def test_off_by_default():
    assert Config().queue_limits == {}


def test_a_valid_value_is_read():
    assert Config(QUEUE_LIMITS={"reports": 2, "exports": 1}).queue_limits == {"reports": 2, "exports": 1}


@pytest.mark.parametrize(("value", "named"), [
    ({"reports": 0}, "the limit of queue 'reports' is 0; it must be at least 1"),
    ({"reports": -3}, "the limit of queue 'reports' is -3"),
    ({"reports": "2"}, "the limit of queue 'reports' is '2', not an integer"),
    ({"reports": 2.5}, "the limit of queue 'reports' is 2.5, not an integer"),
    ({"reports": True}, "the limit of queue 'reports' is True, not an integer"),
    ({"": 2}, "'' is not a queue name"),
    ({3: 2}, "3 is not a queue name"),
    (["reports", 2], "['reports', 2] is not a dict"),
])
def test_a_bad_value_is_named_by_the_check_and_refused_by_the_worker(value, named):
    found = [p for p in problems({"QUEUE_LIMITS": value}) if p.key == "QUEUE_LIMITS"]
    assert found and named in found[0].message
    with pytest.raises(ConfigurationError, match="QUEUE_LIMITS"):
        Config(QUEUE_LIMITS=value)


def test_the_system_check_reports_it():
    from django.core.checks import run_checks

    with wurk_settings(QUEUE_LIMITS={"reports": 0}):
        errors = [e for e in run_checks() if "QUEUE_LIMITS" in str(e.msg) or "QUEUE_LIMITS" in str(e.obj)]
    assert errors and "at least 1" in str(errors[0].msg)


def test_basic_fetch_refuses_a_capped_queue_it_would_serve():
    with pytest.raises(ConfigurationError, match="reliable fetch"):
        BasicFetch(Config(QUEUES=["reports"], QUEUE_LIMITS={"reports": 1}))
    BasicFetch(Config(QUEUES=["default"], QUEUE_LIMITS={"reports": 1}))  # not its queue: fine


def test_a_basic_fetch_worker_on_a_capped_queue_says_why_in_one_line_and_exits(worker_factory):
    """Kept a refusal (issue 47 item 4, the polish): a real ``manage.py wurk`` exits 1 with
    one line naming the queue and the way out, before touching Redis, no traceback."""
    import json

    extra = {"QUEUE_LIMITS": {"reports": 1}, "FETCH_CLASS": "wurk_django.server.fetch.basic.BasicFetch"}
    worker = worker_factory("-q", "default", "-q", "reports", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    assert worker.wait(timeout=120) == 1
    out = worker.output()
    assert "wurk: WURK['QUEUE_LIMITS'] caps reports, which needs the default reliable fetch" in out
    assert "Leave FETCH_CLASS unset" in out and "Traceback" not in out
