"""Celery app for the benchmark: Redis broker on DB 9, no result backend, default acks (early)."""

import os
import time

from celery import Celery

from .recorder import IO_SECONDS, cpu_work, done, redis_call

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
app.conf.update(
    task_ignore_result=True,
    task_default_queue="bench",
    worker_prefetch_multiplier=4,  # Celery's default
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=True,
)


@app.task(name="bench.noop")
def noop():
    done()


@app.task(name="bench.cpu")
def cpu():
    cpu_work()
    done()


@app.task(name="bench.io")
def io():
    time.sleep(IO_SECONDS)
    done()


@app.task(name="bench.redis")
def rcall():
    redis_call()
    done()


TASKS = {"noop": noop, "cpu": cpu, "io": io, "redis": rcall, "redis-plain": rcall}
