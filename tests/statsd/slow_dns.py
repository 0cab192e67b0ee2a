"""A statsd client factory for worker tests: its host name never resolves, and each
lookup hangs until the test's jobs have run (or 30 s), counting itself in Redis.

Loaded in the worker process through ``WURK["STATSD"]["CLIENT"]``. A job thread
that waited on this lookup could not run the jobs the lookup waits for, so the
jobs finishing while it hangs shows that no job thread waits on it.
"""

from __future__ import annotations

import socket
import time

from wurk_django.redis.connection import get_redis
from wurk_django.statsd.client import UDPClient

JOBS = 200  # the test pushes this many RecordJobs
LOOKUPS = "test:statsd:lookups"
RAN_WHEN_LOOKUP_ENDED = "test:statsd:ran_when_lookup_ended"


HOST = "statsd.invalid"
_real_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host, port, *args, **kwargs):
    if host != HOST:
        return _real_getaddrinfo(host, port, *args, **kwargs)
    redis = get_redis()
    redis.incr(LOOKUPS)
    deadline = time.monotonic() + 30
    while int(redis.llen("test:ran")) < JOBS and time.monotonic() < deadline:
        time.sleep(0.05)
    redis.rpush(RAN_WHEN_LOOKUP_ENDED, redis.llen("test:ran"))
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def make_client() -> UDPClient:
    socket.getaddrinfo = _getaddrinfo  # this worker process only; other names resolve as usual
    return UDPClient(HOST, 8125)
