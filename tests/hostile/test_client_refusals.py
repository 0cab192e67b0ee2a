"""Issue 12, items 8 and 9: the client refuses what the worker or admin would refuse, at the call site."""

from __future__ import annotations

import datetime as dt
import enum

import pytest
from django.utils.safestring import mark_safe

from tests.jobsapp.jobs import RecordJob
from wurk_django.client.push import Client


class Color(enum.IntEnum):
    RED = 1


class Mood(str, enum.Enum):  # noqa: UP042 - the mixin form is what callers pass
    HAPPY = "happy"


class MyInt(int):
    pass


class MyStr(str):
    pass


@pytest.mark.parametrize("when", [float("inf"), float("-inf"), float("nan")])
def test_infinite_or_nan_run_times_are_refused(redis_db, when):
    with pytest.raises(ValueError, match="finite"):
        RecordJob.perform_in(when, 1)
    with pytest.raises(ValueError, match="finite"):
        RecordJob.set(wait=when).perform_async(1)
    with pytest.raises(ValueError, match="finite"):
        Client().push({"class": RecordJob, "args": [1], "at": when})
    with pytest.raises(ValueError, match="finite"):
        RecordJob.perform_bulk([[1]], at=when)
    assert not redis_db.exists("schedule", "queue:default")


@pytest.mark.parametrize("queue", ["a\nb", "a\x00b", "tab\there", "", 7, None, ["x"]])
def test_bad_queue_names_are_refused(redis_db, queue):
    with pytest.raises(ValueError):
        RecordJob.set(queue=queue).perform_async(1)
    assert not list(redis_db.scan_iter(match="queue:*"))


@pytest.mark.parametrize("queue", ["a b", "a|b", '"><svg onload=alert(9)>', "é", "mailers/high", "100%"])
def test_names_sidekiq_accepts_are_pushed_as_they_are(redis_db, queue):
    # Issue 26 item 7: Sidekiq takes any string; the pages and metrics escape it where shown.
    RecordJob.set(queue=queue).perform_async(1)
    assert redis_db.llen(f"queue:{queue}") == 1 and redis_db.smembers("queues") == {queue.encode()}


@pytest.mark.parametrize("option, value", [
    ("jid", 1001), ("jid", 5.5), ("retry_count", "abc"), ("retry_count", 1.5), ("retry", "yes"), ("retry", 2.5),
    ("retry_for", "1h"), ("retry_queue", "a\nb"), ("backtrace", "all"), ("dead", "no"), ("tags", "x"),
    ("tags", [1]), ("queue", 3), ("wrapped", 5), ("bid", 9),
])
def test_wrong_typed_options_are_refused(redis_db, option, value):
    with pytest.raises(ValueError, match=option):
        RecordJob.set(**{option: value}).perform_async(1)
    assert redis_db.llen("queue:default") == 0


@pytest.mark.parametrize("arg", [Color.RED, Mood.HAPPY, MyInt(3), MyStr("x"), mark_safe("<b>safe</b>"),
                                 {"k": Color.RED}, [MyStr("y")], {MyStr("k"): 1}])
def test_subclassed_arguments_are_refused_not_coerced(redis_db, arg):
    with pytest.raises(ValueError, match="native JSON types"):
        RecordJob.perform_async(arg)
    assert redis_db.llen("queue:default") == 0


def test_warn_mode_coerces_subclasses_to_their_plain_values(redis_db, settings):
    from wurk_django.client.arguments import check_arguments

    assert check_arguments("X", [Color.RED, Mood.HAPPY, MyInt(3), MyStr("x")], "warn") == [1, "happy", 3, "x"]
    assert [type(v) for v in check_arguments("X", [MyInt(3), MyStr("x")], False)] == [int, str]


def test_arguments_nested_past_the_worker_limit_are_refused(redis_db):
    value: list = []
    for _ in range(120):
        value = [value]
    with pytest.raises(ValueError, match="nested deeper"):
        RecordJob.perform_async(value)


def test_plain_options_still_pass(redis_db):
    jid = RecordJob.set(queue="a-b_c:d.e", retry=3, retry_for=60, tags=["t"], backtrace=5, dead=False,
                        jid="f" * 24).perform_in(dt.timedelta(seconds=0), 1)
    assert jid == "f" * 24 and redis_db.llen("queue:a-b_c:d.e") == 1


def test_encrypt_without_a_key_is_refused(redis_db):
    # Item 9: the argument was stored in plain text while the admin showed a mask. With
    # no key configured the encryption middleware refuses the push (ENT-603 divergence).
    from wurk_django.encryption.errors import EncryptionError

    with pytest.raises(EncryptionError, match="encrypt|key"):
        RecordJob.set(encrypt=True).perform_async("4111 1111 1111 1111")
    assert redis_db.llen("queue:default") == 0
    RecordJob.set(encrypt=False).perform_async("fine")
    assert redis_db.llen("queue:default") == 1
