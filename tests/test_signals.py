"""Lifecycle signals (DJ-047): a failing receiver never fails a job."""

from __future__ import annotations

import logging

from wurk_django import signals


def test_a_failing_receiver_is_logged_not_raised(caplog):
    calls = []

    def broken(sender, **kwargs):
        calls.append(kwargs["job"]["jid"])
        raise RuntimeError("receiver bug")

    signals.job_succeeded.connect(broken)
    try:
        with caplog.at_level(logging.ERROR, logger="wurk_django.worker"):
            signals.send(signals.job_succeeded, "X", job={"jid": "j1"}, elapsed=0.1)
    finally:
        signals.job_succeeded.disconnect(broken)
    assert calls == ["j1"]
    assert "receiver" in caplog.text and "receiver bug" in caplog.text

