"""Job log lines: ``start``, then ``done`` or ``fail`` with the elapsed time (CORE-228).

Lines go to the ``wurk_django.job`` logger, with the job's context (jid, class,
and ``LOGGED_JOB_ATTRIBUTES``) attached as ``record.wurk`` so
:class:`JSONFormatter` can emit it as fields. Under the worker's own logging
setup a line skips the ``LogRecord`` and is rendered straight onto the
:class:`~.logwriter.BatchingStreamHandler` queue (see ``_direct_route``).
"""

from __future__ import annotations

import logging
import os
import time

import orjson

from ..logwriter import BatchingStreamHandler
from ..state import thread_id
from . import joblevel

logger = logging.getLogger("wurk_django.job")


class JobLogger:
    def __init__(self, attributes: list[str], skip: bool) -> None:
        self.attributes = attributes
        self.skip = skip
        self._requeued_at_shutdown: set[object] = set()  # jids whose requeued line the shutdown wrote

    def context(self, job: dict) -> dict:
        ctx = {"jid": job.get("jid"), "class": job.get("wrapped") or job.get("class")}
        for key in self.attributes:
            if key in job:
                ctx[key] = job[key]
        return ctx

    def start(self, ctx: dict) -> None:
        if not self.skip and _enabled():
            _write("start", ctx)

    def done(self, ctx: dict, started: int) -> None:
        # Asked before the line is built: with the job log off (the logger above INFO) a
        # job pays one level check here, not a copy of its context and a clock read.
        if not self.skip and _enabled():
            _write("done", {**ctx, "elapsed": _elapsed(started)})

    def fail(self, ctx: dict, started: int) -> None:
        if not self.skip:
            _log("fail", {**ctx, "elapsed": _elapsed(started)})

    def rescheduled(self, ctx: dict, started: int) -> None:
        """Pushed again for later (a rate limit, a job that paused): not a failure."""
        if not self.skip:
            _log("rescheduled", {**ctx, "elapsed": _elapsed(started)})

    def requeued(self, ctx: dict, started: int) -> None:
        """Stopped by shutdown and put back on its queue: it did not fail and will run again."""
        if ctx.get("jid") in self._requeued_at_shutdown:
            return  # already written by the hard shutdown that put it back
        if not self.skip:
            _log("requeued", {**ctx, "elapsed": _elapsed(started)})

    def requeued_at_shutdown(self, ctx: dict, elapsed: float) -> None:
        """The hard shutdown put this job back. Written by the shutdown itself, as a thread
        blocked in C code (a ``sleep``, a socket read) may never see its interruption before
        the process exits; the thread's own ``requeued`` line is then skipped."""
        self._requeued_at_shutdown.add(ctx.get("jid"))
        if not self.skip:
            _log("requeued", {**ctx, "elapsed": elapsed})


def _enabled() -> bool:
    """Would a job log line be written here (the logger, and the running job's own level)?"""
    return logger.isEnabledFor(logging.INFO) and joblevel.allows(logging.INFO)


def _log(message: str, ctx: dict) -> None:
    if _enabled():
        _write(message, ctx)


def _write(message: str, ctx: dict) -> None:
    route = _direct_route()
    if route is None:
        # makeRecord + handle instead of logger.info(): skips the caller lookup (a stack
        # walk per line) that these lines never print. Handlers and filters still apply.
        logger.handle(logger.makeRecord(logger.name, logging.INFO, "", 0, message, None, None, extra={"wurk": ctx}))
        return
    handler, formatter = route
    ns = time.time_ns()
    handler.enqueue(formatter.render(ns // 1_000_000_000, ns // 1_000_000 % 1000, "INFO", logger.name, message, ctx))


def _direct_route() -> tuple[BatchingStreamHandler, PlainFormatter | JSONFormatter] | None:
    """The worker's own handler and formatter when they are all a line would pass through.

    That is the configuration ``manage.py wurk`` installs: no handler or filter on
    ``wurk_django.job``, one filterless :class:`BatchingStreamHandler` with one of
    our formatters on ``wurk_django``, which does not propagate. The line is then
    rendered by that formatter and queued on that handler without building a
    ``LogRecord``: the same bytes for a fraction of the cost (RUN-706). Any other
    configuration (a project's ``LOGGING``) takes the stdlib path.
    """
    if logger.handlers or logger.filters or not logger.propagate:
        return None
    parent = logger.parent
    if parent is None or parent.name != "wurk_django" or parent.propagate or parent.filters:
        return None
    handlers = parent.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    # The job-level filter is the one filter allowed: _log() applies the same test itself.
    if (type(handler) is not BatchingStreamHandler or handler.level > logging.INFO
            or (handler.filters and handler.filters != [joblevel.FILTER])):
        return None
    formatter = handler.formatter
    if type(formatter) is not PlainFormatter and type(formatter) is not JSONFormatter:
        return None
    return handler, formatter


def _elapsed(started_ns: int) -> float:
    """Seconds with millisecond resolution (truncated), as Sidekiq prints them."""
    return (time.monotonic_ns() - started_ns) // 1_000_000 / 1000


_pid = os.getpid()
_second_cache: tuple[int, str] = (-1, "")


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


def _timestamp(second: int, millis: int) -> str:
    """ISO-8601 UTC with milliseconds; the part up to the second is formatted once per second."""
    global _second_cache
    cached_second, prefix = _second_cache
    if cached_second != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_cache = (second, prefix)
    return f"{prefix}.{millis:03d}Z"


class PlainFormatter(logging.Formatter):
    """``2026-11-29T10:00:00.123Z pid=1 tid=abc class=X jid=Y elapsed=0.01 INFO: done``."""

    def format(self, record: logging.LogRecord) -> str:
        line = self.render(int(record.created), int(record.msecs), record.levelname, record.name,
                           record.getMessage(), getattr(record, "wurk", None))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line

    @staticmethod
    def render(second: int, millis: int, level: str, name: str, message: str, ctx: dict | None) -> str:
        fields = " ".join([f"{k}={v}" for k, v in ctx.items() if v is not None]) + " " if ctx else ""
        return f"{_timestamp(second, millis)} pid={_pid} tid={thread_id()} {fields}{level}: {message}"


class JSONFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        error = self.formatException(record.exc_info) if record.exc_info else None
        return self.render(int(record.created), int(record.msecs), record.levelname, record.name,
                           record.getMessage(), getattr(record, "wurk", None), error)

    @staticmethod
    def render(second: int, millis: int, level: str, name: str, message: str, ctx: dict | None,
               error: str | None = None) -> str:
        data = {"ts": _timestamp(second, millis), "pid": _pid, "tid": thread_id(), "lvl": level,
                "logger": name, "msg": message}
        if ctx:
            data["ctx"] = ctx
        if error:
            data["error"] = error
        return orjson.dumps(data, default=str).decode()
