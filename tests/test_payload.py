"""payload.py: encoding, jids, timestamps, truthiness, scores (CORE-003..006, CORE-013, CORE-040)."""

from __future__ import annotations

import re
import time

import pytest

from tests import fixtures
from wurk_django import payload


def test_dumps_is_compact_and_keeps_key_order():  # CORE-003
    body = {"retry": True, "queue": "default", "class": "HardJob", "args": [1, "a", None, 2.5]}
    assert payload.dumps(body) == b'{"retry":true,"queue":"default","class":"HardJob","args":[1,"a",null,2.5]}'


def test_dumps_writes_raw_utf8_not_escapes():  # CORE-003: ensure_ascii=False
    assert payload.dumps(["héllo", "日本"]) == '["héllo","日本"]'.encode()


def test_dumps_refuses_non_string_keys():  # CORE-003: string keys only
    with pytest.raises(TypeError):
        payload.dumps({1: "x"})


def test_float_formatting_matches_ruby_for_ordinary_values():  # CORE-003
    assert payload.dumps([1.0, 0.1, 1700000000.5]) == b"[1.0,0.1,1700000000.5]"


@pytest.mark.parametrize("name", fixtures.names())
def test_every_fixture_round_trips_to_the_same_bytes(name):  # CORE-003/004: parse + dump is the identity
    raw = fixtures.raw(name)
    assert payload.dumps(payload.loads(raw)) == raw


def test_loads_accepts_str_and_bytes():
    assert payload.loads('{"a":1}') == payload.loads(b'{"a":1}') == {"a": 1}


def test_loads_keeps_float_and_int_apart():  # CORE-040 relies on it
    job = payload.loads(fixtures.raw("sidekiq7_perform_async"))
    assert isinstance(job["created_at"], float)
    job = payload.loads(fixtures.raw("sidekiq8_client_push"))
    assert isinstance(job["created_at"], int)


def test_new_jid_is_24_lowercase_hex_and_unique():  # CORE-013
    jids = {payload.new_jid() for _ in range(500)}
    assert len(jids) == 500
    assert all(re.fullmatch(r"[0-9a-f]{24}", j) for j in jids)


def test_now_ms_is_integer_milliseconds():  # CORE-016
    before = time.time()
    value = payload.now_ms()
    after = time.time()
    assert isinstance(value, int)
    assert int(before * 1000) <= value <= int(after * 1000) + 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000123, 1700000000.123),  # Sidekiq 8: int ms
        (1700000000.1234567, 1700000000.1234567),  # Sidekiq 7: float s
        (None, None),
        (True, None),
        ("1700000000", None),
    ],
)
def test_epoch_seconds_reads_both_units(value, expected):  # CORE-040
    assert payload.epoch_seconds(value) == expected


def test_epoch_seconds_agree_between_sidekiq7_and_8_fixtures():  # CORE-040
    old = payload.loads(fixtures.raw("sidekiq7_perform_async"))
    new = payload.loads(fixtures.raw("sidekiq8_perform_async"))
    assert payload.epoch_seconds(old["created_at"]) == pytest.approx(payload.epoch_seconds(new["created_at"]), abs=0.001)


@pytest.mark.parametrize("value", [0, "", [], {}, 0.0, True, "false"])
def test_truthy_follows_ruby(value):  # CORE-005
    assert payload.truthy(value) is True


@pytest.mark.parametrize("value", [None, False])
def test_only_nil_and_false_are_falsy(value):  # CORE-005
    assert payload.truthy(value) is False


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1700003600.5, "1700003600.5"), (1700000000, "1700000000.0"), (1700000000.123456, "1700000000.123456"), (0.1, "0.1")],
)
def test_score_is_shortest_round_trip_float(seconds, text):  # CORE-006
    assert payload.score(seconds) == text
    assert float(payload.score(seconds)) == float(seconds)


def test_fixtures_share_one_jid_and_clock():
    for name in fixtures.names():
        job = fixtures.load(name)
        assert job["jid"] == fixtures.JID, name
        assert payload.epoch_seconds(job["created_at"]) == pytest.approx(fixtures.NOW_MS / 1000, abs=0.001), name



def test_wire_format_setting_writes_seconds_or_milliseconds():
    # Issue 26 item 6: WIRE_FORMAT 6/7 writes Ruby's Time.now.to_f, 8 (the default) integer ms (CORE-040).
    from wurk_django.conf import Config

    assert Config().wire_format == payload.WireFormat(8)
    old = Config({"WIRE_FORMAT": "sidekiq7"}).wire_format
    assert old == Config({"WIRE_FORMAT": 6}).wire_format and old.float_seconds
    assert old.at(1700000000.5) == 1700000000.5 and payload.SIDEKIQ8.at(1700000000.5) == 1700000000500
    assert isinstance(old.now(), float) and isinstance(payload.SIDEKIQ8.now(), int)
    for bad in (True, 7.0, "7", 9):
        with pytest.raises(Exception, match="WIRE_FORMAT"):
            Config({"WIRE_FORMAT": bad})
    # Both units are read whatever the setting.
    assert payload.epoch_seconds(old.at(1700000000.5)) == payload.epoch_seconds(1700000000500) == 1700000000.5
