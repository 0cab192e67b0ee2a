"""BasicFetch: Sidekiq's ``BRPOP`` fetcher, the wire-compatibility reference (CORE-104..109).

Opt-in (``WURK["FETCH_CLASS"] = "wurk_django.server.fetch.basic.BasicFetch"``): a
fetched job exists only in this process's memory until it finishes, so a hard
kill loses it. The default, ``reliable_fetch.ReliableFetch``, keeps a copy in
Redis instead; both share this interface:

* ``retrieve_work() -> UnitOfWork | None`` — None when stopping or idle;
* ``unit.acknowledge()`` — the job is done (or its failure was booked);
* ``unit.requeue()`` — put it back, unrun, where it will be fetched next;
* ``flush_acks()`` — send acknowledgements still held back;
* ``release_thread_connection()`` — a processor thread is exiting;
* ``abandon(unit)`` — the thread running ``unit`` was given up: take back what it holds;
* ``bulk_requeue(units)`` — the hard-shutdown path, one pipeline;
* ``terminate()`` — stop handing out work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

import redis as redis_lib

from ... import keys
from ...client.writer import Writer
from ...conf import Config
from ...errors import ConfigurationError
from ...redis import blocked
from ...redis.connection import get_redis
from ..outage import OutageLog
from .queues import QueueOrder

logger = logging.getLogger("wurk_django.worker")

BLOCK_SECONDS = 2
ERROR_BACKOFF = 1.0


class UnitOfWork:
    __slots__ = ("queue", "job", "fetcher", "jid")

    def __init__(self, queue: str, job: bytes, fetcher: BasicFetch) -> None:
        self.queue = queue  # the name without the "queue:" prefix
        self.job = job  # exact bytes as stored, for byte-exact removal
        self.fetcher = fetcher
        self.jid: str | None = None

    @property
    def queue_key(self) -> str:
        return keys.queue(self.queue)

    def acknowledge(self) -> None:
        """Nothing to do: BRPOP already removed the job from Redis."""

    def requeue(self) -> None:
        # Putting a fetched job back is not an enqueue: the write policy, no write hooks.
        Writer(self.fetcher.config).send([("RPUSH", self.queue_key, self.job)])


class BasicFetch:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.order = QueueOrder(config.queues)
        from ...queue_limits.settings import basic_fetch_refusal

        refusal = basic_fetch_refusal(getattr(config, "queue_limits", None), self.order.names)
        if refusal:
            raise ConfigurationError(refusal)
        self._keys = {name: keys.queue(name) for name in self.order.names}
        self._done = threading.Event()
        self._concurrency = config.concurrency
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s")

    def _redis(self) -> redis_lib.Redis:
        return get_redis("fetch", block_seconds=BLOCK_SECONDS, config=self.config)

    def retrieve_work(self) -> UnitOfWork | None:
        if self._done.is_set():
            time.sleep(0.05)
            return None
        queue_keys = [self._keys[name] for name in self.order()]
        try:
            reply = self._redis().brpop(queue_keys, timeout=BLOCK_SECONDS)
        except redis_lib.RedisError as exc:
            self._outage.failed(exc)
            self._done.wait(ERROR_BACKOFF)
            return None
        self._outage.succeeded()
        if reply is None:
            return None
        key, job = reply
        return UnitOfWork(key.decode()[len(keys.QUEUE_PREFIX):], job, self)

    def flush_acks(self) -> None:
        """Nothing is ever parked: BRPOP needs no ACK."""

    def release_thread_connection(self) -> None:
        """Nothing is held per thread: every BRPOP checks a connection out of the pool."""

    def abandon(self, unit: UnitOfWork) -> None:
        """Nothing to take back from an abandoned thread: no slot, no connection held."""

    def bulk_requeue(self, units: list[UnitOfWork]) -> None:
        """Push in-flight jobs back to the fetch end of their queues (CORE-157)."""
        if not units:
            return
        by_queue: dict[str, list[bytes]] = defaultdict(list)
        for unit in units:
            by_queue[unit.queue_key].append(unit.job)
        try:
            Writer(self.config).send([("RPUSH", key, *jobs) for key, jobs in by_queue.items()])
            logger.info("pushed %d in-flight job(s) back to their queues", len(units))
        except redis_lib.RedisError:
            logger.exception("could not push %d in-flight job(s) back to Redis", len(units))

    def in_hand(self) -> int:
        """Jobs fetched and not started: none, this fetcher takes one job per fetch."""
        return 0

    def terminate(self) -> None:
        self._done.set()
        # An idle thread blocked in BRPOP would hold the stop for up to BLOCK_SECONDS.
        try:
            blocked.unblock_soon(get_redis(config=self.config))
        except Exception as exc:  # a stop goes on whatever Redis says
            logger.debug("could not ask Redis to end the fetch's blocks: %s", exc)
