"""The batch's client middleware: what a pushing process loads of batches.

Apart from the server middleware (:mod:`wurk_django.batch.middleware`), which
imports the worker engine, so a web process that pushes into a batch never does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..redis import pools
from . import context


class BatchClientMiddleware:
    """Stamps the open batch's bid on every job pushed inside ``jobs()``."""

    @staticmethod
    def applies(job: dict) -> bool:
        return context.current_batch.get() is not None

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Callable[[], Any]) -> Any:
        batch = context.current_batch.get()
        if batch is not None and not job.get("bid"):
            _check_same_server(batch, job, queue, redis)
            job["bid"] = batch.bid
        return call_next()


def _where(redis: Any) -> tuple[Any, ...]:
    return pools.server_of(redis)


def _check_same_server(batch: Any, job: dict, queue: str, redis: Any) -> None:
    """A batch's jobs are written where the batch lives, and a worker acknowledges a
    job on the server it fetched it from. A job routed elsewhere (a shard named by
    ``QUEUE_SHARDS``, the class's ``shard``) would sit where no worker of its queue
    looks, so it is refused at the push, naming what routed it."""
    home = getattr(batch, "home", None)
    if home is None:
        return
    from .. import context as job_context

    own = job_context.layout_redis(config=home)
    if redis is own or _where(redis) == _where(own):
        return
    raise ValueError(
        f"{job['class']} on queue {queue!r} routes to another Redis than batch {batch.bid} "
        f"(shard {home.shard or 'default'}): a batch and its jobs live on one server. Open the batch "
        f"inside wurk_django.via(<the queue's shard>) so that both go there.")
