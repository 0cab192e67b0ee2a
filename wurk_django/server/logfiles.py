"""USR2: reopen log files, so logrotate can move them away without ``copytruncate``."""

from __future__ import annotations

import logging


def reopen() -> int:
    """Close and reopen every ``logging.FileHandler`` of the root and ``wurk_django`` loggers
    (and any logger configured with handlers). Returns how many were reopened."""
    seen: set[int] = set()
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    count = 0
    for lg in loggers:
        for handler in lg.handlers:
            if not isinstance(handler, logging.FileHandler) or id(handler) in seen:
                continue
            seen.add(id(handler))
            handler.acquire()
            try:
                if handler.stream is not None:
                    handler.stream.flush()
                    handler.stream.close()
                handler.stream = handler._open()
                count += 1
            finally:
                handler.release()
    logging.getLogger("wurk_django.worker").info("USR2: reopened %d log file(s)", count)
    return count
