"""Jobs the limiter process tests run in real workers (IMPORT_ON_MISS=["tests.limiter"]).

They record what they saw in the test Redis; a short backoff keeps rescheduled
jobs coming back within a second instead of five minutes.
"""

from __future__ import annotations

import time

from wurk_django import Job, limiter
from wurk_django.redis.connection import get_redis


def soon(_limiter, _job, _exc) -> float:
    return 0.3


# Up to 20 threads race for 3 slots; a job that waits 0.1 s in vain is rescheduled.
HAMMER = limiter.concurrent("hammer", 3, wait_timeout=0.1, lock_timeout=30, backoff=soon, reschedule=1000)
WINDOW = limiter.window("win5", 5, "second", wait_timeout=0.5, backoff=soon, reschedule=1000)
# Quotas that cannot refill during a test: exactly 7 calls each get through.
QUOTAS = {
    "bucket": limiter.bucket("quota-bucket", 7, "day", policy="ignore"),
    "leaky": limiter.leaky("quota-leaky", 7, "day", policy="ignore"),
    "points": limiter.points("quota-points", 70, 0),
}
CRASH = limiter.concurrent("crash", 1, wait_timeout=0, lock_timeout=2)

# INCR the holder count and raise the high-water mark in one atomic step.
_ENTER = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n
"""


class Hammer(Job):
    def perform(self, n):
        HAMMER.within_limit(self.hold, n)
        get_redis().rpush("test:lim:overrated", int(self.payload.get("overrated", 0)))

    def hold(self, n):
        redis = get_redis()
        redis.eval(_ENTER, 2, "test:lim:holding", "test:lim:high")
        time.sleep(0.05)
        redis.decr("test:lim:holding")
        redis.rpush("test:lim:done", n)


class Windowed(Job):
    def perform(self, n):
        WINDOW.within_limit(get_redis().rpush, "test:lim:done", n)


class Quota(Job):
    def perform(self, kind, n):
        lim = QUOTAS[kind]
        try:
            ran = lim.within_limit(lambda: True, **({"estimate": 10} if kind == "points" else {}))
        except limiter.OverLimit:
            ran = False
        get_redis().rpush(f"test:lim:{kind}", "admitted" if ran else "refused")


class HoldForever(Job):
    def perform(self):
        with CRASH.acquire():
            get_redis().rpush("test:lim:holding", "yes")
            time.sleep(60)
