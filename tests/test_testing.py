"""wurk_django.testing: fake, inline and disable modes, pytest fixtures, job_enqueued (DJ-031, DJ-032, DJ-047)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import SimpleTestCase, override_settings

from wurk_django import Job, job, signals, testing
from wurk_django.pytest_plugin import flushable_client, wurk_fake, wurk_inline, wurk_redis  # noqa: F401 - fixtures

ran: list = []


@pytest.fixture(autouse=True)
def _reset():
    ran.clear()
    testing.clear_all()
    yield
    testing.clear_all()


class Collect(Job):
    def perform(self, value):
        ran.append(value)


class Chained(Job):
    """Pushes a Collect job when it runs, to show draining picks up new work."""

    def perform(self, value):
        ran.append(f"chain:{value}")
        Collect.perform_async(f"from-chain:{value}")


class Boom(Job):
    def perform(self):
        raise RuntimeError("boom")


@job(queue="low")
def collect_fn(value):
    ran.append(f"fn:{value}")


class Marking:
    """Server middleware: records that it wrapped the job."""

    def __call__(self, instance, job, queue, call_next):
        ran.append(f"mw:{queue}")
        return call_next()


def test_fake_records_per_class_without_touching_redis(redis_db):
    with testing.fake():
        jid = Collect.perform_async("a")
        Collect.perform_async("b")
        collect_fn.perform_async("c")
    assert redis_db.dbsize() == 0
    assert [j["args"] for j in testing.jobs(Collect)] == [["a"], ["b"]]
    assert testing.jobs(Collect)[0]["jid"] == jid
    assert testing.jobs(Collect)[0]["queue"] == "default" and "enqueued_at" in testing.jobs(Collect)[0]
    assert [j["args"] for j in testing.jobs(collect_fn)] == [["c"]]
    assert testing.jobs("tests.test_testing.collect_fn")[0]["queue"] == "low"
    assert len(testing.jobs()) == 3
    assert ran == []


def test_drain_runs_in_order_through_server_middleware(settings):
    settings.WURK = {**settings.WURK, "SERVER_MIDDLEWARE": ["tests.test_testing.Marking"]}
    with testing.fake():
        Collect.perform_async(1)
        Collect.perform_in(3600, 2)  # scheduled jobs are drained too
        assert testing.jobs(Collect)[1]["at"] > 0
        assert testing.drain(Collect) == 2
    assert ran == ["mw:default", 1, "mw:default", 2]
    assert testing.jobs(Collect) == []


def test_perform_one_and_empty(redis_db):
    with testing.fake():
        Collect.perform_async("first")
        Collect.perform_async("second")
        testing.perform_one(Collect)
        assert ran == ["first"]
        assert len(testing.jobs(Collect)) == 1
        testing.perform_one(Collect)
        with pytest.raises(IndexError):
            testing.perform_one(Collect)
    assert ran == ["first", "second"]


def test_clear_and_clear_all():
    with testing.fake():
        Collect.perform_async(1)
        collect_fn.perform_async(2)
        testing.clear(Collect)
        assert testing.jobs(Collect) == [] and len(testing.jobs(collect_fn)) == 1
        testing.clear_all()
        assert testing.jobs() == []


def test_drain_all_includes_jobs_pushed_while_draining():
    with testing.fake():
        Chained.perform_async("x")
        collect_fn.perform_async("y")
        assert testing.drain_all() == 3
    assert sorted(map(str, ran)) == ["chain:x", "fn:y", "from-chain:x"]
    assert testing.jobs() == []


def test_drain_propagates_job_errors():
    with testing.fake():
        Boom.perform_async()
        with pytest.raises(RuntimeError, match="boom"):
            testing.drain(Boom)


def test_fake_still_checks_arguments():
    with testing.fake():
        with pytest.raises(ValueError, match="native JSON"):
            Collect.perform_async(dt.date(2024, 1, 1))
    assert testing.jobs(Collect) == []


def test_inline_runs_at_push_time(redis_db):
    with testing.inline():
        jid = Collect.perform_async("now")
        assert ran == ["now"]
        with pytest.raises(RuntimeError):
            Boom.perform_async()
    assert isinstance(jid, str) and len(jid) == 24
    assert redis_db.dbsize() == 0


def test_setting_selects_the_mode_and_disable_wins(redis_db, settings):
    with override_settings(WURK={**settings.WURK, "TESTING": "fake"}):
        Collect.perform_async("faked")
        assert redis_db.dbsize() == 0 and len(testing.jobs(Collect)) == 1
        with testing.disable():
            Collect.perform_async("real")
        assert redis_db.llen("queue:default") == 1
    Collect.perform_async("real again")
    assert redis_db.llen("queue:default") == 2


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        with testing.testing_mode("sometimes"):
            pass


def test_context_managers_nest():
    with testing.fake():
        with testing.inline():
            Collect.perform_async("inline")
        Collect.perform_async("faked")
    assert ran == ["inline"]
    assert [j["args"] for j in testing.jobs(Collect)] == [["faked"]]


def test_wurk_fake_fixture(wurk_fake, redis_db):  # noqa: F811
    Collect.perform_async(7)
    assert redis_db.dbsize() == 0
    assert wurk_fake.drain(Collect) == 1 and ran == [7]


def test_wurk_inline_fixture(wurk_inline):  # noqa: F811
    Collect.perform_async(8)
    assert ran == [8]


def test_wurk_redis_fixture_is_the_configured_database(wurk_redis):  # noqa: F811
    assert wurk_redis.dbsize() == 0
    jid = Collect.perform_async("real")
    assert jid.encode() in wurk_redis.lindex("queue:default", 0)


def test_flushable_client_refuses_database_zero(settings):
    settings.WURK = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    with pytest.raises(pytest.UsageError, match="not 0"):
        flushable_client()
    settings.WURK = {"REDIS_URL": settings.WURK_TEST_REDIS_URL}
    client = flushable_client()
    try:
        assert client.connection_pool.connection_kwargs["db"] != 0
    finally:
        client.close()


def test_job_enqueued_signal_after_push(redis_db):
    seen = []

    def receiver(sender, job, **kwargs):
        seen.append((sender, job["jid"], redis_db.llen(f"queue:{job['queue']}")))

    signals.job_enqueued.connect(receiver)
    try:
        jid = Collect.perform_async(1)
        jids = Collect.perform_bulk([[2], [3]])
    finally:
        signals.job_enqueued.disconnect(receiver)
    assert seen[0] == (Collect, jid, 1)  # sent after the job is in Redis
    assert [s[1] for s in seen[1:]] == jids
    assert all(s[0] is Collect for s in seen)


class FakeMixinTests(testing.FakeJobsMixin, SimpleTestCase):
    def test_pushes_are_recorded(self):
        Collect.perform_async("in TestCase")
        self.assertEqual([j["args"] for j in testing.jobs(Collect)], [["in TestCase"]])
        self.assertEqual(testing.mode(), "fake")

    def test_state_does_not_leak_between_tests(self):
        self.assertEqual(testing.jobs(Collect), [])
