"""A job's ``log_level`` option: the least severe line its thread logs while it runs (CORE-033, CORE-228).

Python's logger levels are shared by every thread, so the level cannot be set on the
logger as Ruby's ``with_level`` does. Instead the worker thread carries the job's level,
and a filter on the handlers drops that thread's records below it; the job's own
``start``/``done`` lines check it too. A job can therefore quieten its lines
(``"warn"`` hides a chatty job's INFO lines and its start/done lines); it cannot bring
out a line its logger's configured level already drops.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger("wurk_django.worker")

# Ruby's level names first (a Sidekiq client writes them), then Python's.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING,
          "error": logging.ERROR, "fatal": logging.CRITICAL, "critical": logging.CRITICAL,
          "unknown": logging.CRITICAL}


class _JobLevel(threading.local):
    # A class default, as most jobs set no level: reading it costs no AttributeError
    # (getattr with a default raises and catches one inside, 0.5-1 us a read).
    level: int | None = None


_local = _JobLevel()
_install_lock = threading.Lock()
_installed: set[int] = set()  # ids of the handlers that carry the filter
_warned: set[str] = set()
_scanned = -1  # how many loggers existed at the last scan: a job with a level rescans only when that grew


def parse(value: Any) -> int | None:
    """The numeric level of ``value`` (a name in either language, or a number); None if unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        name = value.strip().lower()
        if name in LEVELS:
            return LEVELS[name]
        if name.isdigit():
            return int(name)
    return None


def current() -> int | None:
    """The level of the job this thread runs, if it set one."""
    return _local.level


def allows(level: int) -> bool:
    threshold = _local.level
    return threshold is None or level >= threshold


def enter(value: Any) -> int | None:
    """Apply a job's ``log_level`` to this thread; returns what :func:`leave` restores."""
    previous = current()
    level = parse(value)
    if level is None:
        text = repr(value)
        if text not in _warned:  # once per value: a bad option must not flood the log
            _warned.add(text)
            logger.warning("ignoring log_level %s: not a level name (debug, info, warn, error, fatal)", text)
        return previous
    _install()
    _local.level = level
    return previous


def leave(previous: int | None) -> None:
    _local.level = previous


class ThreadLevelFilter(logging.Filter):
    """Drops a record below the level of the job running on the thread that logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        threshold = _local.level
        return threshold is None or record.levelno >= threshold


FILTER = ThreadLevelFilter()


def _install() -> None:
    """Put the filter on every handler configured so far, once per handler. Done at the
    first job with a level, so a worker whose jobs set none pays nothing."""
    global _scanned
    known = logging.Logger.manager.loggerDict
    if len(known) == _scanned:
        return
    loggers = [logging.getLogger()] + [lg for lg in list(known.values()) if isinstance(lg, logging.Logger)]
    with _install_lock:
        _scanned = len(known)
        for lg in loggers:
            for handler in lg.handlers:
                if id(handler) not in _installed:
                    _installed.add(id(handler))
                    handler.addFilter(FILTER)
