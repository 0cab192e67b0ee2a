"""The one serializer of write operations (issue 24 item 3): for plain jobs it makes the
very commands the writer sent before operations existed, byte for byte, so Sidekiq
readers see identical data and a push costs the same round trip. The expected commands
below were recorded from the writer at e0b5889 (before typed operations)."""

from __future__ import annotations

import pytest

from wurk_django import payload
from wurk_django.client import operations
from wurk_django.client import writer as writer_module
from wurk_django.client.operations import Enqueue, Extra, Schedule
from wurk_django.client.writer import Writer

NOW_MS = 1700000000999


def _jobs() -> list[dict]:
    return [
        {"class": "App::Mail", "args": [1, "x", {"k": 1.5}], "queue": "mail", "jid": "a" * 24, "retry": True,
         "created_at": 1700000000000},
        {"class": "X", "args": [], "queue": "default", "jid": "b" * 24, "retry": 3, "created_at": 1700000000001},
        {"class": "X", "args": ["é"], "queue": "mail", "jid": "c" * 24, "retry": True, "created_at": 1700000000002},
        {"class": "X", "args": [], "queue": "mail", "jid": "d" * 24, "retry": True, "created_at": 1700000000003,
         "at": 1700000100.25},
        {"class": "X", "args": [], "queue": "low", "jid": "e" * 24, "retry": True, "created_at": 1700000000004,
         "at": 1700000050.5, "enqueued_at": 5},
    ]


A = b'{"class":"App::Mail","args":[1,"x",{"k":1.5}],"queue":"mail","jid":"aaaaaaaaaaaaaaaaaaaaaaaa","retry":true,' \
    b'"created_at":1700000000000,"enqueued_at":1700000000999}'
B = b'{"class":"X","args":[],"queue":"default","jid":"bbbbbbbbbbbbbbbbbbbbbbbb","retry":3,"created_at":1700000000001,' \
    b'"enqueued_at":1700000000999}'
C = b'{"class":"X","args":["\xc3\xa9"],"queue":"mail","jid":"cccccccccccccccccccccccc","retry":true,' \
    b'"created_at":1700000000002,"enqueued_at":1700000000999}'
D = b'{"class":"X","args":[],"queue":"mail","jid":"dddddddddddddddddddddddd","retry":true,"created_at":1700000000003}'
E = b'{"class":"X","args":[],"queue":"low","jid":"eeeeeeeeeeeeeeeeeeeeeeee","retry":true,"created_at":1700000000004}'

WAKES = [("LPUSH", "wake:mail", "1", "1"), ("LTRIM", "wake:mail", 0, 63), ("EXPIRE", "wake:mail", 60),
         ("LPUSH", "wake:default", "1"), ("LTRIM", "wake:default", 0, 63), ("EXPIRE", "wake:default", 60)]

GOLDEN_MIXED = [
    ("ZADD", "schedule", 1700000100.25, D, 1700000050.5, E),
    ("SADD", "queues", "mail", "default"),
    ("LPUSH", "queue:mail", A, C),
    ("LPUSH", "queue:default", B),
    *WAKES,
    ("PUBLISH", "wake-schedule:2", "1700000050.5"),
]

GOLDEN_FRONT = [
    ("SADD", "queues", "mail", "default"),
    ("RPUSH", "queue:mail", A, C),
    ("RPUSH", "queue:default", B),
    *WAKES,
]


def _same(actual: list[tuple], expected: list[tuple]) -> None:
    """Equal, and of the same types: a float score stays a float, bytes stay bytes."""
    assert actual == expected
    assert [[type(x) for x in c] for c in actual] == [[type(x) for x in c] for c in expected]


def test_plain_jobs_serialize_to_the_commands_of_before():
    _same(operations.commands(operations.for_jobs(_jobs(), now_ms=NOW_MS), 2), GOLDEN_MIXED)
    _same(operations.commands(operations.for_jobs(_jobs()[:3], front=True, now_ms=NOW_MS), 2), GOLDEN_FRONT)


def test_the_operations_of_plain_jobs_are_typed_and_in_job_order():
    ops = operations.for_jobs(_jobs(), now_ms=NOW_MS)
    assert [type(op) for op in ops] == [Enqueue, Enqueue, Enqueue, Schedule, Schedule]
    assert [op.raw for op in ops] == [A, B, C, D, E]
    assert (ops[0].queue, ops[3].at, ops[3].into) == ("mail", 1700000100.25, "schedule")


@pytest.fixture
def sent(monkeypatch):
    trips: list[list[tuple]] = []
    real = writer_module.send_commands

    def record(client, commands, **kwargs):
        trips.append(list(commands))
        return real(client, commands, **kwargs)

    monkeypatch.setattr(writer_module, "send_commands", record)
    monkeypatch.setattr(payload, "now_ms", lambda: NOW_MS)
    return trips


def test_a_push_through_the_writer_sends_the_commands_of_before_in_one_round_trip(redis_db, sent, wake_tokens_wanted):
    db = redis_db.connection_pool.connection_kwargs["db"]
    Writer().push(_jobs())  # the installed features' hooks run too: none of them changes a plain job
    golden = [*GOLDEN_MIXED[:-1], ("PUBLISH", f"wake-schedule:{db}", "1700000050.5")]
    assert len(sent) == 1
    _same(sent[0], golden)
    assert redis_db.lrange("queue:mail", 0, -1) == [C, A]


def test_extra_commands_go_first_and_add_to_set_is_unchanged(redis_db, sent, wake_tokens_wanted):
    db = redis_db.connection_pool.connection_kwargs["db"]
    Writer().push(_jobs()[1:2], extra=[("SET", "extra", "1")])
    _same(sent[0], [("SET", "extra", "1"), ("SADD", "queues", "default"), ("LPUSH", "queue:default", B), *WAKES[3:]])
    job = {"class": "X", "args": [], "queue": "q", "jid": "f" * 24}
    Writer().add_to_set("retry", [(job, 123), (b'{"raw":"bytes"}', 124.0)])
    _same(sent[1], [("ZADD", "retry", 123.0, payload.dumps(job), 124.0, b'{"raw":"bytes"}'),
                    ("PUBLISH", f"wake-schedule:{db}", "123.0")])


def test_extras_keep_their_place_around_the_pushes():
    ops = [Extra(("SET", "a", "1")), *operations.for_jobs(_jobs()[1:2], now_ms=NOW_MS), Extra(("SET", "b", "2"))]
    assert [c[:2] for c in operations.commands(ops)] == [
        ("SET", "a"), ("SADD", "queues"), ("LPUSH", "queue:default"), ("SET", "b"),
        ("LPUSH", "wake:default"), ("LTRIM", "wake:default"), ("EXPIRE", "wake:default")]
    assert operations.commands([Extra(("SET", "a", "1"))]) == [("SET", "a", "1")]


def test_front_and_back_pushes_in_one_round_trip_share_the_wake_up_count():
    ops = [Enqueue("a", b"1"), Enqueue("a", b"2", front=True), Enqueue("b", b"3"),
           Enqueue("c", b"4", via=("EVALSHA", "0" * 40, 0))]
    assert operations.commands(ops) == [
        ("SADD", "queues", "a", "b"), ("LPUSH", "queue:a", b"1"), ("LPUSH", "queue:b", b"3"),
        ("RPUSH", "queue:a", b"2"), ("EVALSHA", "0" * 40, 0),
        ("LPUSH", "wake:a", "1", "1"), ("LTRIM", "wake:a", 0, 63), ("EXPIRE", "wake:a", 60),
        ("LPUSH", "wake:b", "1"), ("LTRIM", "wake:b", 0, 63), ("EXPIRE", "wake:b", 60)]
