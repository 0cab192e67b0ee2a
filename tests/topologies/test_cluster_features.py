"""The features that write beside a job, on a real Redis Cluster (3 primaries + 3 replicas)
with real ``manage.py wurk`` worker processes (issue 46 item 3): unique jobs, batches with
callbacks, paused queues, result records; what is not converted is refused by name."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from tests.jobsapp.cluster_jobs import (
    ClusterCountJob,
    ClusterDoomedAtOnce,
    ClusterRecordJob,
    ClusterTrackedJob,
    ClusterUniqueJob,
)
from tests.support import wait_for
from tests.topologies.cluster_client import cluster_settings, ran, worker_env
from wurk_django import payload
from wurk_django.client import cluster_writer
from wurk_django.redis.cluster_layout import CLUSTER

QUEUES = ["c0", "c1", "c2", "c3", "cb"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration
CALLBACKS = "tests.jobsapp.cluster_jobs.ClusterBatchCallbacks"


@pytest.fixture
def on_cluster(redis_cluster):
    with cluster_settings(redis_cluster, UNIQUE_JOBS=True) as client:
        yield client


def _env(redis_cluster, **extra) -> dict[str, str]:
    return worker_env(redis_cluster, **{"QUEUES": QUEUES, "CONCURRENCY": 3, "UNIQUE_JOBS": True,
                                        "IMPORT_ON_MISS": ["tests.jobsapp"], **extra})




def _keys(client, pattern: str) -> list[bytes]:
    """Every key matching ``pattern`` on every primary."""
    return client.keys(pattern, target_nodes=client.PRIMARIES)


def _callbacks(client) -> list[str]:
    return [raw.decode() for raw in client.lrange("{test}:callbacks", 0, -1)]


def _apart(client, names=QUEUES[:4]) -> tuple[str, str]:
    """Two queues whose slots are on different primaries."""
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in names}
    return names[0], next(name for name in names[1:] if owner[name] != owner[names[0]])


def _stopped_cleanly(worker) -> None:
    assert worker.stop(WAIT) == 0
    out = worker.output()
    assert " ERROR: " not in out and "Traceback" not in out, out[-3000:]


# -- unique jobs ---------------------------------------------------------------------------


def test_a_unique_job_locks_in_its_queues_slot_and_the_worker_unlocks_it_after_success(
        on_cluster, redis_cluster, worker_factory):
    from wurk_django.unique import locked

    first = ClusterUniqueJob.set(queue="c0").perform_async("u1")
    assert first is not None
    assert ClusterUniqueJob.set(queue="c0").perform_async("u1") is None  # a live duplicate: dropped
    [lock] = _keys(on_cluster, "{q:c0}:unique:*")
    assert key_slot(lock) == key_slot(CLUSTER.queue("c0").encode())
    assert on_cluster.get(lock) == first.encode() and locked("c0", ClusterUniqueJob, ["u1"]) == first
    assert not _keys(on_cluster, "unique:*")  # nothing in the one-server layout
    # Bulk: one lock per distinct job, the duplicate inside the push dropped too.
    jids = ClusterUniqueJob.set(queue="c1").perform_bulk([["b1"], ["b2"], ["b1"]])
    assert jids[0] and jids[1] and jids[2] is None
    assert len(_keys(on_cluster, "{q:c1}:unique:*")) == 2
    assert on_cluster.llen(CLUSTER.queue("c0")) == 1 and on_cluster.llen(CLUSTER.queue("c1")) == 2

    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: sorted(ran(on_cluster)) == ["b1", "b2", "u1"], WAIT, 0.2, "the unique jobs to run")
    # Released after success (unique_until "success", the default): the same job goes again.
    wait_for(lambda: not _keys(on_cluster, "{q:c*}:unique:*"), WAIT, 0.2, "the locks released")
    again = ClusterUniqueJob.set(queue="c0").perform_async("u1")
    assert again is not None and again != first
    wait_for(lambda: ran(on_cluster).count("u1") == 2, WAIT, 0.2, "the unique job to run again")
    _stopped_cleanly(worker)


# -- batches -------------------------------------------------------------------------------


def test_a_batch_over_queues_on_two_primaries_fires_success_and_complete_once(on_cluster, redis_cluster,
                                                                               worker_factory):
    from wurk_django.batch import Batch

    one, two = _apart(on_cluster)
    batch = Batch()
    batch.callback_queue = "cb"
    batch.on("success", CALLBACKS, {"tag": "s"})
    batch.on("complete", CALLBACKS, {"tag": "c"})
    with batch.jobs():
        for n in range(3):
            ClusterRecordJob.set(queue=one).perform_async(f"{one}-{n}")
            ClusterRecordJob.set(queue=two).perform_async(f"{two}-{n}")
    bid = batch.bid
    # The batch's keys in its own slot; its jobs on their queues, carrying the bid.
    assert on_cluster.hget(CLUSTER.batch(bid), "total") == b"6"
    assert on_cluster.hget(CLUSTER.batch(bid), "pending") == b"6"  # the hold was released
    assert on_cluster.scard(CLUSTER.batch(bid, "jids")) == 6
    assert all(payload.loads(r)["bid"] == bid for r in on_cluster.lrange(CLUSTER.queue(one), 0, -1))
    assert on_cluster.zscore(CLUSTER.batches, bid) is not None and not on_cluster.exists(f"b-{bid}")

    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: len(_callbacks(on_cluster)) == 2, WAIT, 0.2, "both callbacks")
    assert sorted(_callbacks(on_cluster)) == [f"complete:{bid}:c", f"success:{bid}:s"]
    assert len(ran(on_cluster)) == 6
    status = batch.status
    assert status.pending == 0 and status.total == 6 and status.success and status.complete
    assert status.callback_jids("success") and status.callback_jids("complete")
    assert on_cluster.exists(CLUSTER.batch_fired("cb", bid, "success"), CLUSTER.batch_fired("cb", bid, "complete")) == 2
    _stopped_cleanly(worker)
    assert len(_callbacks(on_cluster)) == 2  # once each


def test_a_batch_job_that_dies_fires_death_and_complete_not_success(on_cluster, redis_cluster, worker_factory):
    from wurk_django.batch import Batch

    batch = Batch()
    batch.callback_queue = "cb"
    for event in ("success", "complete", "death"):
        batch.on(event, CALLBACKS, {"tag": event[0]})
    with batch.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("fine")
        ClusterDoomedAtOnce.set(queue="c1").perform_async("doomed")
    worker = worker_factory("-c", "2", env=_env(redis_cluster))
    wait_for(lambda: len(_callbacks(on_cluster)) == 2, WAIT, 0.2, "the death and complete callbacks")
    assert sorted(_callbacks(on_cluster)) == [f"complete:{batch.bid}:c", f"death:{batch.bid}:d"]
    assert batch.status.dead and not batch.status.success
    assert on_cluster.zscore(CLUSTER.dead_batches, batch.bid) is not None
    _stopped_cleanly(worker)
    assert len(_callbacks(on_cluster)) == 2


def test_a_child_batch_joins_its_parent_which_succeeds_after_the_childs_callbacks(on_cluster, redis_cluster,
                                                                                  worker_factory):
    from wurk_django.batch import Batch

    parent = Batch()
    parent.callback_queue = "cb"
    parent.on("success", CALLBACKS, {"tag": "parent"})
    with parent.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("p")
        child = Batch()
        child.callback_queue = "c3"
        child.on("success", CALLBACKS, {"tag": "child"})
        with child.jobs():
            ClusterRecordJob.set(queue="c2").perform_async("k")
    assert child.parent_bid == parent.bid
    assert on_cluster.smembers(CLUSTER.batch(parent.bid, "kids")) == {child.bid.encode()}
    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: len(_callbacks(on_cluster)) == 2, WAIT, 0.2, "the child's and the parent's success")
    # The child's callback joined the parent, so the parent fired after it ran.
    assert _callbacks(on_cluster) == [f"success:{child.bid}:child", f"success:{parent.bid}:parent"]
    assert parent.status.success and parent.status.total == 2  # its job and the child's callback
    _stopped_cleanly(worker)


def test_a_registration_without_its_push_keeps_the_batch_open_and_counts_once(on_cluster):
    """The crash between a batch job's two steps (batch/cluster.py): registered, never pushed."""
    from wurk_django.batch import Batch, cluster, scripts
    from wurk_django.batch.fire import maybe_fire

    batch = Batch()
    batch.callback_queue = "cb"
    batch.on("complete", CALLBACKS, {"tag": "c"})
    with batch.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("pushed")
    bid = batch.bid
    command = cluster.register_command(bid, ["lost-jid"], revive=True)
    for _ in range(2):  # a resend counts nothing twice
        cluster_writer.send(on_cluster, [command])
    assert on_cluster.hget(CLUSTER.batch(bid), "total") == b"2"
    [raw] = on_cluster.lrange(CLUSTER.queue("c0"), 0, -1)
    removed, pending, live, kids = scripts.ack_success(on_cluster, bid, payload.loads(raw)["jid"])
    assert (removed, pending, live, kids) == (1, 1, 1, 0)  # the job never pushed still counts
    maybe_fire(bid, pending, live, kids)
    assert on_cluster.llen(CLUSTER.queue("cb")) == 0 and not batch.status.complete


def test_racing_passes_through_the_gate_push_the_callbacks_once(on_cluster):
    from wurk_django.batch import Batch, scripts
    from wurk_django.batch.fire import fire_event, maybe_fire

    batch = Batch()
    batch.callback_queue = "cb"
    batch.on("complete", CALLBACKS, {"tag": "c"})
    batch.on("complete", CALLBACKS, {"tag": "c2"})
    with batch.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("x")
    [raw] = on_cluster.lrange(CLUSTER.queue("c0"), 0, -1)
    _removed, pending, live, kids = scripts.ack_success(on_cluster, batch.bid, payload.loads(raw)["jid"])
    assert (pending, live, kids) == (0, 0, 0)
    maybe_fire(batch.bid, pending, live, kids)
    assert fire_event(batch.bid, "complete") is False  # claimed already
    maybe_fire(batch.bid, pending, live, kids)  # another process with the same state
    callbacks = [payload.loads(r) for r in on_cluster.lrange(CLUSTER.queue("cb"), 0, -1)]
    assert len(callbacks) == 2 and {c["args"][3]["tag"] for c in callbacks} == {"c", "c2"}
    jids = on_cluster.hget(CLUSTER.batch(batch.bid), "complete_jids").decode().split(",")
    assert sorted(c["jid"] for c in callbacks) == sorted(jids)
    assert batch.status.complete and batch.status.success


def test_deleting_the_last_pending_child_unlinks_it_and_fires_its_parent(on_cluster, redis_cluster, worker_factory):
    """``Status.delete()`` on a cluster (batch/cluster.py): the child's keys and index entries
    gone, its parent forgets it and, with nothing left pending, fires."""
    from wurk_django.batch import Batch, Status

    parent = Batch()
    parent.callback_queue = "cb"
    parent.on("success", CALLBACKS, {"tag": "p"})
    with parent.jobs():
        child = Batch()
        child.callback_queue = "cb"
        child.tags = ["kids"]
        with child.jobs():
            ClusterRecordJob.set(queue="c2").perform_async("orphan")
    assert on_cluster.sismember(CLUSTER.batch_tag("kids"), child.bid)
    on_cluster.delete(CLUSTER.queue("c2"))  # the child's job is gone: it never runs
    Status(child.bid).delete()
    assert not on_cluster.exists(*CLUSTER.batch_keys(child.bid))
    assert on_cluster.zscore(CLUSTER.batches, child.bid) is None
    assert not on_cluster.smembers(CLUSTER.batch(parent.bid, "kids"))
    assert not on_cluster.sismember(CLUSTER.batch_tag("kids"), child.bid)
    worker = worker_factory("-c", "2", env=_env(redis_cluster))
    wait_for(lambda: _callbacks(on_cluster) == [f"success:{parent.bid}:p"], WAIT, 0.2, "the parent's success")
    _stopped_cleanly(worker)


# -- pause ---------------------------------------------------------------------------------


def test_a_paused_queue_is_not_fetched_until_unpaused(on_cluster, redis_cluster, worker_factory):
    from wurk_django import pause

    pause.pause("c0")
    assert on_cluster.get(CLUSTER.paused("c0")) == b"1" and pause.is_paused("c0") and not pause.is_paused("c1")
    assert not on_cluster.exists("paused")
    ClusterRecordJob.set(queue="c0").perform_async("held")
    ClusterRecordJob.set(queue="c1").perform_async("first")
    # One thread, strict order c0 before c1: without the pause "held" would be fetched first.
    worker = worker_factory("-c", "1", env=_env(redis_cluster, QUEUES=["c0", "c1"], CONCURRENCY=1))
    wait_for(lambda: "first" in ran(on_cluster), WAIT, 0.2, "the job of the queue not paused")
    ClusterRecordJob.set(queue="c1").perform_async("second")
    wait_for(lambda: "second" in ran(on_cluster), WAIT, 0.2, "a later job of the queue not paused")
    assert on_cluster.llen(CLUSTER.queue("c0")) == 1 and "held" not in ran(on_cluster)
    pause.unpause("c0")
    assert not on_cluster.exists(CLUSTER.paused("c0"))
    wait_for(lambda: "held" in ran(on_cluster), WAIT, 0.2, "the paused queue's job after the unpause")
    _stopped_cleanly(worker)


# -- revoke ----------------------------------------------------------------------------------


def test_revoke_cancels_a_queued_or_scheduled_job_and_a_marked_one_never_runs(on_cluster, redis_cluster,
                                                                             worker_factory):
    from wurk_django import pause
    from wurk_django.api import revoke as revoking
    from wurk_django.client.push import Client

    pause.pause("c0")  # nothing fetches it: the job waits on its list
    queued = ClusterRecordJob.set(queue="c0").perform_async("queued")
    later = ClusterRecordJob.set(queue="c1").perform_in(3600, "later")
    assert revoking.revoke(queued, by="alice") == revoking.QUEUED
    assert revoking.revoke(later, by="bob") == revoking.SCHEDULED
    assert on_cluster.llen(CLUSTER.queue("c0")) == 0 and on_cluster.zcard(CLUSTER.schedule("c1")) == 0
    dead = {payload.loads(r)["jid"]: payload.loads(r) for q in ("c0", "c1")
            for r in on_cluster.zrange(CLUSTER.dead(q), 0, -1)}
    assert dead[queued]["revoked_by"] == "alice" and dead[later]["revoked_by"] == "bob"
    assert "revoked by alice" in dead[queued]["error_message"]
    marked = "0123456789abcdef01234567"
    assert revoking.revoke(marked, by="carol") == revoking.MARKED
    assert on_cluster.zcard(CLUSTER.revoked) == 3

    worker = worker_factory("-c", "1", env=_env(redis_cluster))
    wait_for(lambda: on_cluster.smembers(CLUSTER.processes), WAIT, 0.2, "the worker listed (its markers read)")
    # A job with the revoked jid turning up now is recorded as revoked, never run.
    Client().push({"class": ClusterRecordJob, "args": ["marked"], "queue": "c2", "jid": marked})
    ClusterRecordJob.set(queue="c2").perform_async("after")
    wait_for(lambda: "after" in ran(on_cluster), WAIT, 0.2, "the job after it")
    [raw] = wait_for(lambda: on_cluster.zrange(CLUSTER.dead("c2"), 0, -1), WAIT, 0.2, "the revoked job buried")
    assert payload.loads(raw)["jid"] == marked and "marked" not in ran(on_cluster)
    _stopped_cleanly(worker)


# -- results and status ----------------------------------------------------------------------


def test_a_tracked_job_keeps_its_status_with_progress_on_a_cluster_worker(on_cluster, redis_cluster,
                                                                         worker_factory):
    from wurk_django import status

    jid = ClusterTrackedJob.set(queue="c2").perform_async(21)
    first = status.get(jid)
    assert first is not None and first.state == "enqueued"
    worker = worker_factory("-c", "1", env=_env(redis_cluster))
    done = wait_for(lambda: (s := status.get(jid)) is not None and s.state == "complete" and s, WAIT, 0.2,
                    "the tracked job's record to say complete")
    # Its report landed (a finished run's bar reads full), and its value was kept.
    assert done.progress == 100 and done.message == "halfway" and done.result == 42
    assert on_cluster.ttl(f"status:{jid}") > 0
    _stopped_cleanly(worker)


def test_celery_and_django_tasks_results_on_a_cluster_worker(on_cluster, redis_cluster, worker_factory, settings):
    from tests.jobsapp.push_tasks import celery_add, tasks_add

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    celery = celery_add.delay(2, 3)
    task = tasks_add.enqueue(20, 22)
    assert on_cluster.exists(f"status:{task.id}")  # written before its job, in the push
    worker = worker_factory("-c", "2", env=_env(redis_cluster, QUEUES=["default", "celery"]))
    assert celery.get(timeout=WAIT) == 5
    done = wait_for(lambda: (r := tasks_add.get_result(task.id)).is_finished and r, WAIT, 0.2, "the task")
    assert done.return_value == 42
    _stopped_cleanly(worker)


# -- refused by name ---------------------------------------------------------------------------


# -- iterable jobs -------------------------------------------------------------------------


def test_an_iterable_job_runs_saves_its_cursor_and_a_cancelled_one_stops(on_cluster, redis_cluster, worker_factory):
    from wurk_django import keys

    done = ClusterCountJob.set(queue="c0").perform_async(5)
    cancelled = ClusterCountJob.set(queue="c1").perform_async(5)
    assert ClusterCountJob.cancel(cancelled) > 0  # its state's MULTI on the key's own primary
    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: on_cluster.lrange("{test}:hooks", 0, -1).count(b"complete") == 2, WAIT, 0.2,
             "both iterable jobs to end")
    assert [int(i) for i in on_cluster.lrange("{test}:items", 0, -1)] == list(range(5))  # the cancelled one ran none
    assert sorted(on_cluster.lrange("{test}:hooks", 0, -1)) == [b"cancel", b"complete", b"complete"]
    assert not on_cluster.exists(keys.iteration(done)) and not on_cluster.exists(keys.iteration(cancelled))
    _stopped_cleanly(worker)

