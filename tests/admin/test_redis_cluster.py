"""The admin on a real Redis Cluster (issue 46 item 3): after a real worker process ran jobs
there, every core page renders the cluster's data, merged over every queue's own keys and
every primary; a page whose feature does not run on a cluster yet answers 503 with the
line saying so; never Django's 500 page nor a raw ``MovedError``."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings

from tests.admin.conftest import BASE
from tests.admin.test_access_table import resolved
from tests.admin.test_redis_down import _reverse
from tests.jobsapp.cluster_jobs import (
    ClusterAdd,
    ClusterBrokenStep,
    ClusterDoomedJob,
    ClusterLateRetryJob,
    ClusterRecordJob,
    ClusterSlowJob,
)
from tests.support import wait_for
from wurk_django.admin.sets import entry_key
from wurk_django.admin_pages import pages
from wurk_django.api import DeadSet, ProcessSet, RetrySet, ScheduledSet, Stats
from wurk_django.client import cluster_writer
from wurk_django.redis import connection
from wurk_django.redis.cluster_layout import CLUSTER

pytestmark = pytest.mark.django_db

QUEUES = ["c0", "c1", "c2", "c3"]
WAIT = 60.0

#: The pages (URL names) that read only core data: 200 on a cluster.
CORE = {"wurk_django_dashboard_changelist", "wurk_stats", "wurk_stats_queues", "wurk_prometheus", "wurk_busy",
        "wurk_queues", "wurk_queue", "wurk_set", "wurk_metrics", "wurk_metrics_job", "wurk_history",
        "wurk_limits", "wurk_batches", "wurk_workflows", "wurk_periodic"}
#: Pages of features that do not run on a cluster yet: 503 with the line saying so (a
#: feature converted later moves to CORE).
NOT_YET = {"wurk_policies", "wurk_profiles", "wurk_tasks", "wurk_held"}


@pytest.fixture
def on_cluster(redis_cluster):
    cluster_writer.forget()
    client = redis_cluster.client()
    with override_settings(WURK={**settings.WURK, "REDIS_URL": redis_cluster.url(0)}):
        connection.reset()
        yield client
    connection.reset()
    client.close()
    cluster_writer.forget()


def _walk(admin_client) -> tuple[dict[str, int], set[str]]:
    """Every Wurk URL with each of its methods: ``{"<method> <name>": status}``, and the names."""
    statuses, walked = {}, set()
    for name, route, view in resolved():
        url = _reverse(name, route)
        walked.add(name)
        if name.endswith("page_changelist"):
            continue  # an index entry: a redirect to its page, no Redis read
        json_endpoint = not hasattr(view, "wurk_changes_jobs")
        for method in [m for m in view.wurk_methods if m != "HEAD"]:
            response = admin_client.generic(method, url)
            where = f"{method} {url} ({name})"
            assert response.status_code != 500, where
            statuses[f"{method} {name}"] = response.status_code
            if response.status_code == 503:
                body = response.content.decode()
                message = json.loads(body)["message"] if json_endpoint else body
                assert "not supported on a Redis Cluster yet" in message and "cluster_enabled:1" in message, where
    return statuses, walked


def test_every_page_renders_or_says_its_feature_does_not_run_on_a_cluster(admin_client, on_cluster):
    statuses, walked = _walk(admin_client)
    assert {p.url_name for p in pages()} <= walked
    for name in CORE:
        assert statuses[f"GET {name}"] == 200, (name, statuses)
    for name in NOT_YET:
        assert statuses[f"GET {name}"] == 503, (name, statuses)
    assert statuses["GET wurk_set_job"] == 404  # no such entry: the "job gone" page


def test_the_core_pages_show_what_a_worker_did_on_the_cluster(admin_client, on_cluster, redis_cluster,
                                                               worker_factory):
    for n, queue in enumerate(QUEUES):
        ClusterRecordJob.set(queue=queue).perform_async(f"r{n}")
    ClusterRecordJob.set(queue="c3").perform_in(3600, "later")
    ClusterRecordJob.set(queue="idle").perform_async("waits")  # no worker serves it
    ClusterDoomedJob.set(queue="c1").perform_async()
    ClusterLateRetryJob.set(queue="c2").perform_async()
    ClusterSlowJob.set(queue="c0").perform_async("slow", 30)
    env = {"WURK_TEST_EXTRA": json.dumps({"REDIS_URL": redis_cluster.url(1), "QUEUES": QUEUES,
                                          "POLL_INTERVAL_AVERAGE": 1, "CONCURRENCY": 3, "TIMEOUT": 2})}
    worker = worker_factory("-c", "3", env=env)
    wait_for(lambda: on_cluster.llen("{test}:ran") == 4, WAIT, 0.2, "the quick jobs to run")
    wait_for(lambda: DeadSet().size == 1 and RetrySet().size == 1, WAIT, 0.2, "a dead job and a retry")
    wait_for(lambda: on_cluster.llen("{test}:started") == 1, WAIT, 0.2, "the slow job to start")
    # Processed and failed reach Redis at the worker's beats: wait for a beat that has them all.
    wait_for(lambda: Stats().processed >= 5 and Stats().failed >= 3 and Stats().workers_size == 1, WAIT, 0.2,
             "a beat with the counts")
    [process] = list(ProcessSet())

    page = admin_client.get(BASE).content.decode()
    assert "Redis Cluster" in page and "(3 primaries)" in page
    stats = admin_client.get(BASE + "stats.json").json()["sidekiq"]
    assert (stats["dead"], stats["retries"], stats["scheduled"], stats["enqueued"], stats["busy"]) == (1, 1, 1, 1, 1)
    assert stats["processes"] == 1 and stats["processed"] >= 5 and stats["failed"] >= 3
    assert admin_client.get(BASE + "stats/queues.json").json() == {"idle": 1, "c0": 0, "c1": 0, "c2": 0, "c3": 0}
    metrics = admin_client.get(BASE + "prometheus").content.decode()
    assert 'wurk_queue_size{queue="idle"} 1' in metrics and "wurk_dead 1" in metrics
    assert 'wurk_running_jobs{queue="c0",class="tests.jobsapp.cluster_jobs.ClusterSlowJob"} 1' in metrics

    queues = admin_client.get(BASE + "queues/").content.decode()
    assert all(name in queues for name in [*QUEUES, "idle"])
    assert "waits" in admin_client.get(BASE + "queues/idle/").content.decode()
    busy = admin_client.get(BASE + "busy/").content.decode()
    assert process.identity in busy and "ClusterSlowJob" in busy

    for kind, job_set, shown in (("scheduled", ScheduledSet(), "later"), ("retries", RetrySet(), "ClusterLateRetryJob"),
                                 ("dead", DeadSet(), "ClusterDoomedJob")):
        listing = admin_client.get(f"{BASE}{kind}/").content.decode()
        assert shown in listing, kind
        [entry] = list(job_set)
        detail = admin_client.get(f"{BASE}{kind}/job/{entry_key(entry)}/")
        assert detail.status_code == 200 and entry.jid in detail.content.decode(), kind
        assert admin_client.get(f"{BASE}{kind}/?substr={entry.jid}").content.decode().count(entry.jid) >= 1

    # An action from a job page reaches the entry's own queue's set: the late retry, retried now.
    [retry] = list(RetrySet())
    admin_client.post(f"{BASE}retries/job/{entry_key(retry)}/", {"action": "kill"})
    assert RetrySet().size == 0 and on_cluster.zcard(CLUSTER.dead("c2")) == 1 and DeadSet().size == 2
    admin_client.post(f"{BASE}dead/all/delete/")
    assert DeadSet().size == 0
    assert admin_client.get(BASE + "metrics/").status_code == 200
    assert worker.stop(WAIT) == 0


def test_the_batches_workflows_and_periodic_pages_and_their_actions_on_a_cluster(admin_client, on_cluster,
                                                                                 redis_cluster, worker_factory):
    """Issue 46 item 3: the feature pages read the cluster layout, over every primary, and
    their buttons change it there."""
    from wurk_django import pause
    from wurk_django.batch import Batch
    from wurk_django.periodic import loops
    from wurk_django.workflow import Flow, Workflow, chain

    batch = Batch()
    batch.description = "nightly import"
    batch.callback_queue = "c3"
    with batch.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("fine")
        doomed = ClusterDoomedJob.set(queue="c1").perform_async()  # one retry, then its queue's dead set
    flow = Flow("broken flow", callback_queue="c3")
    flow.step("ok", ClusterAdd.s(1).set(queue="c0"))
    flow.step("broken", ClusterBrokenStep.si("broken").set(queue="c2"), after=["ok"])
    failing = flow.run()
    pause.pause("idle")
    waiting = chain(ClusterAdd.s(1).set(queue="idle"), ClusterAdd.s(2).set(queue="c0")).run("waits",
                                                                                        callback_queue="c3")
    # Once a year, onto a queue no worker serves: what the test sees on it, the button pushed.
    loop = loops.Loop.build("0 0 1 1 *", "tests.jobsapp.cluster_jobs.ClusterRecordJob",
                            {"args": ["cron"], "queue": "elsewhere"}, "UTC")
    loops.persist(loop, on_cluster)

    env = {"WURK_TEST_EXTRA": json.dumps({"REDIS_URL": redis_cluster.url(1), "QUEUES": [*QUEUES, "idle"],
                                          "POLL_INTERVAL_AVERAGE": 1, "CONCURRENCY": 3,
                                          "IMPORT_ON_MISS": ["tests.jobsapp"]})}
    worker = worker_factory("-c", "3", env=env)
    wait_for(lambda: batch.status.dead and failing.state == "failed", WAIT, 0.2, "a dead batch, a failed workflow")

    # Batches: the list, the dead list, a workflow step's batch listed on asking, one batch with
    # its dead job found in its queue's own dead set, the JSON.
    assert batch.bid in admin_client.get(BASE + "batches/").content.decode()
    assert batch.bid in admin_client.get(BASE + "batches/?kind=dead").content.decode()
    assert "nightly" in admin_client.get(BASE + "batches/?q=nightly").content.decode()
    step_bid = {s.name: s.bid for s in failing.steps()}["broken"]
    assert step_bid in admin_client.get(BASE + "batches/?steps=1").content.decode()
    page = admin_client.get(f"{BASE}batches/{batch.bid}/")
    assert page.status_code == 200 and doomed in page.content.decode()
    assert admin_client.get(f"{BASE}batches/{batch.bid}.json").json()["dead_jids"] == [doomed]
    assert batch.bid in [row["bid"] for row in admin_client.get(BASE + "batches.json").json()["batches"]]

    # Workflows: the list, one workflow with its failed step, the JSON; retry goes on, cancel stops.
    listing = admin_client.get(BASE + "workflows/").content.decode()
    assert failing.id in listing and waiting.id in listing
    detail = admin_client.get(f"{BASE}workflows/{failing.id}/").content.decode()
    assert "broken is broken" in detail and 'data-state="failed"' in detail
    assert admin_client.get(f"{BASE}workflows/{failing.id}.json").json()["state"] == "failed"
    assert {row["id"] for row in admin_client.get(BASE + "workflows.json").json()["workflows"]} \
        == {failing.id, waiting.id}
    on_cluster.set("{test}:fixed", "1")
    admin_client.post(f"{BASE}workflows/{failing.id}/", {"action": "retry", "step": "broken"})
    wait_for(lambda: failing.state == "succeeded", WAIT, 0.2, "the retried workflow to succeed")
    admin_client.post(f"{BASE}workflows/{waiting.id}/", {"action": "cancel"})
    assert Workflow(waiting.id).state == "cancelled"

    # Periodic: the loop listed, paused and unpaused, enqueued now onto its queue.
    assert loop.lid in admin_client.get(BASE + "periodic/").content.decode()
    admin_client.post(BASE + "periodic/", {"action": "pause", "lid": loop.lid})
    assert on_cluster.hget(CLUSTER.loop(loop.lid), "paused") == b"1"
    admin_client.post(BASE + "periodic/", {"action": "unpause", "lid": loop.lid})
    assert on_cluster.hget(CLUSTER.loop(loop.lid), "paused") == b"0"
    admin_client.post(f"{BASE}periodic/{loop.lid}/", {"action": "enqueue", "lid": loop.lid})
    [raw] = on_cluster.lrange(CLUSTER.queue("elsewhere"), 0, -1)
    assert json.loads(raw)["args"] == ["cron"]
    assert admin_client.get(f"{BASE}periodic/{loop.lid}/").status_code == 200

    # The batch's buttons: invalidate, then delete (its keys, its index entries, gone).
    admin_client.post(f"{BASE}batches/{batch.bid}/", {"action": "invalidate"})
    assert on_cluster.hget(CLUSTER.batch(batch.bid), "invalidated") == b"1"
    admin_client.post(f"{BASE}batches/{batch.bid}/", {"action": "delete"})
    assert not on_cluster.exists(CLUSTER.batch(batch.bid), CLUSTER.batch(batch.bid, "died"))
    assert on_cluster.zscore(CLUSTER.batches, batch.bid) is None
    assert on_cluster.zscore(CLUSTER.dead_batches, batch.bid) is None
    assert admin_client.get(f"{BASE}batches/{batch.bid}/").status_code == 404
    assert worker.stop(WAIT) == 0
