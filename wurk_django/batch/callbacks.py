"""The jobs a batch pushes for itself: the callback runner and the empty marker (PRO-247, PRO-222).

Both are registered under the wire names Sidekiq Pro / Ruby wurk use, so a
Ruby worker can run what a Python batch pushed and the other way round.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
from typing import Any

from .. import context as job_context
from .. import payload
from ..errors import WurkError
from ..job import Job
from ..outcome import Outcome
from ..redis.cluster_layout import layout_of
from .batch import EMPTY_CLASS
from .fire import CALLBACK_CLASS

logger = logging.getLogger("wurk_django.batch")


class UnresolvableTarget(WurkError):
    """A callback target names no class or method this process can call. Retrying would
    not help, so the job goes straight to the dead set.

    ``foreign`` marks a target that belongs to another runtime (a Ruby constant, a
    module this process cannot import): that callback is handed back, never killed."""

    def __init__(self, message: str, foreign: bool = False) -> None:
        super().__init__(message)
        self.foreign = foreign


#: The payload field counting how many times a callback was handed back to another runtime.
HANDED_BACK = "handed_back"
_FIRST_DELAY = 10.0
_LONGEST_DELAY = 600.0
# Targets this process already warned about: the warning is logged once, not once a bounce.
_warned: set[str] = set()


def _allowed(module: str) -> bool:
    if module in sys.modules:
        return True
    from ..registry import _allowed_prefixes

    return any(module == p or module.startswith(p + ".") for p in _allowed_prefixes())


def resolve(target: str, event: str, callback_class: str | None) -> Any:
    """The bound method ``target`` names, on a fresh instance (no arguments).

    ``"pkg.mod.Klass"`` calls ``on_<event>``; ``"pkg.mod.Klass#method"`` calls
    ``method``; ``"#method"`` looks ``method`` up on the batch's ``callback_class``.
    Only modules already imported or inside the installed apps are imported.
    """
    path, _, method = target.partition("#")
    if not path:
        if not callback_class:
            raise UnresolvableTarget(f"callback {target!r} needs the batch's callback_class, which is not set")
        path = callback_class
    if "::" in path or "." not in path:
        # A Ruby constant (MyApp::Done, BatchDone): a Ruby worker runs it.
        raise UnresolvableTarget(f"callback class {path!r} is not a Python dotted path", foreign=True)
    method = method or f"on_{event}"
    if method.startswith("_"):
        raise UnresolvableTarget(f"callback method {method!r} of {path} is private")
    module_name, _, class_name = path.rpartition(".")
    if not module_name or not _allowed(module_name):
        raise UnresolvableTarget(f"callback class {path!r} is not in an installed app (or not importable here)",
                                 foreign=True)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # Another deployment's code (a second Django project on the same Redis) may run it.
        raise UnresolvableTarget(f"cannot import the module of callback class {path!r}: {exc}",
                                 foreign=True) from exc
    try:
        klass = module
        for part in class_name.split("."):
            klass = getattr(klass, part)
    except AttributeError as exc:
        raise UnresolvableTarget(f"cannot load callback class {path!r}: {exc}") from exc
    if not isinstance(klass, type):
        raise UnresolvableTarget(f"callback target {path!r} is not a class")
    bound = getattr(klass(), method, None)
    if not callable(bound):
        raise UnresolvableTarget(f"callback class {path} has no method {method!r}")
    return bound


def problem(target: str | type, event: str, callback_class: str | None = None) -> str | None:
    """Why ``target`` cannot handle ``event``, when this process can tell: None when it
    can, or when the class cannot be imported here (a Ruby class name, a module of
    another service), which only the worker that runs the callback can judge."""
    if isinstance(target, type):
        klass, path, method = target, f"{target.__module__}.{target.__qualname__}", f"on_{event}"
    else:
        path, _, method = target.partition("#")
        path = path or callback_class or ""
        method = method or f"on_{event}"
        module_name, _, class_name = path.rpartition(".")
        if not module_name or not _allowed(module_name):
            return None
        try:
            klass = importlib.import_module(module_name)
        except ImportError:
            return None
        for part in class_name.split("."):
            klass = getattr(klass, part, None)
            if klass is None:
                return f"module {module_name} has no class {class_name!r}"
        if not isinstance(klass, type):
            return f"{path} is not a class"
    if method.startswith("_"):
        return f"callback method {method!r} of {path} is private"
    if not callable(getattr(klass, method, None)):
        return f"callback class {path} has no method {method!r} for the {event!r} event"
    return None


def _no_retry_when_unresolvable(count: int, exc: BaseException, job: dict) -> Any:
    return "kill" if isinstance(exc, UnresolvableTarget) else None


class CallbackJob(Job):
    """Runs one batch callback: ``args = [bid, target, event, options]``."""

    name = CALLBACK_CLASS
    retry_in = staticmethod(_no_retry_when_unresolvable)

    def perform(self, bid: str, target: str, event: str, options: dict | None = None) -> None:
        from .status import Status

        where = job_context.current()
        callback_class = where.redis.hget(layout_of(where.redis).batch(bid), "callback_class")
        try:
            method = resolve(target, event, callback_class.decode() if callback_class else None)
        except UnresolvableTarget as exc:
            if not exc.foreign:
                raise
            hand_back(where, target, exc)
            return
        method(Status(bid), options or {})


def hand_back(where: job_context.JobContext, target: str, reason: UnresolvableTarget) -> None:
    """Leave a callback for a runtime that can run it: the job as fetched goes to the
    schedule set, a little later each time it comes back, and this run ends acknowledged
    with no failure. It stays a live member of a parent batch, so the parent waits for
    it rather than seeing a death. Either runtime's scheduler puts it back on its queue,
    where a Ruby worker runs it unchanged (the extra field means nothing to Ruby)."""
    job = payload.loads(where.raw)  # as fetched: a middleware's changes are not stored
    count = int(job.get(HANDED_BACK, 0) or 0)
    delay = min(_FIRST_DELAY * 2 ** count, _LONGEST_DELAY)
    job[HANDED_BACK] = count + 1
    job.pop("enqueued_at", None)
    # On a Redis Cluster its queue's own schedule set (issue 46 item 3).
    where.redis.zadd(layout_of(where.redis).schedule(str(job.get("queue") or where.queue)),
                     {payload.dumps(job): time.time() + delay})
    where.outcome = Outcome.RESCHEDULED
    if target in _warned:
        logger.debug("batch callback %s jid=%s handed back again (%d times)", target, job.get("jid"), count + 1)
        return
    _warned.add(target)
    logger.warning("batch callback %r cannot run in this process (%s): left for another runtime (a Ruby "
                   "worker) on queue %s; it comes back every %.0f-%.0f s until one runs it",
                   target, reason, where.queue, _FIRST_DELAY, _LONGEST_DELAY)


class EmptyJob(Job):
    """Pushed into a batch whose block pushed nothing, so the batch finishes and fires."""

    name = EMPTY_CLASS
    retry = False

    def perform(self, *args: Any) -> None:
        return None
