"""Error handlers: where exceptions from jobs and worker threads are reported (CORE-127)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("wurk_django.worker")


def report(exc: BaseException, context: dict[str, Any], config: Any) -> None:
    """Send ``exc`` to every configured error handler, or log it when there are none.

    Handlers are called ``handler(exc, context, config)``; one that fails is
    logged and the others still run.
    """
    handlers = getattr(config, "error_handlers", None) or [default_handler]
    for handler in handlers:
        try:
            handler(exc, context, config)
        except Exception:
            logger.exception("error handler %r failed", handler)


def default_handler(exc: BaseException, context: dict[str, Any], config: Any) -> None:
    what = context.get("context", "Job raised exception")
    job = context.get("job") or {}
    detail = f"{what}: {type(exc).__name__}: {exc} (class={job.get('class')} jid={job.get('jid')})"
    if getattr(config, "verbose", False) or getattr(config, "environment", None) == "development":
        logger.warning(detail, exc_info=exc)
    else:
        logger.warning(detail)
