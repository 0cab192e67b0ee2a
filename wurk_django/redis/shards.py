"""Sharding: jobs spread over more than one Redis (Sidekiq's ``Client.via``).

A shard is a Redis named in ``WURK["SHARDS"]`` (``"default"`` is ``REDIS``). A push
goes to, first match wins:

1. the shard the push names: ``Job.set(shard="eu").perform_async(...)``;
2. the shard of the enclosing :func:`via` block (this thread or task only);
3. the job class's ``shard`` attribute;
4. ``WURK["QUEUE_SHARDS"][queue]``;
5. the default Redis.

Inside a :func:`via` block every Redis read and write made without an explicit
config goes to that shard too (``wurk_django.api``, the admin pages), as
``Sidekiq.redis`` does inside ``Client.via``. The shard is never stored in the
job: a worker runs against one shard (``manage.py wurk --shard eu``), and jobs
it re-pushes itself (retries, schedules) stay there.

A shard may be a Redis Cluster (issue 46 item 6): its URL names any node, and a
cluster counts as one shard, its slots spreading its queues over its primaries.
Nothing here treats it apart: the config a push is routed to is probed like any
other (:mod:`wurk_django.redis.cluster`), the push door writes the cluster layout
there, and ``manage.py wurk --shard`` on it runs the cluster worker. Two shards
naming nodes of one cluster would be one set of keys under two names (docs/redis.md,
"Shards and a cluster").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import conf
from ..conf import Config

Shard = str | dict[str, Any]


@contextmanager
def via(shard: Shard) -> Iterator[Config]:
    """Send this context's pushes and Redis reads to ``shard``: a name in
    ``WURK["SHARDS"]``, a Redis URL, or a dict of the ``REDIS`` form::

        with wurk_django.via("redis://other:6379/0"):
            SendEmail.perform_async(42)

    Yields the shard's :class:`Config`. Raises ``ValueError`` at once for an
    unknown shard name or a bad URL. Applies to this thread (or asyncio task)
    only; blocks nest.
    """
    config = conf.base_config().for_shard(shard)
    token = conf.VIA.set(shard)
    try:
        yield config
    finally:
        conf.VIA.reset(token)


def current() -> Shard | None:
    """The shard of the innermost :func:`via` block, or ``None``."""
    return conf.VIA.get()


def route(config: Config, *, named: Shard | None = None, job_class: Any = None, queue: str | None = None,
          via: bool = True) -> Config:
    """The config a push goes through (the order is in the module doc); ``via=False``
    for a client handed its config, which the enclosing ``via()`` block does not change."""
    shard = named
    if shard is None and via:
        shard = conf.VIA.get()
    if shard is None and job_class is not None:
        shard = getattr(job_class, "shard", None)
    if shard is None and queue is not None:
        queue_shards = config.queue_shards
        if queue_shards:
            shard = queue_shards.get(queue)
    return config if shard is None else config.for_shard(shard)


def names(config: Config | None = None) -> list[str]:
    """``"default"`` and the names in ``WURK["SHARDS"]``."""
    config = config or conf.base_config()
    return ["default", *[n for n in config.shards if n != "default"]]
