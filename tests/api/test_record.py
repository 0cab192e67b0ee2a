"""JobRecord: parsing, timestamps in both units, display helpers, backtraces (CORE-164, CORE-040, CORE-027)."""

from __future__ import annotations

import base64
import time
import zlib
from datetime import UTC, datetime

import orjson
import pytest

from tests import fixtures
from tests.api.helpers import backtrace_blob, job, raw
from wurk_django.api import JobRecord, Queue


def test_sidekiq8_payload_fields_and_int_ms_timestamps():
    # CORE-164 / CORE-040: an int timestamp is epoch milliseconds.
    record = JobRecord(fixtures.raw("sidekiq8_retry_second"))
    assert record.value == fixtures.raw("sidekiq8_retry_second")
    assert record.klass == "HardJob"
    assert record.args == ["bob", 5]
    assert record.jid == fixtures.JID
    assert record.queue == "default"
    assert record.created_at == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert record.enqueued_at == datetime.fromtimestamp(1700000017.0, tz=UTC)
    assert record.failed_at == datetime.fromtimestamp(1700000001.456, tz=UTC)
    assert record.retried_at == datetime.fromtimestamp(1700000017.890, tz=UTC)
    assert record.error_class == "NoMethodError"
    assert record.error_message == "undefined method 'name' for nil"
    assert record["retry_count"] == 1
    assert record.tags == []  # CORE-164: tags default to []
    assert record.bid is None


def test_sidekiq7_float_seconds_timestamps():
    # CORE-040: a JSON float is epoch seconds (Sidekiq <= 7).
    record = JobRecord(fixtures.raw("sidekiq7_retry_first"))
    assert record.created_at == datetime.fromtimestamp(1700000000.1234567, tz=UTC)
    assert record.enqueued_at == datetime.fromtimestamp(1700000000.1245, tz=UTC)
    assert record.failed_at == datetime.fromtimestamp(1700000001.456, tz=UTC)
    assert record.failed_at.year == 2023


def test_created_at_falls_back_to_enqueued_at():
    record = JobRecord(raw({"class": "X", "args": [], "enqueued_at": 1_700_000_000_000}))
    assert record.created_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert JobRecord(raw({"class": "X", "args": []})).created_at is None


@pytest.mark.parametrize("stamp", [
    lambda: int((time.time() - 30) * 1000),  # Sidekiq 8: int ms
    lambda: time.time() - 30.0,  # Sidekiq <= 7: float seconds
])
def test_latency_reads_both_units(stamp):
    # CORE-040: latency = now - enqueued_at, whatever unit it was written in.
    record = JobRecord(raw(job("a" * 24, enqueued_at=stamp())))
    assert 29.5 < record.latency < 31.0


def test_latency_uses_created_at_without_enqueued_at_and_zero_without_either():
    record = JobRecord(raw({"class": "X", "args": [], "created_at": int((time.time() - 10) * 1000)}))
    assert 9.5 < record.latency < 11
    assert JobRecord(raw({"class": "X", "args": []})).latency == 0.0


def test_unparseable_value_gives_empty_item_and_raw_args():
    # CORE-164: unparseable -> {} with args = [raw].
    record = JobRecord(b"{not json")
    assert record.item == {}
    assert record.args == ["{not json"]
    assert record.parse_error is True
    assert record.klass == "Unknown"
    assert record.display_class == "Unknown"
    assert record.display_args == ["{not json"]
    assert record.jid is None
    assert JobRecord(b"[1,2]").item == {}  # valid JSON but not an object


def test_dict_input_is_serialized_compactly():
    record = JobRecord({"class": "X", "args": [1], "jid": "j"}, "q")
    assert record.value == b'{"class":"X","args":[1],"jid":"j"}'
    assert record.queue == "q"


def test_activejob_wrapper_shows_the_wrapped_class_and_its_arguments():
    # CORE-164 / CORE-031: Sidekiq 8 wrapper name.
    record = JobRecord(fixtures.raw("sidekiq8_activejob"))
    assert record.klass == "Sidekiq::ActiveJob::Wrapper"
    assert record.display_class == "ReportJob"
    assert record.display_args == [42]


def test_old_activejob_wrapper_name_and_activejob_bookkeeping_is_stripped():
    # CORE-164: both wrapper names; GlobalID hashes shown as the GID, _aj_* keys dropped.
    item = {
        "class": "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
        "wrapped": "SyncJob",
        "queue": "default",
        "args": [{"job_class": "SyncJob", "arguments": [
            {"_aj_globalid": "gid://app/User/1"},
            {"force": True, "_aj_symbol_keys": ["force"]},
            [1, {"_aj_ruby2_keywords": ["x"], "x": 2}],
        ]}],
    }
    record = JobRecord(raw(item))
    assert record.display_class == "SyncJob"
    assert record.display_args == ["gid://app/User/1", {"force": True}, [1, {"x": 2}]]


def test_action_mailer_delivery_jobs_show_mailer_and_method():
    # CORE-164: DeliveryJob / MailDeliveryJob displayed as Mailer#method.
    delivery = JobRecord(raw({
        "class": "Sidekiq::ActiveJob::Wrapper", "wrapped": "ActionMailer::DeliveryJob",
        "args": [{"job_class": "ActionMailer::DeliveryJob",
                  "arguments": ["UserMailer", "welcome", "deliver_now", {"_aj_globalid": "gid://app/User/7"}]}],
    }))
    assert delivery.display_class == "UserMailer#welcome"
    assert delivery.display_args == ["gid://app/User/7"]

    mail = JobRecord(raw({
        "class": "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped": "ActionMailer::MailDeliveryJob",
        "args": [{"job_class": "ActionMailer::MailDeliveryJob",
                  "arguments": ["OrderMailer", "shipped", "deliver_now",
                                {"params": {"order": 5}, "args": ["now"], "_aj_symbol_keys": ["params", "args"]}]}],
    }))
    assert mail.display_class == "OrderMailer#shipped"
    assert mail.display_args == [{"order": 5}, ["now"]]


def test_display_class_override_and_encrypted_last_arg_masked():
    # CORE-032 / CORE-036: display_class wins; encrypt masks the last arg only for display.
    record = JobRecord(raw({"class": "Secret", "display_class": "Shown", "args": [1, "Y2lwaGVydGV4dA=="],
                            "encrypt": True}))
    assert record.display_class == "Shown"
    assert record.display_args == [1, "[encrypted data]"]
    assert record.args == [1, "Y2lwaGVydGV4dA=="]  # the payload itself is untouched
    # CORE-005: Ruby truthiness, 0 is true; false is false.
    assert JobRecord(raw({"class": "S", "args": [1, "c2VjcmV0"], "encrypt": 0})).display_args == [1, "[encrypted data]"]
    assert JobRecord(raw({"class": "S", "args": [1, "c2VjcmV0"], "encrypt": False})).display_args == [1, "c2VjcmV0"]
    # Issue 12: no mask over plain text; only a Base64 string can be ciphertext.
    # (and no plain text shown either: it is hidden under a label that says what it is).
    hidden = "[hidden: stored unencrypted]"
    assert JobRecord(raw({"class": "S", "args": [1, 2], "encrypt": True})).display_args == [1, hidden]
    assert JobRecord(raw({"class": "S", "args": [{"card": "4111"}], "encrypt": True})).display_args == [hidden]
    assert JobRecord(raw({"class": "S", "args": ["plain words"], "encrypt": True})).display_args == [hidden]


def test_error_backtrace_decoding_is_lenient_and_corrupt_gives_none():
    # CORE-027: base64(zlib(JSON list)); lenient reading; corrupt -> nothing.
    lines = ["app/jobs.py:10:in 'perform'", "wurk_django/processor.py:99:in 'run'"]
    blob = backtrace_blob(lines)
    assert JobRecord(raw({"class": "X", "args": [], "error_backtrace": blob})).error_backtrace == lines
    # Ruby's pack("m") wraps lines every 60 characters; missing padding must not matter either.
    wrapped = base64.encodebytes(zlib.compress(orjson.dumps(lines))).decode()
    assert "\n" in wrapped
    assert JobRecord(raw({"class": "X", "args": [], "error_backtrace": wrapped})).error_backtrace == lines
    unpadded = blob.rstrip("=")
    assert JobRecord(raw({"class": "X", "args": [], "error_backtrace": unpadded})).error_backtrace == lines
    assert JobRecord(raw({"class": "X", "args": [], "error_backtrace": "bm90IHpsaWI="})).error_backtrace is None
    assert JobRecord(raw({"class": "X", "args": [], "error_backtrace": "!!!"})).error_backtrace is None
    assert JobRecord(raw({"class": "X", "args": []})).error_backtrace is None


def test_iterable_state_reads_the_it_hash(redis_db):
    # CORE-164 / CORE-221: it-<jid> fields ex, c (JSON), rt, cancelled.
    redis_db.hset("it-abc", mapping={"ex": "3", "c": '{"page":4}', "rt": "12.5"})
    record = JobRecord(raw(job("abc")))
    assert record.iterable_state == {"executions": 3, "runtime": 12.5, "cursor": {"page": 4}, "cancelled": None}
    redis_db.hset("it-abc", "cancelled", "1700000000")
    assert record.iterable_state["cancelled"] == 1700000000
    assert JobRecord(raw(job("nothing"))).iterable_state is None


def test_delete_removes_one_copy_by_exact_bytes(redis_db):
    # CORE-164 / CORE-004: delete() = LREM queue:<q> 1 <value>.
    value = raw(job("dup"))
    redis_db.lpush("queue:default", value, value)
    record = next(iter(Queue("default")))
    assert record.delete() is True
    assert redis_db.lrange("queue:default", 0, -1) == [value]
