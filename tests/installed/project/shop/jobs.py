"""One job per feature the smoke proves; each records that it ran in a Redis list ``smoke:<what>``."""

from wurk_django import Job, limiter, redis_client

# Defined at module level, as docs/limiters.md shows.
ONE_AT_A_TIME = limiter.concurrent("smoke-one-at-a-time", 1, wait_timeout=10, lock_timeout=30)


def record(what: str, value) -> None:
    redis_client().rpush(f"smoke:{what}", str(value))


class Record(Job):
    def perform(self, what, value):
        record(what, value)


class BatchDone:
    def on_success(self, status, options):
        record("batch-success", f"{status.total}:{options['label']}")


class Limited(Job):
    def perform(self, n):
        ONE_AT_A_TIME.within_limit(record, "limited", n)


class Once(Job):
    unique_for = 60

    def perform(self, n):
        record("unique", n)


class Add(Job):
    def perform(self, *numbers):
        total = sum(numbers)
        record("chain", total)
        return total


class Tick(Job):
    def perform(self):
        record("periodic", "tick")
