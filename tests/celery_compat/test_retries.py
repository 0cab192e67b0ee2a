"""Retries the Celery way on wurk's retry layer: ``self.retry()``, ``autoretry_for``,
``max_retries``, backoff (issue 27 item 2)."""

from __future__ import annotations

import json
import time

import pytest

from tests.celery_compat.tasks import Flaky, Refused, auto, bound_retry, fail, gives_up, more_retries
from wurk_django.celery import retrying, states


def test_self_retry_books_retries_until_the_task_succeeds(redis_db, drain, due_retries):
    result = bound_retry.delay("test:bound")
    drain()
    [entry] = due_retries()
    assert entry["retry_count"] == 0 and entry["error_class"] == "wurk_django.celery.exceptions.Retry"
    assert "not yet" in entry["error_message"]
    assert result.state == states.RETRY and not result.ready()
    drain()
    assert due_retries()[0]["retry_count"] == 1
    drain()
    assert result.get(timeout=5) == 2 and result.retries == 2
    assert redis_db.lrange("test:bound", 0, -1) == [f"{result.id}:{n}".encode() for n in range(3)]
    assert redis_db.zcard("dead") == 0


def test_retry_countdown_is_the_delay_asked(redis_db, drain):
    before = time.time()
    more_retries.delay("test:more")
    drain()
    [(raw, score)] = redis_db.zrange("retry", 0, -1, withscores=True)
    # countdown 5 and nothing more: the retry layer adds no jitter to a Celery task's countdown.
    assert before + 5 <= score <= time.time() + 5


def test_a_per_call_max_retries_above_the_tasks_is_honoured(redis_db, drain, due_retries):
    result = more_retries.delay("test:more")  # max_retries=1 on the task, 3 asked by the call
    for _ in range(2):
        drain()
        [entry] = due_retries()
        # The limit comes from the task's retry_limit hook: the stored job is never rewritten.
        assert entry["retry"] == 1
    drain()
    assert result.get(timeout=5) == "done"
    assert redis_db.lrange("test:more", 0, -1) == [b"0", b"1", b"2"]


def test_retries_used_up_raise_the_exc_and_the_task_fails(redis_db, drain, due_retries):
    result = gives_up.delay()
    drain()
    assert len(due_retries()) == 1
    drain()
    [dead] = redis_db.zrange("dead", 0, -1)
    assert json.loads(dead)["error_class"] == "tests.celery_compat.tasks.Flaky"
    assert result.state == states.FAILURE
    with pytest.raises(Flaky, match="still down"):
        result.get(timeout=5)


def test_autoretry_for_retries_listed_errors_with_backoff_then_dies(redis_db, drain, due_retries):
    before = time.time()
    result = auto.delay("test:auto", 5)
    drain()
    [(raw, score)] = redis_db.zrange("retry", 0, -1, withscores=True)
    assert score <= time.time() + 1 and score >= before  # backoff 2**0 with full jitter, nothing added
    assert json.loads(raw)["error_class"] == "tests.celery_compat.tasks.Flaky"
    due_retries()
    drain()  # max_retries=1: the second failure is the last
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 1
    assert isinstance(result.get(timeout=5, propagate=False), Flaky)


def test_an_error_not_in_autoretry_for_fails_at_once(redis_db, drain):
    result = fail.delay(7, "nope")
    drain()
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 1
    with pytest.raises(Refused) as caught:
        result.get(timeout=5)
    assert caught.value.code == 7  # rebuilt with its arguments


def test_decide_follows_celerys_options():
    class Options:
        max_retries = 3
        default_retry_delay = 180
        autoretry_for = (OSError,)
        dont_autoretry_for = (FileNotFoundError,)
        retry_kwargs = {"countdown": 7}
        retry_backoff = False
        retry_backoff_max = 600
        retry_jitter = False

    assert retrying.decide(Options, 0, OSError()) == 7
    assert retrying.decide(Options, 3, OSError()) is None
    assert retrying.decide(Options, 0, FileNotFoundError()) is None
    assert retrying.decide(Options, 0, ValueError()) is None
    Options.retry_backoff = 2
    assert retrying.decide(Options, 2, OSError()) == 8
    assert retrying.decide(Options, 9, OSError()) is None
    Options.max_retries = None  # for ever
    assert retrying.decide(Options, 9, OSError()) == 600
    assert retrying.retry_in(Options, 0, ValueError()) == "kill"
