"""Iterable jobs: long jobs that save their place and resume (CORE-220..225).

::

    class BackfillPrices(IterableJob):
        def build_enumerator(self, category_id, cursor):
            return self.iterate_queryset(Product.objects.filter(category_id=category_id), cursor)

        def each_iteration(self, product, category_id):
            product.refresh_price()

The cursor of the item being processed is saved in ``it-<jid>`` (at most every
5 s, and whenever the job is interrupted). When the worker stops, the job
saves its cursor and is pushed again; a failure saves the cursor of the item
that failed and the retry resumes there, with the same jid. Items may
therefore run more than once — keep ``each_iteration`` idempotent.
``IterableJob.cancel(jid)`` stops a job at its next save.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from . import context, keys, payload
from .errors import JobInterrupted
from .job import Job
from .redis.layout_client import layout_client, one_slot

logger = logging.getLogger("wurk_django.job")

STATE_TTL = 30 * 24 * 3600
FLUSH_INTERVAL = 5.0


def cancel(jid: str) -> int:
    """Mark ``jid`` cancelled; returns the epoch second it was (first) cancelled (CORE-092)."""
    key = keys.iteration(jid)
    # One key, so one slot on a cluster: its primary runs the MULTI there.
    pipe = one_slot(layout_client(), key).pipeline(transaction=True)
    pipe.hsetnx(key, "cancelled", int(time.time()))
    pipe.hget(key, "cancelled")
    pipe.expire(key, STATE_TTL, nx=True)
    return int(pipe.execute()[1])


class IterableJob(Job):
    """A job made of many small iterations; define ``build_enumerator`` and ``each_iteration``."""

    current_object: Any = None
    cursor: Any = None
    arguments: tuple = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "perform" in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} is an IterableJob: define build_enumerator and "
                            "each_iteration instead of perform")
        super().__init_subclass__(**kwargs)

    # -- what subclasses define ------------------------------------------

    def build_enumerator(self, *args: Any, cursor: Any) -> Iterable[tuple[Any, Any]] | None:
        """Yield ``(item, cursor)`` pairs, starting at ``cursor`` (None: the beginning)."""
        raise NotImplementedError(f"{type(self).__name__} must define build_enumerator(self, *args, cursor)")

    def each_iteration(self, item: Any, *args: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define each_iteration(self, item, *args)")

    def on_start(self) -> None:
        """First execution, before the first item."""

    def on_resume(self) -> None:
        """A later execution (after an interruption or a failure), before its first item."""

    def on_stop(self) -> None:
        """After every execution's loop, however it ended."""

    def on_cancel(self) -> None:
        """The job was cancelled."""

    def on_complete(self) -> None:
        """Every item was processed (or the job was cancelled)."""

    @contextlib.contextmanager
    def around_iteration(self) -> Iterator[None]:
        """Wraps each ``each_iteration`` call; override to add, e.g., a transaction."""
        yield

    @classmethod
    def cancel(cls, jid: str) -> int:
        return cancel(jid)

    # -- enumerator helpers ----------------------------------------------

    @staticmethod
    def iterate_list(items: list, cursor: int | None) -> Iterator[tuple[Any, int]]:
        """Items of a list; the cursor is the index."""
        start = cursor or 0
        for index in range(start, len(items)):
            yield items[index], index

    @staticmethod
    def iterate_queryset(queryset: Any, cursor: Any, batch_size: int = 100) -> Iterator[tuple[Any, Any]]:
        """Records in primary-key order, fetched ``batch_size`` at a time; the cursor is the pk."""
        for batch, _ in IterableJob.iterate_queryset_batches(queryset, cursor, batch_size):
            for record in batch:
                yield record, record.pk

    @staticmethod
    def iterate_queryset_batches(queryset: Any, cursor: Any, batch_size: int = 100) -> Iterator[tuple[list, Any]]:
        """Lists of up to ``batch_size`` records; the cursor is the first pk of the batch."""
        queryset = queryset.order_by("pk")
        if cursor is not None:
            queryset = queryset.filter(pk__gte=cursor)
        while True:
            batch = list(queryset[:batch_size])
            if not batch:
                return
            yield batch, batch[0].pk
            queryset = queryset.filter(pk__gt=batch[-1].pk)

    @staticmethod
    def iterate_csv_rows(reader: Iterable[Any], cursor: int | None) -> Iterator[tuple[Any, int]]:
        """Rows of a csv reader (or any iterable); the cursor is the row index."""
        start = cursor or 0
        for index, row in enumerate(reader):
            if index >= start:
                yield row, index

    @staticmethod
    def iterate_csv_batches(reader: Iterable[Any], cursor: int | None,
                            batch_size: int = 100) -> Iterator[tuple[list, int]]:
        """Lists of up to ``batch_size`` rows of a csv reader (or any iterable); the
        cursor is the batch's index (batch ``n`` starts at row ``n * batch_size``), so
        a resumed job starts again at the batch it had not finished. Build the
        reader afresh in ``build_enumerator``: a resume reads the file from the top
        and skips the batches already done."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, not {batch_size!r}")
        start = cursor or 0
        rows = iter(reader)
        index = 0
        while True:
            batch = list(itertools.islice(rows, batch_size))
            if not batch:
                return
            if index >= start:
                yield batch, index
            index += 1

    # -- the loop -----------------------------------------------------------

    def perform(self, *args: Any) -> None:
        """The iteration loop; subclasses define build_enumerator/each_iteration instead."""
        self.arguments = args
        key = keys.iteration(self.jid)
        redis = context.current().redis  # the Redis the job came from (its shard)
        state = redis.hgetall(key)
        self._executions = int(state.get(b"ex", 0)) + 1
        self._runtime = float(state.get(b"rt", 0.0))
        self.cursor = payload.loads(state[b"c"]) if b"c" in state else None
        self._started = time.monotonic()
        if state.get(b"cancelled"):
            self.on_cancel()
            self._finish(key)
            return
        enumerator = self.build_enumerator(*args, cursor=self.cursor)
        if enumerator is None:
            logger.info("%s jid=%s: build_enumerator returned None, nothing to do", self.job_name, self.jid)
            self._finish(key)
            return
        (self.on_start if self._executions == 1 else self.on_resume)()
        outcome = "complete"
        try:
            outcome = self._loop(key, enumerator, args)
        except Exception:
            self._flush(key)  # a retry resumes at the item that failed
            raise
        finally:
            self.on_stop()
        if outcome == "interrupted":
            self._flush(key)
            raise JobInterrupted(f"{self.job_name} jid={self.jid} interrupted at cursor {self.cursor!r}")
        if outcome == "cancelled":
            self.on_cancel()
        self._finish(key)

    def _loop(self, key: str, enumerator: Iterable[tuple[Any, Any]], args: tuple) -> str:
        config = context.current().config
        limit = config.max_iteration_runtime
        flushed_at = time.monotonic()
        warned = False
        for item, cursor in enumerator:
            self.current_object, self.cursor = item, cursor
            stopping = self.interrupted() or (limit is not None and time.monotonic() - self._started > limit)
            if stopping or time.monotonic() - flushed_at >= FLUSH_INTERVAL:
                if self._flush(key):
                    return "cancelled"
                flushed_at = time.monotonic()
            if stopping:
                return "interrupted"
            began = time.monotonic()
            with self.around_iteration():
                self.each_iteration(item, *args)
            took = time.monotonic() - began
            if not warned and took > config.timeout:
                # A stop waits TIMEOUT seconds for the running iteration, then pushes the
                # job back: an iteration longer than that is cut off and runs again.
                warned = True
                logger.warning("%s jid=%s: one iteration took %.1fs, longer than the shutdown TIMEOUT (%ss); a "
                               "stop cannot wait for it, so it would be cut off and run again. Make each "
                               "iteration shorter (smaller batches).", self.job_name, self.jid, took, config.timeout)
        return "complete"

    def _flush(self, key: str) -> bool:
        """Save executions, cursor and runtime; True if the job was cancelled (CORE-223)."""
        runtime = self._runtime + (time.monotonic() - self._started)
        pipe = one_slot(context.current().redis, key).pipeline(transaction=True)
        pipe.hset(key, mapping={"ex": self._executions, "c": payload.dumps(self.cursor), "rt": repr(runtime)})
        pipe.expire(key, STATE_TTL, nx=True)
        pipe.hget(key, "cancelled")
        return bool(pipe.execute()[-1])

    def _finish(self, key: str) -> None:
        self.on_complete()
        context.current().redis.unlink(key)
