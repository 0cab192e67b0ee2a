"""Celery's signals, sent where wurk runs the matching step, with Celery's keyword arguments.

::

    # before: from celery.signals import task_prerun
    from wurk_django.celery.signals import task_prerun

    @task_prerun.connect
    def log_start(sender=None, task_id=None, task=None, args=None, kwargs=None, **extra):
        ...

==========================  ==================================================  =====================================
signal                      sent                                                keyword arguments (besides ``sender``)
==========================  ==================================================  =====================================
``before_task_publish``     by a client middleware, before a task's push         ``body``, ``exchange``, ``routing_key``,
                            (``sender`` the task's name; ``headers`` may be       ``headers``, ``properties``,
                            changed: the task reads them in ``request.headers``)  ``declare``, ``retry_policy``
``after_task_publish``      by the same middleware, once the push is written     ``body``, ``exchange``, ``routing_key``,
                                                                                ``headers``
``task_prerun``             before the task's function, on the thread running it ``task_id``, ``task``, ``args``, ``kwargs``
``task_postrun``            after it, however it ended                           the same, ``retval``, ``state``
``task_success``            after it returned (``sender`` the task)              ``result``
``task_failure``            after it raised and no retry follows                 ``task_id``, ``exception``, ``args``,
                                                                                ``kwargs``, ``traceback``, ``einfo``
``task_retry``              after it raised and a retry follows                  ``request``, ``reason``, ``einfo``
``task_revoked``            a call skipped because its ``expires`` passed         ``request``, ``terminated``, ``signum``,
                                                                                ``expired``
``worker_process_init``     a worker process boots (wurk's ``worker_startup``)   none
``worker_ready``            right after it, before the first job                 none
``worker_shutdown``         the worker stops (wurk's ``worker_shutdown``)        none
==========================  ==================================================  =====================================

``exchange`` is ``""`` and ``routing_key`` the queue (Redis lists have no exchanges),
``declare`` is ``[]``. A receiver that raises is logged and the others still run, as in
Celery. Each is a Django :class:`~django.dispatch.Signal` whose ``connect`` also works as a
decorator (``@sig.connect`` or ``@sig.connect(sender=...)``).
"""

from __future__ import annotations

import logging
import traceback as traceback_module
from collections.abc import Callable
from typing import Any

from django.dispatch import Signal as DjangoSignal

logger = logging.getLogger("wurk_django.celery")


class Signal(DjangoSignal):
    """A Django signal whose ``connect`` is also a decorator, and whose ``send`` logs a
    receiver's error instead of raising it (Celery's behaviour)."""

    def __init__(self, name: str, providing_args: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.name = name
        #: The keyword arguments this signal is sent with (besides ``signal`` and ``sender``).
        self.providing_args = providing_args

    def __repr__(self) -> str:
        return f"<Signal: {self.name}>"

    def connect(self, receiver: Callable[..., Any] | None = None, sender: Any = None, weak: bool = True,
                dispatch_uid: Any = None, **_celery_options: Any) -> Any:  # type: ignore[override]
        """``sig.connect(fn)``, ``@sig.connect`` or ``@sig.connect(sender=..., weak=False)``.
        Returns the receiver, so the decorated function stays what it was."""
        if receiver is None:
            def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
                super(Signal, self).connect(fn, sender=sender, weak=weak, dispatch_uid=dispatch_uid)
                return fn

            return decorate
        super().connect(receiver, sender=sender, weak=weak, dispatch_uid=dispatch_uid)
        return receiver

    def send(self, sender: Any, **named: Any) -> list[tuple[Any, Any]]:  # type: ignore[override]
        if not self.receivers:
            return []
        responses = super().send_robust(sender, **named)
        for receiver, response in responses:
            if isinstance(response, Exception):
                logger.error("celery signal %s: receiver %r raised %s: %s", self.name, receiver,
                             type(response).__name__, response, exc_info=response)
        return responses


class ExceptionInfo:
    """Celery's ``einfo``: the exception, its type, its traceback object and text."""

    def __init__(self, exc: BaseException) -> None:
        self.exception = exc
        self.type = type(exc)
        self.tb = exc.__traceback__
        self.traceback = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))

    def __str__(self) -> str:
        return self.traceback


_TASK = ("task_id", "task", "args", "kwargs")
before_task_publish = Signal("before_task_publish", ("body", "exchange", "routing_key", "headers", "properties",
                                                     "declare", "retry_policy"))
after_task_publish = Signal("after_task_publish", ("body", "exchange", "routing_key", "headers"))
task_prerun = Signal("task_prerun", _TASK)
task_postrun = Signal("task_postrun", (*_TASK, "retval", "state"))
task_success = Signal("task_success", ("result",))
task_failure = Signal("task_failure", ("task_id", "exception", "args", "kwargs", "traceback", "einfo"))
task_retry = Signal("task_retry", ("request", "reason", "einfo"))
task_revoked = Signal("task_revoked", ("request", "terminated", "signum", "expired"))
worker_process_init = Signal("worker_process_init")
worker_ready = Signal("worker_ready")
worker_shutdown = Signal("worker_shutdown")

#: Celery signals with no wurk counterpart: importing one names the alternative.
NOT_SENT = {
    "task_received": "wurk has no prefetch step; use task_prerun",
    "task_sent": "removed in Celery 4; use after_task_publish",
    "task_rejected": "wurk never rejects a message; use task_failure",
    "task_unknown": "an unknown class goes to the dead set: connect wurk_django.signals.job_died",
    "task_internal_error": "use task_failure",
    "celeryd_init": "use worker_process_init", "celeryd_after_setup": "use worker_ready",
    "worker_init": "use worker_process_init", "worker_before_create_process": "use worker_process_init",
    "worker_process_shutdown": "use worker_shutdown", "worker_shutting_down": "use worker_shutdown",
    "heartbeat_sent": "connect wurk_django.signals.worker_beat",
    "beat_init": "periodic jobs run in the worker: use worker_ready",
    "beat_embedded_init": "periodic jobs run in the worker: use worker_ready",
    "setup_logging": "configure Django's LOGGING", "after_setup_logger": "configure Django's LOGGING",
    "after_setup_task_logger": "configure Django's LOGGING",
    "eventlet_pool_started": "wurk runs threads", "eventlet_pool_preshutdown": "wurk runs threads",
    "eventlet_pool_postshutdown": "wurk runs threads", "eventlet_pool_apply": "wurk runs threads",
    "import_modules": "use django's AppConfig.ready()",
}


def __getattr__(name: str) -> Any:
    if name in NOT_SENT:
        raise ImportError(f"celery.signals.{name} has no counterpart in wurk_django.celery.signals: "
                          f"{NOT_SENT[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
