"""Job log lines: ``start``, then ``done`` or ``fail`` with the elapsed time (CORE-228).

Lines go through stdlib logging on the ``wurk_django.job`` logger, with the job's
context (jid, class, and ``LOGGED_JOB_ATTRIBUTES``) attached as ``record.wurk``
so :class:`JSONFormatter` can emit it as fields.
"""

from __future__ import annotations

import logging
import os
import time

import orjson

from .state import thread_id

logger = logging.getLogger("wurk_django.job")


class JobLogger:
    def __init__(self, attributes: list[str], skip: bool) -> None:
        self.attributes = attributes
        self.skip = skip

    def context(self, job: dict) -> dict:
        ctx = {"jid": job.get("jid"), "class": job.get("wrapped") or job.get("class")}
        for key in self.attributes:
            if key in job:
                ctx[key] = job[key]
        return ctx

    def start(self, ctx: dict) -> None:
        if not self.skip and logger.isEnabledFor(logging.INFO):
            _emit("start", ctx)

    def done(self, ctx: dict, started: int) -> None:
        if not self.skip and logger.isEnabledFor(logging.INFO):
            _emit("done", {**ctx, "elapsed": _elapsed(started)})

    def fail(self, ctx: dict, started: int) -> None:
        if not self.skip and logger.isEnabledFor(logging.INFO):
            _emit("fail", {**ctx, "elapsed": _elapsed(started)})


def _emit(message: str, ctx: dict) -> None:
    # makeRecord + handle instead of logger.info(): skips the caller lookup (a stack
    # walk per line) that these lines never print. Handlers and filters still apply.
    logger.handle(logger.makeRecord(logger.name, logging.INFO, "", 0, message, None, None, extra={"wurk": ctx}))


def _elapsed(started_ns: int) -> float:
    return round((time.monotonic_ns() - started_ns) / 1e9, 3)


_pid = os.getpid()
_second_cache: tuple[int, str] = (-1, "")


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


def _timestamp(record: logging.LogRecord) -> str:
    """ISO-8601 UTC with milliseconds; the part up to the second is formatted once per second."""
    global _second_cache
    second = int(record.created)
    cached_second, prefix = _second_cache
    if cached_second != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_cache = (second, prefix)
    return f"{prefix}.{int(record.msecs):03d}Z"


class PlainFormatter(logging.Formatter):
    """``2026-11-29T10:00:00.123Z pid=1 tid=abc class=X jid=Y elapsed=0.01 INFO: done``."""

    def format(self, record: logging.LogRecord) -> str:
        ctx = getattr(record, "wurk", None)
        fields = " ".join(f"{k}={v}" for k, v in ctx.items() if v is not None) + " " if ctx else ""
        line = f"{_timestamp(record)} pid={_pid} tid={thread_id()} {fields}{record.levelname}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": _timestamp(record),
            "pid": _pid,
            "tid": thread_id(),
            "lvl": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = getattr(record, "wurk", None)
        if ctx:
            data["ctx"] = ctx
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return orjson.dumps(data, default=str).decode()
