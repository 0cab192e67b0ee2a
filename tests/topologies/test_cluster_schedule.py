"""The scheduler's promotion on a real Redis Cluster (issue 46 stage 2): each queue's own
``schedule`` and ``retry`` sets are moved onto that queue by ``lua/promote_queue.lua``,
every key declared and in the queue's slot, the script loaded per node."""

from __future__ import annotations

import time

import redis as redis_lib

from wurk_django import Job, context, keys, payload
from wurk_django.client.writer import Writer
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.server.scheduler import Scheduler


class LaterJob(Job):
    def perform(self, *args):
        pass


def _due(queue: str, arg: object, into: str = keys.SCHEDULE) -> str:
    """A job in ``queue``'s own set, due 5 s ago (a ``perform_at`` in the past pushes at once),
    written through the write path; its jid."""
    jid = f"{queue}-{arg}"
    job = {"class": "LaterJob", "args": [arg], "queue": queue, "jid": jid, "retry": True}
    Writer().add_to_set(into, [(job, time.time() - 5)])
    return jid


def test_due_jobs_of_every_queue_are_promoted_onto_their_own_queue(on_cluster, redis_cluster):
    names = [f"s{n}" for n in range(12)]
    jids = {name: _due(name, name) for name in names}
    later = LaterJob.set(queue="s0").perform_in(3600, "not yet")
    retried = _due("s3", "again", keys.RETRY)  # a retry due now, in its queue's own retry set
    assert on_cluster.zcard(CLUSTER.retry("s3")) == 1
    owners = {on_cluster.get_node_from_key(CLUSTER.schedule(n)).port for n in names}
    assert owners == set(redis_cluster.primary_ports())  # the sets spread over every primary

    moved = Scheduler(context.config()).enqueue_due()

    assert moved == len(names) + 1
    for name in names:
        raws = on_cluster.lrange(CLUSTER.queue(name), 0, -1)
        pushed = [payload.loads(r) for r in raws]
        assert jids[name] in [j["jid"] for j in pushed]
        assert all("enqueued_at" in j for j in pushed)
        assert on_cluster.llen(CLUSTER.wake(name)) >= 1
    assert retried in [payload.loads(r)["jid"] for r in on_cluster.lrange(CLUSTER.queue("s3"), 0, -1)]
    # What is not due stays; nothing in the one-server layout.
    assert [payload.loads(r)["jid"] for r in on_cluster.zrange(CLUSTER.schedule("s0"), 0, -1)] == [later]
    assert on_cluster.exists("schedule", "retry", "queue:s0") == 0


def test_a_member_that_is_not_a_job_goes_to_its_queues_dead_set(on_cluster):
    _due("broken", 1)  # registers the queue
    on_cluster.zadd(CLUSTER.schedule("broken"), {b"not json": time.time() - 1})
    Scheduler(context.config()).enqueue_due()
    assert on_cluster.zrange(CLUSTER.dead("broken"), 0, -1) == [b"not json"]
    assert on_cluster.llen(CLUSTER.queue("broken")) == 1 and on_cluster.zcard(CLUSTER.schedule("broken")) == 0


def test_a_node_that_forgot_the_script_gets_it_again(on_cluster, redis_cluster):
    names = [f"f{n}" for n in range(9)]
    for name in names:
        _due(name, name)
    for port in redis_cluster.primary_ports():
        node = redis_lib.Redis(port=port)
        node.script_flush()
        node.close()
    assert Scheduler(context.config()).enqueue_due() == len(names)
    assert all(on_cluster.llen(CLUSTER.queue(name)) == 1 for name in names)
