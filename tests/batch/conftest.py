"""An in-process worker for the batch unit tests: the real server chain, retry layer and death path."""

from __future__ import annotations

import pytest


def run_jobs(redis_db, queues=("default",), limit: int = 10_000) -> int:
    """Run queued jobs one at a time until the queues are empty; returns how many ran.
    Each runs in its job context, as the processor runs it; a failure is booked."""
    from wurk_django import context, payload, registry
    from wurk_django.conf import get_config
    from wurk_django.middleware import server_chain
    from wurk_django.redis.connection import get_redis
    from wurk_django.server.retry import Retrier

    config = get_config()
    chain = server_chain(config)
    retrier = Retrier(config)
    ran = 0
    while ran < limit:
        raw = queue = None
        for name in queues:
            raw = redis_db.rpop(f"queue:{name}")
            if raw is not None:
                queue = name
                break
        if raw is None:
            return ran
        ran += 1
        job = payload.loads(raw)
        where = context.JobContext(config, get_redis(config=config), raw, queue=queue, job=job)
        with context.scope(where):
            try:
                job_class = where.job_class = registry.resolve(job["class"])
                instance = job_class()
                instance.jid, instance.bid, instance.payload = job.get("jid"), job.get("bid"), job
                chain.invoke((instance, job, queue), lambda: instance.run(job["args"], job.get("kwargs")))  # noqa: B023
            except BaseException as exc:
                retrier.book(where.job_class, raw, queue, exc)
    return ran


def promote_retries(redis_db) -> int:
    """Move every retry (and scheduled job) onto its queue now."""
    from wurk_django.conf import get_config
    from wurk_django.server.scheduler import Scheduler

    return Scheduler(get_config()).enqueue_due(now=4_000_000_000)


@pytest.fixture
def work(redis_db):
    return lambda queues=("default",): run_jobs(redis_db, queues)


def callbacks(redis_db) -> list[str]:
    return [c.decode() for c in redis_db.lrange("test:callbacks", 0, -1)]
