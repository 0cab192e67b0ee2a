"""Jobs of the ambient-rule tests (tests/topologies/test_ambient_shards.py): run by a
worker started with ``--shard b``, they push, read and open batches without naming a
Redis, and write what they saw on the Redis of the worker running them."""

from __future__ import annotations

import json

from wurk_django import Job, context, via
from wurk_django.api import Queue
from wurk_django.batch import Batch
from wurk_django.celery.result import AsyncResult
from wurk_django.client.push import Client
from wurk_django.redis.connection import get_redis

OUT = "ambient_out"  # a queue no worker of these tests reads: what lands there stays to be counted


class Child(Job):
    """Appends its argument to ``test:ran`` on the Redis of the worker running it."""

    def perform(self, value):
        context.current().redis.rpush("test:ran", str(value))


class OpensABatch(Job):
    """A job that opens a batch and pushes its children into it."""

    def perform(self, count):
        batch = Batch()
        batch.description = "opened by a job"
        with batch.jobs():
            for i in range(count):
                Child.perform_async(f"child-{i}")
        context.current().redis.rpush("test:bids", batch.bid)


class Out(Job):
    queue = OUT

    def perform(self, *args):
        pass


def _looks(label, result_id):
    """Push through each door and read through each reader, naming no Redis."""
    Out.perform_async(label)
    Client().push({"class": Out, "queue": OUT, "args": [f"{label}-client"]})
    return {"queue_size": Queue(OUT).size, "result_state": AsyncResult(result_id).state}


class Looks(Job):
    """What the pushes and reads of a job find, inside and outside via() and with an
    explicit config or client; recorded as JSON in ``test:looks`` on the worker's Redis."""

    def perform(self, result_id):
        seen = {"plain": _looks("plain", result_id)}
        with via("a"):
            seen["via"] = _looks("via", result_id)
            default = context.config().for_shard("default")
            Client(config=default).push({"class": Out, "queue": OUT, "args": ["explicit-config"]})
            Out.set(shard="default").perform_async("explicit-shard")
            seen["explicit"] = {"result_state": AsyncResult(result_id, config=default).state,
                                "queue_size": Queue(OUT, redis=get_redis(config=default)).size}
        context.current().redis.rpush("test:looks", json.dumps(seen))
