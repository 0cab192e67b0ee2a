"""The workflow death handler: a step's job died, so the step and its workflow fail.

Runs for every death (retries exhausted, ``retry: false``, a manual kill); the
step's dependents stay waiting. Retrying the dead job (``Workflow.retry()``, the
admin's button, or the Dead page) runs the step again, and the workflow goes on
once it succeeds.
"""

from __future__ import annotations

import logging
import time

from .. import context
from ..errors import error_class_name, error_message
from . import scripts
from .middleware import step_of

logger = logging.getLogger("wurk_django.workflow")


def on_death(job: dict, exc: BaseException, reason: str) -> None:
    ref = step_of(job)
    if ref is None:
        return
    wid, step = ref
    text = f"{error_class_name(exc)}: {error_message(exc)}" if exc is not None else f"died ({reason})"
    if scripts.fail(context.current().redis, wid, step, text, time.time()) == 1:
        logger.warning("workflow %s: step %s died (%s); the steps after it wait until it is retried",
                       wid, step, text)
