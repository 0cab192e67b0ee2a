"""The workflow server middleware: keeps a step's return value for the steps after it.

A step job carries ``"wf": [workflow id, step name]``. Before the batch
middleware (further out) acknowledges the job, this stores the return value
(JSON, at most ``WORKFLOW_RESULT_MAX_BYTES``); a value that cannot be kept fails
the run like an exception would. A step of a cancelled workflow is not run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .. import context as job_context
from ..errors import caused_by_shutdown, error_class_name, error_message
from ..redis.cluster_layout import layout_of
from ..redis.errors import ride_out
from . import keys, results, scripts

logger = logging.getLogger("wurk_django.workflow")

#: Inside the batch middleware (-40): the result is stored before the batch counts the job done.
POSITION = -35


def step_of(job: dict) -> tuple[str, str] | None:
    ref = job.get("wf")
    if isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) and x for x in ref):
        return ref[0], ref[1]
    return None


class WorkflowServerMiddleware:
    applies_key = "wf"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get("wf") is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        ref = step_of(job)
        if ref is None:
            return call_next()
        wid, step = ref
        where = job_context.current()
        redis = where.redis
        state = redis.hget(keys.workflow(wid, layout=layout_of(redis)), "state")
        if state is None:
            logger.warning("workflow %s is gone (expired or deleted): step %s jid=%s runs on its own",
                           wid, step, job.get("jid"))
            return call_next()
        if state == b"cancelled":
            logger.info("workflow %s was cancelled: skipping step %s jid=%s", wid, step, job.get("jid"))
            return None
        # The engine does not hand perform's return value to middleware, so this run's
        # instance records it (an instance attribute: other runs of the class are untouched).
        kept: list[Any] = []
        run = instance.run

        def run_and_keep(*args: Any, **kwargs: Any) -> Any:
            value = run(*args, **kwargs)
            kept.append(value)
            return value

        instance.run = run_and_keep
        try:
            outcome = call_next()
            if where.outcome is not None:
                return outcome  # rescheduled or paused: the run that finishes stores the result
            encoded = results.encode(kept[-1] if kept else None, step, where.config.workflow_result_max_bytes)
            # The step ran: a failover now must not book it as failed (run again, or dead with
            # retry: False). Storing is safe to repeat; the batch's acknowledgement waits as long.
            ride_out(lambda: scripts.store_result(redis, wid, step, encoded),
                     f"workflow {wid}: storing the result of step {step}")
            return outcome
        except BaseException as exc:
            if not caused_by_shutdown(exc):
                try:
                    scripts.note_error(redis, wid, step, f"{error_class_name(exc)}: {error_message(exc)}")
                except Exception:
                    logger.exception("workflow %s: could not record the error of step %s", wid, step)
            raise
