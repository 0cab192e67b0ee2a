"""Huey app on Redis (DB 9), no result storage."""

import os
import time

from huey import RedisHuey

from .recorder import IO_SECONDS, cpu_work, done, redis_call

huey = RedisHuey("bench", url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"), results=False)


@huey.task()
def noop():
    done()


@huey.task()
def cpu():
    cpu_work()
    done()


@huey.task()
def io():
    time.sleep(IO_SECONDS)
    done()


@huey.task()
def rcall():
    redis_call()
    done()


TASKS = {"noop": noop, "cpu": cpu, "io": io, "redis": rcall, "redis-plain": rcall}
