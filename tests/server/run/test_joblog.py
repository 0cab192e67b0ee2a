"""Job log lines (CORE-228): the direct route under the worker's logging setup, the stdlib route otherwise."""

from __future__ import annotations

import io
import logging
import re

import orjson
import pytest

from wurk_django.conf import Config
from wurk_django.server.logwriter import BatchingStreamHandler
from wurk_django.server.run import joblog
from wurk_django.server.run.joblog import JobLogger, JSONFormatter, PlainFormatter

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture
def worker_logging():
    """The handler ``manage.py wurk`` installs, on the real ``wurk_django`` logger; restored afterwards."""
    root = logging.getLogger("wurk_django")
    saved = (root.handlers[:], root.propagate, root.level)
    stream = io.StringIO()
    handler = BatchingStreamHandler(stream, interval=60)
    handler.setFormatter(PlainFormatter())
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(logging.INFO)
    yield handler, stream
    handler.close()
    root.handlers[:], root.propagate, level = saved
    root.setLevel(level)


def _alone(handler: BatchingStreamHandler) -> None:
    """pytest adds its capture handlers for the test's call phase; a worker has only its own."""
    logging.getLogger("wurk_django").handlers[:] = [handler]


def test_worker_setup_takes_the_direct_route_and_writes_the_documented_line(worker_logging):
    handler, stream = worker_logging
    _alone(handler)
    assert joblog._direct_route() == (handler, handler.formatter)
    # CORE-034: a job's `bid` is logged by default (LOGGED_JOB_ATTRIBUTES' default).
    log = JobLogger(Config({}).logged_job_attributes, skip=False)
    ctx = log.context({"jid": "abc123", "class": "app.jobs.Send", "bid": "b1", "queue": "q"})
    log.start(ctx)
    log.done(ctx, 0)
    handler.flush()
    start, done = stream.getvalue().splitlines()
    assert re.fullmatch(STAMP + r" pid=\d+ tid=[0-9a-z]+ jid=abc123 class=app\.jobs\.Send bid=b1 INFO: start", start)
    assert re.fullmatch(STAMP + r" pid=\d+ tid=[0-9a-z]+ jid=abc123 class=app\.jobs\.Send bid=b1 elapsed=[\d.]+ INFO: done",
                        done)


def test_a_filter_on_the_job_logger_sends_lines_through_stdlib_logging(worker_logging):
    handler, stream = worker_logging
    seen = []

    def keep_only_done(record: logging.LogRecord) -> bool:
        seen.append(record.getMessage())
        return record.getMessage() == "done"

    _alone(handler)
    joblog.logger.addFilter(keep_only_done)
    try:
        assert joblog._direct_route() is None
        log = JobLogger([], skip=False)
        ctx = log.context({"jid": "j", "class": "C"})
        log.start(ctx)
        log.done(ctx, 0)
    finally:
        joblog.logger.removeFilter(keep_only_done)
    handler.flush()
    assert seen == ["start", "done"]
    [line] = stream.getvalue().splitlines()
    assert line.endswith(" INFO: done") and "jid=j class=C elapsed=" in line


@pytest.mark.parametrize("change", ["second handler", "level", "propagate", "other formatter"])
def test_any_other_configuration_takes_the_stdlib_route(worker_logging, change):
    handler, _ = worker_logging
    _alone(handler)
    assert joblog._direct_route() is not None
    root = logging.getLogger("wurk_django")
    extra = logging.StreamHandler(io.StringIO())
    if change == "second handler":
        root.addHandler(extra)
    elif change == "level":
        handler.setLevel(logging.WARNING)
    elif change == "propagate":
        root.propagate = True
    else:
        handler.setFormatter(logging.Formatter("%(message)s"))
    try:
        assert joblog._direct_route() is None
    finally:
        root.removeHandler(extra)


def test_logger_at_warning_writes_no_job_lines(worker_logging):
    handler, stream = worker_logging
    logging.getLogger("wurk_django").setLevel(logging.WARNING)
    log = JobLogger([], skip=False)
    log.start(log.context({"jid": "j", "class": "C"}))
    handler.flush()
    assert stream.getvalue() == ""


def _record(ctx: dict) -> logging.LogRecord:
    record = logging.LogRecord("wurk_django.job", logging.INFO, "", 0, "done", None, None)
    record.created, record.msecs = 1764410416.021, 21
    record.wurk = ctx
    return record


def test_plain_render_is_what_format_produces():
    ctx = {"jid": "j1", "class": "C", "tags": ["a"], "bid": None, "elapsed": 0.5}
    formatter = PlainFormatter()
    rendered = formatter.render(1764410416, 21, "INFO", "wurk_django.job", "done", ctx)
    assert formatter.format(_record(ctx)) == rendered
    assert rendered.startswith("2025-11-29T10:00:16.021Z pid=")
    assert rendered.endswith(" jid=j1 class=C tags=['a'] elapsed=0.5 INFO: done")


def test_json_render_is_what_format_produces():
    ctx = {"jid": "j1", "class": "C", "elapsed": 0.5}
    formatter = JSONFormatter()
    rendered = formatter.render(1764410416, 21, "INFO", "wurk_django.job", "done", ctx)
    assert formatter.format(_record(ctx)) == rendered
    data = orjson.loads(rendered)
    assert data["ts"] == "2025-11-29T10:00:16.021Z" and data["ctx"] == ctx
    assert (data["lvl"], data["logger"], data["msg"]) == ("INFO", "wurk_django.job", "done")
