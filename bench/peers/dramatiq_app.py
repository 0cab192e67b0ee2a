"""Dramatiq actors on a Redis broker (DB 9), retries off so nothing is re-run."""

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from .recorder import IO_SECONDS, cpu_work, done, redis_call

broker = RedisBroker(url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", max_retries=0)
def noop():
    done()


@dramatiq.actor(queue_name="bench", max_retries=0)
def cpu():
    cpu_work()
    done()


@dramatiq.actor(queue_name="bench", max_retries=0)
def io():
    time.sleep(IO_SECONDS)
    done()


@dramatiq.actor(queue_name="bench", max_retries=0)
def rcall():
    redis_call()
    done()


ACTORS = {"noop": noop, "cpu": cpu, "io": io, "redis": rcall, "redis-plain": rcall}
