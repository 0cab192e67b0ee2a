"""Jobs used by the test suite. They record what they did in the test Redis."""

from __future__ import annotations

import os
import time

from wurk_django import Job, job
from wurk_django.iterable import IterableJob
from wurk_django.redis.connection import get_redis


def record(key: str, value: str) -> None:
    get_redis().rpush(key, value)


class RecordJob(Job):
    """Appends its first argument to the ``test:ran`` list."""

    def perform(self, value):
        record("test:ran", str(value))


class FailingJob(Job):
    retry = 3

    def perform(self, message="boom"):
        raise RuntimeError(message)


class NoRetryJob(Job):
    retry = False

    def perform(self):
        raise ValueError("no retry")


class ZeroRetryJob(Job):
    retry = 0
    backtrace = True

    def perform(self):
        raise KeyError("straight to the morgue")


class SlowJob(Job):
    """Sleeps ``seconds``, noting start and finish."""

    def perform(self, seconds, marker="slow"):
        record("test:started", marker)
        time.sleep(seconds)
        record("test:finished", marker)


class PidJob(Job):
    def perform(self, marker):
        record("test:pids", f"{marker}:{os.getpid()}")


class RubyNamedJob(Job):
    name = "HardJob"

    def perform(self, *args):
        record("test:ruby", repr(list(args)))


@job(queue="functions", retry=2)
def add_numbers(a, b):
    record("test:sums", str(a + b))


class TraceJob(Job):
    """Records its jid in ``test:runs`` each time it runs, after a short sleep."""

    def perform(self, seconds=0.02):
        time.sleep(seconds)
        record("test:runs", self.jid)


class TurnJob(Job):
    """Notes its start and its end in one list, ``test:turns``, so a test can tell whether
    two of them ever ran at once."""

    def perform(self, seconds, marker):
        record("test:turns", f"start:{marker}")
        time.sleep(seconds)
        record("test:turns", f"end:{marker}")


class HeldJob(Job):
    """Counts itself running in ``test:held:running`` (each start's count noted in
    ``test:held:seen``) until the test pushes a token to ``test:held:release``; so a test
    sees how many jobs run at once. Gives up after 30 s, so a failing test never hangs."""

    def perform(self):
        redis = get_redis()
        redis.rpush("test:held:seen", redis.incr("test:held:running"))
        try:
            redis.blpop(["test:held:release"], timeout=30)
        finally:
            redis.decr("test:held:running")


class KillerJob(Job):
    """Kills its own worker process, as a segfaulting C extension would."""

    def perform(self):
        import signal

        record("test:killer", str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


class ExpiringJob(Job):
    expires_in = 1

    def perform(self, marker):
        record("test:ran", marker)


class CountJob(IterableJob):
    """Iterates over range(n), recording each item; fails once at ``fail_at`` if given."""

    def build_enumerator(self, n, pause=0.0, fail_at=None, cursor=None):
        return self.iterate_list(list(range(n)), cursor)

    def each_iteration(self, item, n, pause=0.0, fail_at=None):
        if item == fail_at and get_redis().incr("test:failed-once") == 1:
            raise RuntimeError(f"item {item} fails once")
        time.sleep(pause)
        record("test:items", str(item))

    def on_start(self):
        record("test:hooks", "start")

    def on_resume(self):
        record("test:hooks", "resume")

    def on_stop(self):
        record("test:hooks", "stop")

    def on_cancel(self):
        record("test:hooks", "cancel")

    def on_complete(self):
        record("test:hooks", "complete")


class DatabaseJob(Job):
    """Runs one query and records the server process that answered it."""

    retry = False

    def perform(self, marker):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        record("test:db", f"{marker}:{pid}")


class QueryJob(Job):
    """Runs ``SELECT 1`` on the default database, whatever its engine, and records ``marker``."""

    def perform(self, marker):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        record("test:db", marker)


class CountedFailJob(Job):
    """Counts its runs in ``test:failruns``, then raises."""

    def perform(self, *args):
        get_redis().incr("test:failruns")
        raise RuntimeError("counted failure")


def broken_backtrace_cleaner(lines):
    """A BACKTRACE_CLEANER that fails: booking any failure with a backtrace then fails."""
    raise RuntimeError("the cleaner broke")


class LoopJob(Job):
    """Sleeps in short steps (interruptible at the shutdown deadline), noting its start."""

    def perform(self, seconds, marker="loop"):
        record("test:started", marker)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)


class CronRecordJob(Job):
    """Fired by periodic loops in the process tests: records ``marker:jid`` in ``test:cron``."""

    def perform(self, marker):
        record("test:cron", f"{marker}:{self.jid}")


class FileRecordJob(Job):
    """Appends ``value time pid`` to the file named by ``WURK_TEST_RECORD_FILE``: outside
    Redis, so a failover that loses writes cannot lose the record of a run."""

    def perform(self, value, seconds=0):
        if seconds:
            time.sleep(seconds)  # a job that takes a while, so a queue stays busy
        line = f"{value} {time.time():.3f} {os.getpid()}\n"
        with open(os.environ["WURK_TEST_RECORD_FILE"], "a") as out:
            out.write(line)


class ShardRecordJob(Job):
    """Appends its argument to ``test:ran`` on the Redis of the worker running it."""

    def perform(self, value):
        get_redis(config=self._config).rpush("test:ran", str(value))


class EuropeJob(Job):
    """A job class pinned to the ``b`` shard of the sharding tests."""

    shard = "b"

    def perform(self, value):
        get_redis(config=self._config).rpush("test:ran", str(value))


class ContextRecordJob(Job):
    """Writes what the running job's context says about its worker, on that worker's Redis."""

    def perform(self, key):
        import json

        from wurk_django import context

        where = context.current()
        where.redis.rpush(key, json.dumps({"concurrency": where.config.concurrency,
                                           "queues": where.config.queue_names, "shard": where.config.shard,
                                           "queue": where.queue, "jid": where.job["jid"]}))


class ShardCallbacks:
    """Batch callbacks that record the event on the Redis of the worker running them."""

    def on_success(self, status, options):
        from wurk_django import context

        context.current().redis.rpush("test:callbacks", f"success:{status.bid}:{status.total}")

    def on_complete(self, status, options):
        from wurk_django import context

        context.current().redis.rpush("test:callbacks", f"complete:{status.bid}")

    def on_death(self, status, options):
        from wurk_django import context

        context.current().redis.rpush("test:callbacks", f"death:{status.bid}")


class ShardUniqueJob(Job):
    unique_for = 600

    def perform(self, value):
        from wurk_django import context

        context.current().redis.rpush("test:ran", f"unique:{value}")


class ShardDoomedJob(Job):
    """A unique job that fails with no retries: it dies on its first run."""

    unique_for = 600
    retry = 0

    def perform(self, value):
        raise RuntimeError(f"doomed {value}")


class ShardLimitedJob(Job):
    """Always over its limit: the second call in the same hour is refused at once."""

    def perform(self, name):
        from wurk_django import limiter

        limited = limiter.window(name, 1, "hour", wait_timeout=0)
        limited.within_limit(lambda: None)
        limited.within_limit(lambda: None)


class ChattyJob(Job):
    """Logs one INFO and one WARNING line; quiet unless pushed with another ``log_level``."""

    log_level = "warn"

    def perform(self, tag):
        import logging

        chat = logging.getLogger("tests.chatty")
        chat.info("chatty-info %s", tag)
        chat.warning("chatty-warning %s", tag)
        record("test:ran", tag)


class AsyncSleepJob(Job):
    """``async def perform``: records its start, sleeps, records how the sleep ended."""

    async def perform(self, seconds):
        import asyncio

        record("test:started", self.jid)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record("test:async", "cancelled")
            raise
        record("test:async", "finished")


@job
def record_fn_for_on_commit(value):
    record("test:ran", value)


class AppendJob(Job):
    """Appends its value to a file, one line per run: for a Redis that refuses writes."""

    def perform(self, path, value):
        with open(path, "a") as out:
            out.write(f"{value}\n")


class SecretRecordJob(Job):
    """An encrypted job: records its decrypted secret on the Redis of the worker running it."""

    encrypt = True

    def perform(self, value, secret):
        from wurk_django import context

        context.current().redis.rpush("test:ran", f"secret:{value}:{secret['card']}")


class ContextSlowJob(Job):
    """Notes its start, sleeps, notes its end, on the Redis of the worker running it."""

    def perform(self, seconds, marker):
        from wurk_django import context

        context.current().redis.rpush("test:started", marker)
        time.sleep(seconds)
        context.current().redis.rpush("test:finished", marker)


class ContextCronJob(Job):
    """Fired by a periodic loop: records the fire on the Redis of the worker running it."""

    def perform(self, marker):
        from wurk_django import context

        context.current().redis.rpush("test:cron", marker)


class ShardEveryLimiterJob(Job):
    """Takes room once from a limiter of every kind named ``<prefix>-<kind>``."""

    def perform(self, prefix):
        from wurk_django import context, limiter

        made = [limiter.concurrent(f"{prefix}-concurrent", 2), limiter.bucket(f"{prefix}-bucket", 5, "second"),
                limiter.window(f"{prefix}-window", 5, "second"), limiter.leaky(f"{prefix}-leaky", 5, "second"),
                limiter.points(f"{prefix}-points", 10, 1)]
        for each in made[:-1]:
            each.within_limit(lambda: None)
        made[-1].within_limit(lambda: None, estimate=1)
        context.current().redis.rpush("test:ran", f"limiters:{prefix}")


class ForkStateJob(Job):
    """Records, as JSON in ``test:fork-state``, what the process it runs in inherited at
    fork: its pids, the frozen gc generation and its signal dispositions (read by the
    swarm tests from a child). Its parent-death signal is not among them: Linux keeps it
    per thread, and a job runs on a processor thread, not on the thread that set it."""

    def perform(self):
        import gc
        import json
        import signal

        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
        record("test:fork-state", json.dumps({
            "pid": os.getpid(), "ppid": os.getppid(),
            "frozen": gc.get_freeze_count(), "ignored": int(status["SigIgn"].strip(), 16),
            "caught": int(status["SigCgt"].strip(), 16), "usr1": str(signal.getsignal(signal.SIGUSR1)),
        }))
