"""Client push: validation, normalization, wire bytes, bulk, failover retry (CORE-080..089)."""

from __future__ import annotations

import sys
import time
import types

import pytest
import redis as redis_lib

from tests import fixtures
from tests.jobsapp.jobs import RecordJob, RubyNamedJob, add_numbers
from tests.support import queued, wurk_settings
from wurk_django import Job, payload, registry
from wurk_django.client import reliable_push
from wurk_django.client import writer as writer_module
from wurk_django.client.push import Client, enqueue_to, normalize, push, push_bulk, validate
from wurk_django.conf import Config
from wurk_django.redis.connection import get_redis
from wurk_django.redis.errors import PrimaryRefused


@pytest.fixture
def pinned(monkeypatch):
    """Our jid and clock set to the fixtures' values."""
    monkeypatch.setattr(payload, "new_jid", lambda: fixtures.JID)
    monkeypatch.setattr(payload, "now_ms", lambda: fixtures.NOW_MS)


@pytest.fixture
def pipelines(monkeypatch):
    """Counts the client's round trips (one ``send_commands`` each) and records every command sent."""
    calls = {"executes": 0, "commands": []}
    original = writer_module.send_commands

    def send(redis, commands, **kwargs):
        calls["executes"] += 1
        calls["commands"].extend(commands)
        return original(redis, commands, **kwargs)

    monkeypatch.setattr(writer_module, "send_commands", send)
    return calls


# --- golden wire bytes (CORE-000, CORE-003, CORE-083/084) ---------------------------------------


def test_push_writes_sidekiq8_bytes(redis_db, pinned):
    jid = Client().push({"class": "HardJob", "args": ["bob", 5]})
    assert jid == fixtures.JID
    assert redis_db.lrange("queue:default", 0, -1) == [fixtures.raw("sidekiq8_client_push")]


def test_perform_async_of_a_ruby_named_job_writes_the_same_bytes(redis_db, pinned):
    RubyNamedJob.perform_async("bob", 5)
    assert redis_db.lrange("queue:default", 0, -1) == [fixtures.raw("sidekiq8_client_push")]


def test_class_options_sit_where_sidekiq_puts_them(redis_db, pinned, isolated_registry):
    del registry._jobs["HardJob"]

    class OptionsJob(Job):
        name = "HardJob"
        queue = "critical"
        retry = 5
        backtrace = True
        tags = ["alpha"]

    OptionsJob.perform_async("bob", 5)
    assert redis_db.lrange("queue:critical", 0, -1) == [fixtures.raw("sidekiq8_client_push_options")]


def test_schedule_member_and_score(redis_db, pinned, pipelines):  # CORE-052, CORE-084, CORE-006
    Client().push({"class": "HardJob", "args": ["bob", 5], "at": fixtures.AT})
    member = fixtures.raw("sidekiq8_schedule_member")
    assert redis_db.zrange("schedule", 0, -1) == [member]
    assert b'"at"' not in member and b"enqueued_at" not in member
    assert redis_db.zscore("schedule", member) == fixtures.AT
    [zadd] = [c for c in pipelines["commands"] if c[0] == "ZADD"]
    score = zadd[2]
    assert isinstance(score, float) and score == fixtures.AT
    # redis-py sends a float as repr(): the exact text Ruby's Float#to_s would send.
    assert get_redis().connection_pool.get_encoder().encode(score) == payload.score(fixtures.AT).encode()
    assert redis_db.smembers("queues") == set()  # scheduled pushes leave the queue set alone
    assert not redis_db.exists("queue:default")


def test_scheduled_perform_at_matches_ruby_member(redis_db, pinned, monkeypatch):
    job_module = sys.modules["wurk_django.job"]  # the package's `job` attribute is the decorator
    fake_now = fixtures.NOW_MS / 1000
    monkeypatch.setattr(job_module, "time", types.SimpleNamespace(time=lambda: fake_now))
    RubyNamedJob.perform_at(fixtures.AT, "bob", 5)
    monkeypatch.undo()
    assert redis_db.zrange("schedule", 0, -1, withscores=True) == [(fixtures.raw("sidekiq8_schedule_member"), fixtures.AT)]


def test_repush_keeps_unknown_keys_jid_and_created_at(redis_db, pinned):  # CORE-010, CORE-016, CORE-017
    job = fixtures.load("sidekiq8_unknown_keys")
    job["enqueued_at"] = 1  # stale; a push rewrites it in place
    Client().push(job)
    assert redis_db.lrange("queue:default", 0, -1) == [fixtures.raw("sidekiq8_unknown_keys")]


def test_repush_of_sidekiq7_payload_keeps_float_created_at(redis_db, pinned):  # CORE-040
    job = fixtures.load("sidekiq7_perform_async")
    Client().push(job)
    [stored] = queued(redis_db)
    assert stored["created_at"] == 1700000000.1234567
    assert stored["enqueued_at"] == fixtures.NOW_MS
    assert isinstance(stored["enqueued_at"], int)


# --- validate (CORE-080) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ([], "must be a dict"),
        ({"class": "X"}, "needs 'class' and 'args'"),
        ({"args": []}, "needs 'class' and 'args'"),
        ({"class": "X", "args": (1,)}, "must be a list"),
        ({"class": "X", "args": "1"}, "must be a list"),
        ({"class": 42, "args": []}, "Job subclass or a string"),
        ({"class": int, "args": []}, "Job subclass or a string"),
        ({"class": "", "args": []}, "non-empty"),
        ({"class": "A|B", "args": []}, r"\|"),
        ({"class": "X", "args": [], "at": "tomorrow"}, "'at'"),
        ({"class": "X", "args": [], "at": True}, "'at'"),
        ({"class": "X", "args": [], "at": None}, "'at'"),
        ({"class": "X", "args": [], "tags": "a,b"}, "'tags'"),
        ({"class": "X", "args": [], "retry_for": 1_000_000_001}, "retry_for"),
        ({"class": "X", "args": [], "retry_for": "1h"}, "retry_for"),
        ({"class": "X", "args": [], 3: "x"}, "keys must be strings"),
    ],
)
def test_validate_refuses(item, match):
    # CORE-011: `class` is required, a non-empty name or a Job class.
    with pytest.raises(ValueError, match=match):
        validate(item)


@pytest.mark.parametrize(
    "item",
    [
        {"class": "X", "args": []},
        {"class": RecordJob, "args": [1]},
        {"class": add_numbers, "args": [1, 2]},
        {"class": "X", "args": [], "at": 1700000000, "tags": ["a"], "retry_for": 1_000_000_000},
    ],
)
def test_validate_accepts(item):
    validate(item)  # raises on failure
    assert "class" in item


def test_invalid_push_writes_nothing(redis_db):
    with pytest.raises(ValueError):
        push({"class": "X", "args": "nope"})
    assert redis_db.keys("*") == []


# --- normalize (CORE-081) ------------------------------------------------------------------------


def test_bare_string_class_gets_global_defaults():  # CORE-043
    # CORE-015: `retry` is always in a pushed payload.
    job = normalize({"class": "Ruby::Job", "args": []}, Config({}))
    assert job["retry"] is True and job["queue"] == "default"
    assert list(job) == ["retry", "queue", "class", "args", "jid", "created_at"]


def test_default_job_options_setting_applies():
    job = normalize({"class": "Ruby::Job", "args": []}, Config({"DEFAULT_JOB_OPTIONS": {"retry": 3, "queue": "low"}}))
    assert (job["retry"], job["queue"]) == (3, "low")


def test_class_options_then_item_options():
    job = normalize({"class": add_numbers, "args": [1, 2]}, Config({}))
    assert (job["queue"], job["retry"], job["class"]) == ("functions", 2, "tests.jobsapp.jobs.add_numbers")
    job = normalize({"class": add_numbers, "args": [1, 2], "queue": "other"}, Config({}))
    assert job["queue"] == "other"


def test_registered_name_pushed_as_a_string_gets_its_options():
    # CORE-011: a registry name pushed as a string is resolved to its class.
    job = normalize({"class": "tests.jobsapp.jobs.add_numbers", "args": [1, 2]}, Config({}))
    assert job["queue"] == "functions"


def test_transient_keys_are_dropped():  # CORE-038
    item = {"class": "X", "args": [], "pool": object(), "client_class": "C", "wait": 1, "wait_until": 2,
            "sync": True, "on_commit": True}
    job = normalize(item, Config({}))
    assert not {"pool", "client_class", "wait", "wait_until", "sync", "on_commit"} & set(job)


@pytest.mark.parametrize("queue", ["", None])
def test_empty_queue_is_refused(queue):  # CORE-014
    with pytest.raises(ValueError, match="empty queue"):
        normalize({"class": "X", "args": [], "queue": queue}, Config({}))


def test_retry_for_made_int_and_a_non_string_queue_refused():
    """CORE-020: `retry_for` seconds, validated, overrides counts."""
    job = normalize({"class": "X", "args": [], "retry_for": 3600.9}, Config({}))
    assert job["retry_for"] == 3600
    with pytest.raises(ValueError, match="queue 7"):  # issue 12: no silent str(queue)
        normalize({"class": "X", "args": [], "queue": 7}, Config({}))


def test_given_jid_and_created_at_are_kept():  # CORE-013, CORE-016
    job = normalize({"class": "X", "args": [], "jid": "a" * 24, "created_at": 5}, Config({}))
    assert (job["jid"], job["created_at"]) == ("a" * 24, 5)


# --- immediate writes (CORE-050/051, CORE-083) ---------------------------------------------------


def test_lpush_left_is_newest_so_rpop_is_fifo(redis_db):  # CORE-051
    first = RecordJob.perform_async("first")
    second = RecordJob.perform_async("second")
    assert [j["jid"] for j in queued(redis_db)] == [second, first]
    assert payload.loads(redis_db.rpop("queue:default"))["jid"] == first


def test_queue_name_added_to_queues_set(redis_db):  # CORE-050
    add_numbers.perform_async(1, 2)
    RecordJob.set(queue="mail").perform_async(1)
    assert redis_db.smembers("queues") == {b"functions", b"mail"}
    assert redis_db.type("queue:mail") == b"list"


def test_enqueue_to_pushes_any_class_name(redis_db):  # CORE-043
    jid = enqueue_to("ruby", "Billing::Invoice", 7, "x")
    [job] = queued(redis_db, "ruby")
    assert (job["class"], job["args"], job["jid"], job["retry"]) == ("Billing::Invoice", [7, "x"], jid, True)


def test_push_returns_the_jid_and_timestamps_are_int_ms(redis_db):  # CORE-016/017
    before = int(time.time() * 1000)
    jid = RecordJob.perform_async(1)
    [job] = queued(redis_db)
    assert job["jid"] == jid
    assert isinstance(job["created_at"], int) and isinstance(job["enqueued_at"], int)
    assert before <= job["created_at"] <= job["enqueued_at"] <= int(time.time() * 1000) + 1


def test_one_round_trip_per_push(redis_db, pipelines, wake_tokens_wanted):  # CORE-083
    RecordJob.perform_async(1)
    assert pipelines["executes"] == 1
    names = [c[0] for c in pipelines["commands"]]
    # The job, then its wake-up token for fetchers blocked on several queues (issue 19).
    assert names == ["SADD", "LPUSH", "LPUSH", "LTRIM", "EXPIRE"]


# --- bulk (CORE-089) -----------------------------------------------------------------------------


def test_perform_bulk_1000_per_round_trip(redis_db, pipelines):
    jids = RecordJob.perform_bulk([[i] for i in range(2500)])
    assert pipelines["executes"] == 3
    assert len(jids) == 2500 and len(set(jids)) == 2500
    assert redis_db.llen("queue:default") == 2500
    stored = queued(redis_db)
    assert sorted(j["args"][0] for j in stored) == list(range(2500))
    # every job of one round trip shares one enqueued_at (CORE-083)
    assert len({j["enqueued_at"] for j in stored}) <= 3


def test_bulk_batch_size_is_honoured(redis_db, pipelines):
    RecordJob.perform_bulk([[i] for i in range(10)], batch_size=4)
    assert pipelines["executes"] == 3


def test_scheduled_bulk_defaults_to_100_per_round_trip(redis_db, pipelines):
    at = time.time() + 3600
    push_bulk({"class": RecordJob, "args": [[i] for i in range(250)], "at": at})
    assert pipelines["executes"] == 3
    assert redis_db.zcard("schedule") == 250
    assert {score for _, score in redis_db.zrange("schedule", 0, -1, withscores=True)} == {at}


def test_perform_bulk_with_at_also_defaults_to_100(redis_db, pipelines):
    RecordJob.perform_bulk([[i] for i in range(150)], at=3600)
    assert pipelines["executes"] == 2
    assert redis_db.zcard("schedule") == 150


def test_bulk_at_list_gives_each_job_its_time(redis_db):
    base = time.time() + 1000
    jids = push_bulk({"class": RecordJob, "args": [[1], [2]], "at": [base, base + 5]})
    scores = {payload.loads(m)["jid"]: s for m, s in redis_db.zrange("schedule", 0, -1, withscores=True)}
    assert scores == {jids[0]: base, jids[1]: base + 5}


def test_perform_bulk_at_uses_the_relative_rule(redis_db):  # CORE-086 applied to bulk (documented)
    before = time.time()
    RecordJob.perform_bulk([[1]], at=600)
    [(_, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    assert before + 600 <= score <= time.time() + 600


def test_spread_interval_spreads_over_at_least_5_seconds(redis_db):
    before = time.time()
    push_bulk({"class": RecordJob, "args": [[i] for i in range(50)], "spread_interval": 1})
    scores = [s for _, s in redis_db.zrange("schedule", 0, -1, withscores=True)]
    assert len(scores) == 50
    assert all(before <= s <= time.time() + 5 for s in scores)
    assert max(scores) - min(scores) > 1  # 50 draws over 5 s: spread wider than the 1 s asked for


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"at": 1, "spread_interval": 5}, "cannot be combined"),
        ({"at": [1]}, "1 entries for 2 jobs"),
        ({"at": "soon"}, "epoch seconds"),
        ({"spread_interval": 0}, "spread_interval"),
        ({"jid": "a" * 24}, "explicit jid"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bulk_refuses(extra, match, redis_db):
    with pytest.raises(ValueError, match=match):
        push_bulk({"class": RecordJob, "args": [[1], [2]], **extra})
    assert redis_db.keys("*") == []


def test_bulk_args_must_be_lists_of_lists():
    with pytest.raises(ValueError, match="list of lists"):
        push_bulk({"class": RecordJob, "args": [1, 2]})


def test_explicit_jid_allowed_for_a_single_bulk_job(redis_db):
    assert push_bulk({"class": RecordJob, "args": [[1]], "jid": "c" * 24}) == ["c" * 24]


def test_bulk_jobs_match_single_pushes_byte_for_byte_but_jid(redis_db, pinned):
    """The bulk path builds one template per push (RUN-706): each job must still be what
    a single push writes, with its own jid and dict, and a shared created_at (CORE-089)."""
    seen: list[dict] = []

    class Tag:
        def __call__(self, job_class, job, queue, redis, call_next):
            job.setdefault("tags", []).append("mw")  # each job is its own dict
            seen.append(job)
            return call_next()

    with wurk_settings(CLIENT_MIDDLEWARE=[Tag]):
        single = RecordJob.perform_async(7)
        redis_db.delete("queue:default")
        bulk = RecordJob.perform_bulk([[7], [7]])
    assert single == bulk[0] == bulk[1] == fixtures.JID  # pinned: every new jid is the fixture's
    stored = redis_db.lrange("queue:default", 0, -1)
    assert len(stored) == 2 and len(seen) == 3
    assert [payload.loads(raw)["tags"] for raw in stored] == [["mw"], ["mw"]]
    assert seen[1] is not seen[2]
    single_bytes = payload.dumps(seen[0])
    assert all(payload.dumps(job) == single_bytes for job in seen[1:])


def test_bulk_mixes_nothing_between_schedule_and_queue(redis_db):
    jids = push_bulk({"class": RecordJob, "args": []})
    assert jids == [] and redis_db.keys("*") == []


# --- failover (CORE-085) -------------------------------------------------------------------------


class _FlakySend:
    """The real ``send_commands``, but the next calls fail with the given errors before anything is sent."""

    def __init__(self, monkeypatch, errors):
        self.errors = list(errors)
        self.sends = 0
        self.real = writer_module.send_commands
        monkeypatch.setattr(writer_module, "send_commands", self)

    def __call__(self, redis, commands, **kwargs):
        self.sends += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.real(redis, commands, **kwargs)


def _reply_error(text):
    """The exception redis-py raises for an error reply, parsed as it parses one off the wire."""
    from redis._parsers.base import BaseParser

    return BaseParser.parse_error(text)


def test_readonly_error_is_retried_once(redis_db, monkeypatch):
    # redis-py strips the READONLY code from the message, so the class is what identifies it.
    flaky = _FlakySend(monkeypatch, [_reply_error("READONLY You can't write against a read only replica.")])
    jid = Client().push({"class": RecordJob, "args": [1]})
    assert flaky.sends == 2
    assert [j["jid"] for j in queued(redis_db)] == [jid]


@pytest.mark.parametrize("tag", ["NOREPLICAS Not enough good replicas to write.", "UNBLOCKED force unblock"])
def test_other_failover_errors_are_retried_once(redis_db, monkeypatch, tag):
    flaky = _FlakySend(monkeypatch, [_reply_error(tag)])
    Client().push({"class": RecordJob, "args": [1]})
    assert flaky.sends == 2
    assert redis_db.llen("queue:default") == 1


def test_a_second_failover_refusal_is_raised_as_primary_refused_without_the_buffer(redis_db, monkeypatch):
    flaky = _FlakySend(monkeypatch, [_reply_error("READONLY You can't write"), _reply_error("READONLY You can't write")])
    with wurk_settings(RELIABLE_PUSH=False), pytest.raises(PrimaryRefused, match="You can't write"):
        Client().push({"class": RecordJob, "args": [1]})
    assert flaky.sends == 2
    assert redis_db.llen("queue:default") == 0


@pytest.mark.parametrize("tag", ["READONLY You can't write against a read only replica.",
                                 "NOREPLICAS Not enough good replicas to write.",
                                 "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."])
def test_a_push_refused_twice_by_a_primary_going_away_waits_in_the_buffer(redis_db, monkeypatch, tag):
    """Issue 25 item 1: a demoted or isolated primary's refusal is an outage for the
    push (buffered, delivered once the primary answers), never raised at the call site."""
    flaky = _FlakySend(monkeypatch, [_reply_error(tag), _reply_error(tag)])
    jid = Client().push({"class": RecordJob, "args": [1]})  # not raised
    assert flaky.sends == 2 and redis_db.llen("queue:default") == 0
    assert reliable_push.buffered() == 1
    jid2 = Client().push({"class": RecordJob, "args": [2]})  # the primary answers: the buffer goes first
    assert reliable_push.buffered() == 0
    assert [j["jid"] for j in queued(redis_db)] == [jid2, jid]  # newest first: the buffered one went first


def test_ordinary_errors_are_not_retried(redis_db, monkeypatch):
    flaky = _FlakySend(monkeypatch, [_reply_error("WRONGTYPE Operation against a key holding the wrong kind of value")])
    with pytest.raises(redis_lib.ResponseError, match="WRONGTYPE"):
        Client().push({"class": RecordJob, "args": [1]})
    assert flaky.sends == 1


def test_client_uses_the_configured_database(redis_db):
    with wurk_settings():
        RecordJob.perform_async(1)
    assert redis_db.llen("queue:default") == 1
