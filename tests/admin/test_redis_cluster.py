"""The admin on a real Redis Cluster (issue 46 item 3): after a real worker process ran jobs
there, every core page renders the cluster's data, merged over every queue's own keys and
every primary; a page whose feature does not run on a cluster yet answers 503 with the
line saying so; never Django's 500 page nor a raw ``MovedError``."""

from __future__ import annotations

import json
import time

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
from tests.topologies.cluster_client import ran, worker_env
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
        "wurk_limits", "wurk_batches", "wurk_workflows", "wurk_periodic", "wurk_policies", "wurk_profiles",
        "wurk_tasks", "wurk_held"}
#: Pages of features that do not run on a cluster yet: 503 with the line saying so (a
#: feature converted later moves to CORE). Every page runs there today.
NOT_YET: set[str] = set()


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


def test_the_policies_page_reads_every_queue_and_its_actions_work_with_a_real_worker(
        admin_client, on_cluster, redis_cluster, worker_factory):
    """Issue 46 item 3: debounced jobs of queues on two primaries, a throttle's drops; "Fire now"
    puts one on its queue (a real worker runs it), "Drop for good" deletes the other."""
    from tests.jobsapp.cluster_policy_jobs import ClusterDebouncedLong, ClusterThrottled
    from wurk_django import payload

    owner = {name: on_cluster.get_node_from_key(CLUSTER.queue(name)).port for name in QUEUES}
    one = QUEUES[0]
    two = next(name for name in QUEUES[1:] if owner[name] != owner[one])
    for version in (1, 2):
        ClusterDebouncedLong.set(queue=one).perform_async(version)
    ClusterDebouncedLong.set(queue=two).perform_async(3)
    while time.time() % 60 > 50:  # the three throttled pushes in one 60 s slot
        time.sleep(0.2)
    first = ClusterThrottled.set(queue="c2").perform_async(1)
    assert first and ClusterThrottled.set(queue="c2").perform_async(2) is None
    assert ClusterThrottled.set(queue="c2").perform_async(3) is None

    page = BASE + "policies/"
    response = admin_client.get(page)
    assert response.status_code == 200
    rows = {row["queue"]: row for row in response.context["debounced"]}
    assert set(rows) == {one, two} and rows[one]["args"] == "2" and rows[two]["args"] == "3"
    assert rows[one]["quiet"] == 60 and rows[one]["fires"] > rows[one]["first"]
    throttled = {row["klass"]: row for row in response.context["throttled"]}
    row = throttled[ClusterThrottled.job_name]
    assert row["dropped"] == 2 and row["holder"] == first and row["queue"] == "c2"
    html = response.content.decode()
    assert "Fire now" in html and "Drop for good" in html

    assert admin_client.post(page, {"action": "fire", "key": rows[one]["key"]}).status_code == 302
    [queued] = [payload.loads(raw) for raw in on_cluster.lrange(CLUSTER.queue(one), 0, -1)]
    assert queued["jid"] == rows[one]["jid"] and queued["args"] == [2]
    assert admin_client.post(page, {"action": "drop", "key": rows[two]["key"]}).status_code == 302
    assert on_cluster.zcard(CLUSTER.schedule(one)) == 0 and on_cluster.zcard(CLUSTER.schedule(two)) == 0
    assert on_cluster.llen(CLUSTER.queue(two)) == 0
    assert admin_client.get(page).context["debounced"] == []

    worker = worker_factory("-c", "2", env=worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=2,
                                                      IMPORT_ON_MISS=["tests.jobsapp"]))
    wait_for(lambda: sorted(ran(on_cluster)) == ["long:2", "throttled:1"], WAIT, 0.2,
             "the fired job and the admitted push")
    assert worker.stop(WAIT) == 0


def test_the_tasks_profiles_and_held_pages_read_every_primary(admin_client, on_cluster, redis_cluster,
                                                             worker_factory, settings):
    """Issue 46 item 3: task results spread over the primaries by their ids, a profile a real
    cluster worker stored, and the Held page saying a cluster holds no suspect."""
    from redis.crc import key_slot

    from tests.jobsapp.push_tasks import tasks_add
    from wurk_django.api import ProfileSet
    from wurk_django.profiling.gecko import load

    # Pushed now, not at the commit of the test's transaction (which never comes).
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"ENQUEUE_ON_COMMIT": False}}}
    tasks = [tasks_add.enqueue(n, 40) for n in range(6)]
    owners = {on_cluster.get_node_from_key(f"status:{task.id}").port for task in tasks}
    jid = ClusterRecordJob.set(queue="c0", profile="report").perform_async("profiled")
    worker = worker_factory("-c", "2", env=worker_env(redis_cluster, QUEUES=["default", "c0"], CONCURRENCY=2))
    wait_for(lambda: all(tasks_add.get_result(task.id).is_finished for task in tasks), WAIT, 0.2, "the tasks")
    wait_for(lambda: on_cluster.zcard(CLUSTER.profiles) == 1, WAIT, 0.2, "a stored profile")
    assert worker.stop(WAIT) == 0

    listing = admin_client.get(BASE + "tasks/")
    assert listing.status_code == 200
    assert sorted(row["id"] for row in listing.context["page"].items) == sorted(task.id for task in tasks)
    assert {row["status"] for row in listing.context["page"].items} == {"SUCCESSFUL"}
    assert len(owners) > 1 or len({key_slot(f"status:{t.id}".encode()) for t in tasks}) > 1  # spread by id
    detail = admin_client.get(f"{BASE}tasks/{tasks[3].id}/")
    assert detail.status_code == 200 and "43" in detail.content.decode()
    assert admin_client.get(f"{BASE}tasks/?q={tasks[0].id}").context["page"].total == 1

    [record] = list(ProfileSet())
    assert record.jid == jid and record.token == "report" and not on_cluster.exists("profiles")
    profiles = admin_client.get(BASE + "profiles/").content.decode()
    assert f"report-{jid}" in profiles
    page = admin_client.get(f"{BASE}profiles/report-{jid}/")
    assert page.status_code == 200 and "ClusterRecordJob.perform" in page.content.decode()
    download = admin_client.get(f"{BASE}profiles/report-{jid}/data")
    assert download["Content-Type"] == "application/gzip" and load(download.content)["threads"]

    held = admin_client.get(BASE + "held/")
    assert held.status_code == 200 and held.context["jobs"] == []
    assert "wurk-held-cluster" in held.content.decode()
    response = admin_client.post(BASE + "held/", {"held": "x", "jid": "y"}, follow=True)
    assert "No job is held on a Redis Cluster." in response.content.decode()


def test_background_bulk_actions_work_through_every_queues_set_with_a_real_worker(
        admin_client, on_cluster, redis_cluster, worker_factory, monkeypatch):
    """Issue 46 item 3: "Retry all" of the merged dead set runs as a job over each queue's own
    set (its take one script in the queue's slot); an unreadable entry is kept; "Kill all" of
    the retry set files each job in its own queue's dead set; nothing of the action is left."""
    from tests.admin.conftest import failed
    from tests.admin.test_bulk import token_of
    from wurk_django import payload
    from wurk_django.admin import bulk as bulk_views
    from wurk_django.api import bulk

    monkeypatch.setattr(bulk_views, "SYNC_LIMIT", 5)
    record = "tests.jobsapp.cluster_jobs.ClusterRecordJob"
    for queue in QUEUES:
        for n in range(3):
            on_cluster.zadd(CLUSTER.dead(queue), {payload.dumps(failed(record, queue=queue, args=[f"{queue}-{n}"])):
                                                  1_700_000_000 + n})
    on_cluster.zadd(CLUSTER.dead("c1"), {b"not json at all": 1})
    later = time.time() + 86_400  # not due: the worker's scheduler leaves them alone
    for queue in ("c2", "c3"):
        on_cluster.zadd(CLUSTER.retry(queue), {payload.dumps(failed(record, queue=queue, args=[f"r-{queue}"])): later})
    on_cluster.sadd(CLUSTER.queues, *QUEUES)

    token = token_of(admin_client.post(BASE + "dead/all/retry/"))
    info = bulk.progress(token)
    assert (info["state"], info["total"], info["set"]) == ("queued", 13, "dead")
    assert DeadSet().size == 13  # the request only recorded the action and pushed its job
    worker = worker_factory("-c", "3", env=worker_env(redis_cluster, QUEUES=["default", *QUEUES], CONCURRENCY=3))
    wait_for(lambda: bulk.progress(token)["finished"], WAIT, 0.2, "the bulk retry")
    info = bulk.progress(token)
    assert (info["state"], info["done"], info["kept"], info["taken"]) == ("done", 12, 1, 13)
    wait_for(lambda: len(ran(on_cluster)) == 12, WAIT, 0.2, "the retried jobs")
    assert sorted(ran(on_cluster)) == sorted(f"{q}-{n}" for q in QUEUES for n in range(3))
    assert on_cluster.zrange(CLUSTER.dead("c1"), 0, -1) == [b"not json at all"]
    assert DeadSet().size == 1
    html = admin_client.get(BASE + f"bulk/{token}/").content.decode()
    assert 'data-state="done"' in html

    kill = bulk.start("retry", "kill")
    wait_for(lambda: bulk.progress(kill)["finished"], WAIT, 0.2, "the bulk kill")
    assert bulk.progress(kill)["done"] == 2 and RetrySet().size == 0
    for queue in ("c2", "c3"):
        [raw] = on_cluster.zrange(CLUSTER.dead(queue), 0, -1)
        assert payload.loads(raw)["args"] == [f"r-{queue}"]
    assert worker.stop(WAIT) == 0
    assert not on_cluster.keys("{q:*}:bulk:*", target_nodes=on_cluster.PRIMARIES)
    assert not on_cluster.keys("wurk-bulk:*:*", target_nodes=on_cluster.PRIMARIES)
