"""Strict job arguments (CORE-046..048)."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
import uuid

import pytest
from django.test import override_settings

from tests.jobsapp.jobs import RecordJob
from wurk_django import payload
from wurk_django.client.arguments import check_arguments, find_complex
from wurk_django.client.push import Client


@pytest.mark.parametrize(
    "args",
    [[], [None, True, False, 0, -1, 2**62, 1.5, "s"], [[1, [2, [3]]]], [{"a": {"b": [1, {"c": None}]}}]],
)
def test_json_native_arguments_pass_unchanged(args):  # CORE-046
    assert find_complex(args) is None
    assert check_arguments("X", args) is args


@pytest.mark.parametrize(
    ("args", "path", "culprit_type"),
    [
        ([(1, 2)], "args[0]", tuple),
        ([1, {3}], "args[1]", set),
        ([b"raw"], "args[0]", bytes),
        ([decimal.Decimal("1.5")], "args[0]", decimal.Decimal),
        ([dt.datetime(2024, 1, 1)], "args[0]", dt.datetime),
        ([dt.date(2024, 1, 1)], "args[0]", dt.date),
        ([uuid.UUID(int=1)], "args[0]", uuid.UUID),
        ([math.nan], "args[0]", float),
        ([1, [2, [math.inf]]], "args[1][1][0]", float),
        ([{"when": {"at": dt.time(1, 2)}}], "args[0]['when']['at']", dt.time),
        ([{1: "one"}], "args[0] key 1", int),
        ([object()], "args[0]", object),
    ],
)
def test_complex_value_is_found_with_its_path(args, path, culprit_type):  # CORE-046
    found_path, value = find_complex(args)
    assert found_path == path
    assert type(value) is culprit_type


def test_raise_names_value_type_and_position():  # CORE-047 "raise"
    when = dt.datetime(2024, 5, 6, 7, 8, 9)
    with pytest.raises(ValueError) as info:
        check_arguments("shop.jobs.SendReceipt", [42, {"when": when}], "raise")
    message = str(info.value)
    assert "shop.jobs.SendReceipt" in message
    assert repr(when) in message
    assert "datetime" in message
    assert "args[1]['when']" in message


def test_default_mode_is_raise():
    with pytest.raises(ValueError, match=r"args\[0\]"):
        check_arguments("X", [(1,)])


def test_warn_logs_and_coerces(caplog):  # CORE-047 "warn"
    when = dt.datetime(2024, 5, 6, 7, 8, 9)
    with caplog.at_level(logging.WARNING, logger="wurk_django.client.push"):
        result = check_arguments("X", [(1, 2), {"k": when}, {3: "three"}], "warn")
    assert result == [[1, 2], {"k": str(when)}, {"3": "three"}]
    assert any("args[0]" in r.getMessage() for r in caplog.records)


def test_false_coerces_silently(caplog):  # CORE-047 False
    with caplog.at_level(logging.DEBUG, logger="wurk_django.client.push"):
        result = check_arguments("X", [decimal.Decimal("2.50"), [1], (3,)], False)
    assert result == ["2.50", [1], [3]]
    assert not caplog.records


def test_coerced_result_is_json_encodable():
    result = check_arguments("X", [uuid.UUID(int=5), (math.inf,)], "warn")
    assert payload.loads(payload.dumps(result)) == [str(uuid.UUID(int=5)), ["inf"]]


def test_push_refuses_complex_arguments_and_writes_nothing(redis_db):  # CORE-047 at the call site
    with pytest.raises(ValueError, match="tuple"):
        RecordJob.perform_async((1, 2))
    assert redis_db.keys("*") == []


def test_push_warn_mode_pushes_coerced_arguments(redis_db):
    with override_settings(WURK={**_base(), "ON_COMPLEX_ARGUMENTS": "warn"}):
        RecordJob.perform_async((1, 2))
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["args"] == [[1, 2]]


class _StringifyDates:
    def __call__(self, job_class, job, queue, redis, call_next):
        job["args"] = [a.isoformat() if isinstance(a, dt.date) else a for a in job["args"]]
        return call_next()


class _AddComplex:
    def __call__(self, job_class, job, queue, redis, call_next):
        job["args"].append({1, 2})
        return call_next()


def test_arguments_are_checked_after_client_middleware(redis_db):  # CORE-048
    client = Client(config=None)
    client.middleware.add(_StringifyDates)
    jid = client.push({"class": RecordJob, "args": [dt.date(2024, 1, 2)]})
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["args"] == ["2024-01-02"]
    assert payload.loads(raw)["jid"] == jid


def test_middleware_that_adds_a_complex_value_is_caught(redis_db):  # CORE-048
    client = Client()
    client.middleware.add(_AddComplex)
    with pytest.raises(ValueError, match=r"args\[1\]"):
        client.push({"class": RecordJob, "args": [1]})
    assert redis_db.llen("queue:default") == 0


def test_bulk_checks_each_job(redis_db):  # CORE-048
    with pytest.raises(ValueError, match=r"args\[0\]"):
        Client().push_bulk({"class": RecordJob, "args": [[1], [(2,)]]})


def test_extra_payload_keys_pass_through(redis_db):  # CORE-010, CORE-048: only args are checked
    Client().push({"class": RecordJob, "args": [1], "custom": {"nested": [1, 2]}})
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["custom"] == {"nested": [1, 2]}


def _base():
    from django.conf import settings

    return dict(settings.WURK)


def test_integers_beyond_64_bits_are_refused_with_their_position():
    # The encoder cannot write them and Ruby would read them back as something else.
    with pytest.raises(ValueError, match=r"args\[1\]\[0\]"):
        check_arguments("X", [1, [2**70]])
    assert check_arguments("X", [2**63 - 1, -(2**63)]) == [2**63 - 1, -(2**63)]
