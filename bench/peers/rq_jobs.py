"""RQ job functions. RQ's default worker forks a child per job, so completions are written directly."""

import time

from .recorder import IO_SECONDS, cpu_work, done_direct, redis_call


def noop():
    done_direct()


def cpu():
    cpu_work()
    done_direct()


def io():
    time.sleep(IO_SECONDS)
    done_direct()


def rcall():
    redis_call()
    done_direct()


FUNCS = {"noop": noop, "cpu": cpu, "io": io, "redis": rcall, "redis-plain": rcall}
