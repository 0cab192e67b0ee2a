"""The worker's log handler: lines written in batches by one thread (RUN-706, CORE-228).

A stock ``StreamHandler`` writes and flushes every line while holding its
lock. In a threaded worker that is a system call per ``start`` and ``done``
line, and each call hands the GIL to another thread and queues the caller
for it again: with two lines per job that cost more than the job itself
(docs/benchmarks.md). Here a line below WARNING is formatted by the thread
that logs it, appended to a queue, and written with every other waiting line
in one ``write`` + ``flush`` by a background thread every ``interval``
seconds.

What is kept:

* order: the queue is FIFO and every write drains it under the handler lock;
* a line at WARNING or above is written at once, after everything queued
  before it, so errors and tracebacks never wait;
* ``flush()`` and ``close()`` (called by ``logging.shutdown()`` at exit, by a
  swarm child before ``os._exit``, and on a hard stop) write what is queued.

What is given up: a process killed with SIGKILL loses at most ``interval``
seconds of INFO lines. The jobs themselves are safe either way (reliable
fetch); ``interval=0`` writes every line at once, as a stock handler does.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import weakref
from typing import IO

_handlers: weakref.WeakSet[BatchingStreamHandler] = weakref.WeakSet()


class BatchingStreamHandler(logging.StreamHandler):
    """A ``StreamHandler`` that writes INFO and DEBUG lines in batches.

    Usable from ``LOGGING`` too (embedded mode)::

        "handlers": {"wurk": {"class": "wurk_django.server.logwriter.BatchingStreamHandler",
                              "stream": "ext://sys.stdout", "interval": 0.1}}
    """

    def __init__(self, stream: IO[str] | None = None, interval: float = 0.1) -> None:
        super().__init__(stream)
        if interval < 0:
            raise ValueError(f"interval must be >= 0 seconds, got {interval!r}")
        self.interval = float(interval)
        self._pending: collections.deque[str] = collections.deque()
        self._writer: threading.Thread | None = None
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._closed = False
        _handlers.add(self)

    def handle(self, record: logging.LogRecord) -> logging.LogRecord | bool:
        # The stock handle() holds the handler lock around emit(); here the lock is taken
        # only to write, so threads queueing lines never wait for the writer's system call.
        rv = self.filter(record)
        if isinstance(rv, logging.LogRecord):
            record = rv
        if rv:
            self.emit(record)
        return rv

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self._pending.append(line)
            self._write_pending()
        else:
            self.enqueue(line)

    def enqueue(self, line: str) -> None:
        """Queue one formatted line (no terminator) to be written with the next batch."""
        self._pending.append(line)  # deque.append is atomic: no lock needed
        if self.interval == 0 or self._closed:
            self._write_pending()
        elif self._writer is None:
            self._start_writer()

    def flush(self) -> None:
        with self.lock:
            self._write_pending()
            super().flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        _handlers.discard(self)
        try:
            self.flush()
        finally:
            super().close()

    def _write_pending(self) -> None:
        with self.lock:  # every write holds it, so batches and immediate lines never interleave
            lines = []
            popleft = self._pending.popleft
            try:
                while True:
                    lines.append(popleft())
            except IndexError:
                pass
            if not lines:
                return
            try:
                stream = self.stream
                stream.write(self.terminator.join(lines) + self.terminator)
                stream.flush()
            except RecursionError:
                raise
            except Exception as exc:
                # The stream is gone (closed pipe, full disk): say so once per batch on
                # stderr, as logging.Handler.handleError would, and drop the batch.
                if logging.raiseExceptions and sys.stderr is not None:
                    try:
                        sys.stderr.write(f"--- wurk log writer: {len(lines)} line(s) lost: {exc!r}\n")
                    except Exception:
                        pass

    def _start_writer(self) -> None:
        with self._start_lock:
            if self._writer is None and not self._closed:
                self._stop = threading.Event()
                self._writer = threading.Thread(target=self._run, args=(self._stop,), name="wurk-log-writer",
                                                daemon=True)
                self._writer.start()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            if self._pending:
                self._write_pending()

    def stop_writer(self, timeout: float = 5.0) -> None:
        """Stop the writer thread and write the queue; the next queued line starts a new one."""
        with self._start_lock:
            writer, self._writer = self._writer, None
            self._stop.set()
        if writer is not None:
            writer.join(timeout)
        if not self._closed:
            self.flush()

    def _after_fork_in_child(self) -> None:
        # The parent's writer thread does not exist here, and the parent writes the
        # lines it had queued: drop this copy of them so none is written twice.
        self._pending.clear()
        self._writer = None
        self._stop = threading.Event()
        self._start_lock = threading.Lock()


def _reinit_after_fork() -> None:
    for handler in list(_handlers):
        handler._after_fork_in_child()


os.register_at_fork(after_in_child=_reinit_after_fork)


def stop_writers() -> None:
    """Stop every writer thread, writing what is queued, before ``fork()`` (RUN-810).

    A swarm supervisor forks only while it is the sole thread; the writers start
    again, in the parent and in each child, with the next INFO line.
    """
    for handler in list(_handlers):
        handler.stop_writer()


def flush_all() -> None:
    """Write every batching handler's queued lines now (before ``os._exit``)."""
    for handler in list(_handlers):
        try:
            handler.flush()
        except Exception:  # a broken stream must not stop an exit
            pass
