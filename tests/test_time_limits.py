"""Time limits bounded (issue 43 item 6): a limit above a day is refused at the push and at
class definition, and a fetched payload's bad limits are ignored with one line per run.
(A real worker given such a payload: tests/server/stopping/test_time_limits.py.)"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from tests.jobsapp.limit_jobs import SoftCaught
from wurk_django import time_limits


@pytest.mark.parametrize("name", ["time_limit", "soft_time_limit"])
@pytest.mark.parametrize("bad", [86400.5, 86401, 1e308, 10**400, dt.timedelta(days=1, seconds=1)],
                         ids=["86400.5", "86401", "1e308", "10**400", "timedelta"])
def test_a_limit_above_a_day_is_refused_at_the_push(redis_db, name, bad):
    with pytest.raises(ValueError) as refused:
        SoftCaught.set(**{name: bad}).perform_async("x")
    message = str(refused.value)
    assert repr(name) in message and "maximum of 86400 seconds" in message
    assert ("above the maximum" in message) and redis_db.llen("queue:default") == 0
    if isinstance(bad, float):
        assert repr(bad) in message  # the value itself is named


@pytest.mark.parametrize("name", ["time_limit", "soft_time_limit"])
def test_a_day_itself_is_accepted(redis_db, name):
    SoftCaught.set(**{name: 86400}).perform_async("x")
    SoftCaught.set(**{name: dt.timedelta(days=1)}).perform_async("x")
    assert redis_db.llen("queue:default") == 2


def test_a_class_with_a_limit_above_a_day_is_refused_at_definition():
    with pytest.raises(TypeError, match="above the maximum of 86400"):
        type("TooLong", (SoftCaught,), {"__module__": __name__, "time_limit": dt.timedelta(days=2)})


def test_a_huge_integer_is_named_without_being_printed_in_full():
    reason = time_limits.problem("time_limit", 10**5000)  # str() of it would raise ValueError
    assert reason is not None and "digits" in reason and len(reason) < 200


def test_a_fetched_job_with_bad_limits_logs_one_line_and_runs_without_them(caplog):
    job = {"jid": "j" * 24, "class": "X", "time_limit": 1e308, "soft_time_limit": float("nan")}
    with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
        assert time_limits.read(job) == (None, None)
    [line] = [r.getMessage() for r in caplog.records]
    assert "'time_limit' is 1e+308 seconds, above the maximum of 86400" in line
    assert "'soft_time_limit' must be a finite number" in line and "j" * 24 in line
    caplog.clear()
    assert time_limits.read({"jid": "ok", "time_limit": 5, "soft_time_limit": 2.5}) == (2.5, 5.0)
    assert caplog.records == []
