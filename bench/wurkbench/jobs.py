"""wurk_django jobs for the benchmark (class names ``wurkbench.jobs.Noop`` etc.)."""

import socket
import threading
import time
from urllib.parse import urlsplit

import hiredis
from peers.recorder import IO_SECONDS, cpu_work, done, record_latency, redis_call

from wurk_django import Job, redis_client
from wurk_django.redis import wire


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


class RedisFloorCall(Job):
    """The redis job's ``INCR`` with no client library at all (the ``redis-floor`` shape,
    a measurement, not a way to write jobs): per thread, one socket to the bench's Redis,
    the command packed by hiredis, written with one ``send`` that keeps the GIL (as
    ``redis_client()`` writes), the reply read with ``recv_into`` and parsed by hiredis.
    What a job pays here is what any Python job pays for a round trip on this machine;
    ``redis`` minus this is what the client adds."""

    queue = "bench"

    def perform(self):
        floor = getattr(_floor, "socket", None)
        if floor is None:
            floor = _floor.socket = _floor_socket()
        sock, reader, buffer = floor
        data = hiredis.pack_command(("INCR", "bench:calls"))
        # libc's send through ctypes without letting go of the GIL, as redis_client() writes
        # (wurk_django.redis.wire's, Linux only): the socket work is the floor's, not a client's.
        if wire._send(sock.fileno(), data, len(data), socket.MSG_NOSIGNAL) != len(data):
            raise OSError("the floor job's send did not take the whole command")
        reply = reader.gets()
        while reply is False:
            reader.feed(buffer, 0, sock.recv_into(buffer))
            reply = reader.gets()
        done()


_floor = threading.local()


def _floor_socket():
    from peers.recorder import URL

    parts = urlsplit(URL)
    sock = socket.create_connection((parts.hostname, parts.port or 6379))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(hiredis.pack_command(("SELECT", parts.path.strip("/") or "0")))
    reader, buffer = hiredis.Reader(), bytearray(65536)
    reply = reader.gets()
    while reply is False:
        reader.feed(buffer, 0, sock.recv_into(buffer))
        reply = reader.gets()
    return sock, reader, buffer


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
