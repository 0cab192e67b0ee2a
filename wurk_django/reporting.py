"""Error handlers: where exceptions from jobs and worker threads are reported (CORE-127).

The built-in report (one log line, with the traceback in development) always
runs first; the handlers of ``ERROR_HANDLERS`` are called after it, in order,
so adding one (an error tracker, say) never silences the worker's own log.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("wurk_django.worker")

def report(exc: BaseException, context: dict[str, Any], config: Any) -> None:
    """Log ``exc``, then send it to every configured error handler.

    Handlers are called ``handler(exc, context, config)``; one that fails is
    logged and the others still run.
    """
    default_handler(exc, context, config)
    notify_handlers(exc, context, config)


def notify_handlers(exc: BaseException, context: dict[str, Any], config: Any) -> None:
    """Call the configured handlers only, for a caller that has logged ``exc`` itself."""
    for handler in getattr(config, "error_handlers", None) or ():
        try:
            handler(exc, context, config)
        except Exception:
            logger.exception("error handler %r failed", handler)


def development(config: Any) -> bool:
    """Whether failures log their traceback: ``ENVIRONMENT`` (or ``-e``) when it is set,
    else Django's ``DEBUG``, so a project in development sees them without a flag."""
    environment = getattr(config, "environment", None)
    if environment is not None:
        return environment == "development"
    from django.conf import settings

    return bool(settings.configured and getattr(settings, "DEBUG", False))


def describe(job: dict) -> str:
    """The job's class and jid, and for a batch callback which callback of which batch
    failed (the class alone names only the runner every callback shares)."""
    from .batch.fire import CALLBACK_CLASS  # lazy: only a failure pays for it

    text = f"class={job.get('class')} jid={job.get('jid')}"
    args = job.get("args")
    if job.get("class") == CALLBACK_CLASS and isinstance(args, list) and len(args) >= 3:
        text += f" callback={args[1]} event={args[2]} bid={args[0]}"
    return text


def default_handler(exc: BaseException, context: dict[str, Any], config: Any) -> None:
    what = context.get("context", "Job raised exception")
    job = context.get("job") or {}
    detail = f"{what}: {type(exc).__name__}: {exc} ({describe(job)})"
    if getattr(config, "verbose", False) or development(config):
        logger.warning(detail, exc_info=exc)
    else:
        logger.warning(detail)
