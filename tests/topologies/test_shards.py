"""Sharding (issue 18 item 4, CORE-090, PRO-361) with two private redis-servers:
``via()``, per-call, per-class and per-queue shards, workers started against a
shard, and the admin's shard selector."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from tests.admin.conftest import BASE, enqueue, job, make_user
from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, queued, wait_for, wurk_settings
from wurk_django import Job, api, via
from wurk_django.conf import get_config, problems
from wurk_django.redis import connection
from wurk_django.redis.shards import route


@pytest.fixture(scope="module")
def servers():
    a, b = TCPRedis().start(), TCPRedis().start()
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture
def shards(servers, redis_db):
    a, b = servers
    clients = a.client(4), b.client(5)
    for client in clients:
        client.flushdb()
    with wurk_settings(SHARDS={"a": a.url(4), "b": {"URL": b.url(5)}}, QUEUE_SHARDS={"mail": "a"}):
        yield redis_db, *clients
    for client in clients:
        client.flushdb()
        client.close()
    connection.reset()


class PlainJob(Job):
    def perform(self, *args):
        pass


class PinnedJob(Job):
    shard = "b"

    def perform(self, *args):
        pass


def test_via_sends_pushes_and_reads_to_that_shard(shards, servers):
    default, a, b = shards
    with via("a"):
        PlainJob.perform_async(1)
        assert api.Queue("default").size == 1  # reads go there too
        with via(servers[1].url(5)):  # blocks nest; a URL works as well as a name
            PlainJob.perform_async(2)
        PlainJob.perform_in(60, 3)
    PlainJob.perform_async(4)
    assert [j["args"] for j in queued(a)] == [[1]] and a.zcard("schedule") == 1
    assert [j["args"] for j in queued(b)] == [[2]]
    assert [j["args"] for j in queued(default)] == [[4]]
    assert all("shard" not in j for j in queued(a) + queued(b) + queued(default))


def test_via_is_per_thread_and_per_task(shards):
    default, a, _b = shards
    other_thread_pushed = threading.Event()

    def elsewhere():
        PlainJob.perform_async("thread")
        other_thread_pushed.set()

    async def task(name):
        PlainJob.perform_async(name)

    with via("a"):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()

        async def both():
            await asyncio.gather(task("task-in-via"), asyncio.create_task(task("task-copy")))

        asyncio.run(both())
    assert other_thread_pushed.is_set()
    assert [j["args"] for j in queued(default)] == [["thread"]]
    assert sorted(j["args"][0] for j in queued(a)) == ["task-copy", "task-in-via"]


def test_precedence_set_then_via_then_class_then_queue(shards):
    default, a, b = shards
    PinnedJob.perform_async("class")  # -> b
    PlainJob.set(queue="mail").perform_async("queue")  # -> a
    PinnedJob.set(queue="mail").perform_async("class beats queue")  # -> b
    with via("a"):
        PinnedJob.perform_async("via beats class")  # -> a
        PlainJob.set(shard="default").perform_async("set beats via")  # -> default
    PlainJob.set(shard="b").perform_bulk([["bulk-1"], ["bulk-2"]])  # -> b
    assert sorted(j["args"][0] for j in queued(b) + queued(b, "mail")) == ["bulk-1", "bulk-2", "class", "class beats queue"]
    assert sorted(j["args"][0] for j in queued(a, "mail") + queued(a)) == ["queue", "via beats class"]
    assert [j["args"][0] for j in queued(default)] == ["set beats via"]


@pytest.mark.django_db(transaction=True)
def test_an_on_commit_push_keeps_the_shard_of_its_via_block(shards):
    from django.db import transaction

    default, a, _b = shards
    with transaction.atomic():
        with via("a"):
            PlainJob.set(on_commit=True).perform_async("deferred")
        assert a.llen("queue:default") == 0  # not before the commit
    assert [j["args"] for j in queued(a)] == [["deferred"]] and default.llen("queue:default") == 0


def test_bad_shards_are_refused_at_the_call_site(shards):
    with pytest.raises(ValueError, match="unknown Redis shard 'nope'; the known shards are a, b, default"):
        with via("nope"):
            pass
    with pytest.raises(ValueError, match="unknown Redis shard 'nope'"):
        PlainJob.set(shard="nope").perform_async(1)
    with pytest.raises(ValueError, match="bad Redis shard"):
        with via({"URL": "nothing"}):
            pass
    found = problems({"SHARDS": {"x": "not-a-url"}, "QUEUE_SHARDS": {"q": "y"}})
    assert [p.key for p in found] == ["SHARDS", "QUEUE_SHARDS"]


def test_route_keeps_an_explicit_config_when_nothing_names_a_shard(shards):
    config = get_config()
    assert route(config) is config
    assert route(config, queue="mail").shard == "a"
    assert route(config, queue="mail").for_shard("default") is config


def test_workers_started_against_a_shard_run_only_its_jobs(shards, servers):
    default, a, b = shards
    from tests.jobsapp.jobs import EuropeJob, ShardRecordJob

    with via("a"):
        ShardRecordJob.perform_async("on-a")
    EuropeJob.perform_async("on-b")
    ShardRecordJob.perform_async("on-default")
    on_a = WorkerProcess("-c", "1", "--redis-url", servers[0].url(4))
    on_b = WorkerProcess("-c", "1", "--shard", "b", env={
        "WURK_TEST_EXTRA": json.dumps({"SHARDS": {"b": servers[1].url(5)}})})
    try:
        wait_for(lambda: a.lrange("test:ran", 0, -1) == [b"on-a"], timeout=30, message="shard a's worker")
        wait_for(lambda: b.lrange("test:ran", 0, -1) == [b"on-b"], timeout=30, message="shard b's worker")
        assert default.llen("queue:default") == 1 and not default.exists("test:ran")
        # The first heartbeat runs on its own thread: it may land just after the first job.
        wait_for(lambda: a.smembers("processes") and b.smembers("processes"), timeout=10,
                 message="both workers registered on their shard")
        assert not default.smembers("processes")
    finally:
        assert on_a.stop() == 0, on_a.output()
        assert on_b.stop() == 0, on_b.output()
    bad = WorkerProcess("--shard", "nope")
    assert bad.wait(timeout=60) == 1
    assert "unknown Redis shard 'nope'" in bad.output()


# --- the admin's shard selector (PRO-361) ------------------------------------------------------


@pytest.fixture
def viewer_client(client, db):
    client.force_login(make_user("shard-viewer", perms=("view_dashboard",)))
    return client


def test_the_selector_switches_every_page_to_that_shard(admin_client, shards):
    default, a, _b = shards
    enqueue(default, job(args=["on default"]))
    enqueue(a, job(args=["on a"], queue="mail"))
    page = admin_client.get(f"{BASE}queues/").content.decode()
    assert 'name="shard"' in page and '<option value="a">a</option>' in page
    assert "default" in page and "mail" not in page
    response = admin_client.post(f"{BASE}shard/", {"shard": "a", "next": f"{BASE}queues/"})
    assert response.status_code == 302 and response["Location"] == f"{BASE}queues/"
    page = admin_client.get(f"{BASE}queues/").content.decode()
    assert "mail" in page and '<option value="a" selected>' in page
    assert "on a" in admin_client.get(f"{BASE}queues/mail/").content.decode()
    assert admin_client.get(f"{BASE}stats/queues.json").json() == {"mail": 1}
    # An action on the page acts on that shard.
    admin_client.post(f"{BASE}queues/mail/action/", {"action": "clear"})
    assert a.llen("queue:mail") == 0 and default.llen("queue:default") == 1
    admin_client.post(f"{BASE}shard/", {"shard": "default"})
    assert "on default" in admin_client.get(f"{BASE}queues/default/").content.decode()


def test_switching_is_a_view_preference_allowed_to_viewers_and_in_read_only_mode(viewer_client, shards):
    with wurk_settings(SHARDS=get_config().raw["SHARDS"], ADMIN_READ_ONLY=True):
        assert viewer_client.post(f"{BASE}shard/", {"shard": "b"}).status_code == 302
        assert viewer_client.session["wurk_shard"] == "b"
        assert viewer_client.post(f"{BASE}shard/", {"shard": "unknown"}).status_code == 302
        assert viewer_client.session["wurk_shard"] == "b"
        assert viewer_client.get(f"{BASE}shard/").status_code == 405


def test_the_selector_needs_csrf_and_login(client, db, shards):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("strict", superuser=True))
    assert strict.post(f"{BASE}shard/", {"shard": "a"}).status_code == 403
    assert client.post(f"{BASE}shard/", {"shard": "a"}).status_code == 302  # to the login page
    assert "wurk_shard" not in client.session


def test_no_selector_without_shards(admin_client, redis_db):
    assert 'name="shard"' not in admin_client.get(f"{BASE}queues/").content.decode()


def test_django_tasks_follow_queue_shards_sync_and_async(shards, settings):
    from wurk_django.tasks.compat import AVAILABLE as TASKS_AVAILABLE

    if not TASKS_AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")
    from tests.tasks import sample
    from tests.tasks.conftest import WURK_TASKS

    default, a, _b = shards
    settings.TASKS = WURK_TASKS
    with wurk_settings(SHARDS=get_config().raw["SHARDS"], QUEUE_SHARDS={"default": "a"}):
        first = sample.add.enqueue(1, 2)

        async def push_async():
            return await sample.add.aenqueue(3, 4)

        second = asyncio.run(push_async())
        assert sorted(j["jid"] for j in queued(a)) == sorted([first.id, second.id])
        assert default.llen("queue:default") == 0
        with via("a"):  # its result lives on that shard too
            assert sample.add.get_result(first.id).args == [1, 2]


def test_a_batch_refuses_a_job_its_queue_routes_to_another_shard(shards):
    # PRO-361 with batches: a batch lives on one server and a worker acknowledges a job
    # on the server it came from; a job QUEUE_SHARDS sends elsewhere would never run.
    from wurk_django.batch import Batch

    default, a, b = shards
    batch = Batch()
    with pytest.raises(ValueError, match=r"PlainJob on queue 'mail' routes to another Redis than batch"):
        with batch.jobs():
            PlainJob.perform_async("kept")
            PlainJob.set(queue="mail").perform_async("elsewhere")
    assert queued(default) == [] and queued(a, "mail") == []  # the failed block wrote no job

    with via("a"):  # the documented way: the batch goes where its queue's jobs go
        together = Batch()
        with together.jobs():
            PlainJob.set(queue="mail").perform_async("mail-1")
    assert [j["bid"] for j in queued(a, "mail")] == [together.bid]
    assert a.hget(f"b-{together.bid}", "total") == b"1" and not default.exists(f"b-{together.bid}")
