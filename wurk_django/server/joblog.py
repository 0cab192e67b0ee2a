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
            logger.info("start", extra={"wurk": ctx})

    def done(self, ctx: dict, started: int) -> None:
        if not self.skip and logger.isEnabledFor(logging.INFO):
            logger.info("done", extra={"wurk": {**ctx, "elapsed": _elapsed(started)}})

    def fail(self, ctx: dict, started: int) -> None:
        if not self.skip and logger.isEnabledFor(logging.INFO):
            logger.info("fail", extra={"wurk": {**ctx, "elapsed": _elapsed(started)}})


def _elapsed(started_ns: int) -> float:
    return round((time.monotonic_ns() - started_ns) / 1e9, 3)


class PlainFormatter(logging.Formatter):
    """``2026-11-29T10:00:00.123Z pid=1 tid=abc class=X jid=Y elapsed=0.01 INFO: done``."""

    def format(self, record: logging.LogRecord) -> str:
        from .state import thread_id

        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        ctx = getattr(record, "wurk", None) or {}
        fields = " ".join(f"{k}={v}" for k, v in ctx.items() if v is not None)
        line = f"{ts} pid={os.getpid()} tid={thread_id()} {fields + ' ' if fields else ''}{record.levelname}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        from .state import thread_id

        data = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "pid": os.getpid(),
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
