"""wurk_django jobs for the benchmark (class names ``wurkbench.jobs.Noop`` etc.)."""

import time

from peers.recorder import IO_SECONDS, cpu_work, done, record_latency, redis_call

from wurk_django import Job, redis_client


class Noop(Job):
    queue = "bench"

    def perform(self):
        done()


class UniqueNoop(Job):
    """bench/startup.py: a unique job (``BENCH_FEATURES=1`` turns unique jobs on)."""

    queue = "bench"
    unique_for = 60

    def perform(self):
        done()


class SecretNoop(Job):
    """bench/startup.py: a job whose last argument is encrypted."""

    queue = "bench"
    encrypt = True

    def perform(self, secret):
        done()


class BootMark(Job):
    """bench/startup.py: records when the worker started its first job (epoch seconds), and
    the CPU seconds its process had used by then."""

    queue = "bench"

    def perform(self):
        redis_client().set("bench:boot", f"{time.time()!r} {time.process_time()!r}", nx=True)


class Cpu(Job):
    queue = "bench"

    def perform(self):
        cpu_work()
        done()


class Io(Job):
    queue = "bench"

    def perform(self):
        time.sleep(IO_SECONDS)
        done()


class Mixed(Job):
    """Long and short jobs in one queue (the ``mixed`` shape of bench/run.py, wurk_django
    only): about one job in 16 sleeps 20 ms (its jid's last hex digit is 0), the rest
    do nothing."""

    queue = "bench"

    def perform(self):
        if self.jid.endswith("0"):
            time.sleep(0.02)
        done()


class RedisCall(Job):
    """One Redis round trip of its own, through wurk_django's client for job code
    (as the Sidekiq job uses ``Sidekiq.redis``)."""

    queue = "bench"

    def perform(self):
        redis_client().incr("bench:calls")
        done()


class RedisPlainCall(Job):
    """One Redis round trip of its own on a plain redis-py client (as the Python peers' jobs make it)."""

    queue = "bench"

    def perform(self):
        redis_call()
        done()


_fast = None


def _fast_client():
    """The redis-fast shape's client: built once per process, as the job's module would."""
    global _fast
    if _fast is None:
        from peers.recorder import URL

        from wurk_django import FastRedis

        _fast = FastRedis.from_url(URL)
    return _fast


class RedisFastCall(Job):
    """The redis-plain job with one change: its client is ``wurk_django.FastRedis.from_url``
    instead of ``redis.Redis.from_url`` (docs/jobs.md, the fast client)."""

    queue = "bench"

    def perform(self):
        _fast_client().incr("bench:calls")
        done()


class RedisCacheCall(Job):
    """The same call on django-redis's client, configured with
    ``REDIS_CLIENT_CLASS = "wurk_django.FastRedis"`` (bench/wurk_settings.py)."""

    queue = "bench"

    def perform(self):
        from django_redis import get_redis_connection

        get_redis_connection("default").incr("bench:calls")
        done()


class Pickup(Job):
    """bench/latency.py: seconds from the push (``sent``, epoch) to the start of perform."""

    def perform(self, sent):
        record_latency(time.time() - sent)


class Due(Job):
    """bench/latency.py: seconds from the due time (``due``, epoch) to the start of perform."""

    def perform(self, due):
        record_latency(time.time() - due, "bench:late")


class Hold(Job):
    """bench/latency.py: keeps one thread busy, so the next job finds one free thread."""

    def perform(self, seconds):
        time.sleep(seconds)
