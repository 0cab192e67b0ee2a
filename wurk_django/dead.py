"""Kept while callers move to :mod:`wurk_django.server.death`, the one death path."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from .server.death import parse_or_raw  # noqa: F401
from .server.death import store as bury  # noqa: F401

logger = logging.getLogger("wurk_django.dead")


def run_death_handlers(handlers: Iterable[Callable[[dict, BaseException], Any]], job: dict,
                       exc: BaseException) -> None:
    """Call every death handler; one that fails is logged and the rest still run (CORE-126)."""
    for handler in handlers:
        try:
            handler(job, exc)
        except Exception:
            logger.exception("death handler %r failed for job %s", handler, job.get("jid"))


