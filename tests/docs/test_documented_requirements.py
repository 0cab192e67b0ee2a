"""Requirements the specification meets with documentation: the page says it, in words a
reader finds. Each test names its requirement and the sentence it looks for, so a page
rewritten without it fails here rather than going unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"


def _text(page: str) -> str:
    # One line per paragraph: sentences wrapped across lines are found whole.
    return re.sub(r"\s+", " ", (DOCS / page).read_text())


def test_a_requeued_job_restarts_from_scratch_so_jobs_should_be_idempotent():
    """CORE-158: docs/reliability.md says a job may run more than once, from its start,
    and how to make jobs safe to run twice."""
    text = _text("reliability.md")
    assert "A job may run **more than once**" in text and "write jobs that can safely run twice" in text
    assert "the jobs that were running in the killed process, from their start" in text


def test_the_at_least_once_window_of_a_held_acknowledgement():
    """PRO-133: docs/reliability.md says delivery is at least once and that a hard kill may
    re-run a job that finished but whose acknowledgement waited for the next fetch."""
    text = _text("reliability.md")
    assert "**At least once.**" in text
    assert "whose acknowledgement was still held back (acknowledgements ride the next fetch" in text


def test_outside_a_job_the_caller_catches_over_limit_and_keeps_the_wait_short():
    """ENT-154: docs/limiters.md says that outside a job (a view) the caller catches
    ``OverLimit`` itself, answering 429 in its example, with a short ``wait_timeout``."""
    text = _text("limiters.md")
    assert "Anywhere else, such as a view, you catch it yourself and keep `wait_timeout` short" in text
    assert 'except limiter.OverLimit: return HttpResponse("Slow down", status=429)' in text


def test_no_fairness_and_no_combining_of_limiters_and_waiting_holds_a_thread():
    """ENT-155: docs/limiters.md says waiting occupies the worker thread and that there is
    no fairness between waiters and no combining of limiters."""
    text = _text("limiters.md")
    assert "Waiting occupies the worker thread." in text
    assert "There is no fairness between waiters and no combining of limiters." in text
