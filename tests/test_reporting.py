"""The built-in failure report (issue 28 item 8, issue 29 item 3): ERROR_HANDLERS add to
the worker's own log line instead of replacing it; tracebacks in development, which
DEBUG implies unless ENVIRONMENT says otherwise; a failing batch callback is named."""

from __future__ import annotations

import logging

from wurk_django.conf import Config
from wurk_django.reporting import development, report

CALLBACK = {"class": "Wurk::Batch::CallbackJob", "jid": "j1",
            "args": ["b-123", "shop.jobs.ImportDone", "success", {"upload": 7}]}


def _fail() -> ValueError:
    try:
        raise ValueError("boom")
    except ValueError as exc:
        return exc


def test_user_handlers_run_after_the_builtin_line(caplog, settings):
    seen = []
    config = Config({"ERROR_HANDLERS": [lambda exc, ctx, cfg: seen.append(str(exc))]})
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        report(_fail(), {"job": {"class": "shop.jobs.X", "jid": "abc"}}, config)
    assert seen == ["boom"]
    assert "Job raised exception: ValueError: boom (class=shop.jobs.X jid=abc)" in caplog.text


def test_debug_implies_development_unless_environment_says_otherwise(settings):
    settings.DEBUG = True
    assert development(Config({}))
    assert not development(Config({"ENVIRONMENT": "production"}))
    settings.DEBUG = False
    assert not development(Config({}))
    assert development(Config({"ENVIRONMENT": "development"}))


def test_development_logs_the_traceback(caplog, settings):
    settings.DEBUG = True
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        report(_fail(), {"job": {"class": "shop.jobs.X", "jid": "abc"}}, Config({}))
    assert caplog.records[-1].exc_info is not None
    settings.DEBUG = False
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        report(_fail(), {"job": {"class": "shop.jobs.X", "jid": "abc"}}, Config({}))
    assert caplog.records[-1].exc_info is None


def test_a_failing_batch_callback_names_its_target_and_event(caplog):
    with caplog.at_level(logging.WARNING, "wurk_django.worker"):
        report(KeyError("upload"), {"job": CALLBACK}, Config({}))
    assert "callback=shop.jobs.ImportDone event=success bid=b-123" in caplog.text
