"""The jobs a batch pushes for itself: the callback runner and the empty marker (PRO-247, PRO-222).

Both are registered under the wire names Sidekiq Pro / Ruby wurk use, so a
Ruby worker can run what a Python batch pushed and the other way round.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from .. import context as job_context
from .. import keys
from ..errors import WurkError
from ..job import Job
from .batch import EMPTY_CLASS
from .fire import CALLBACK_CLASS


class UnresolvableTarget(WurkError):
    """A callback target names no class or method this process can call. Retrying would
    not help, so the job goes straight to the dead set."""


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
    method = method or f"on_{event}"
    if method.startswith("_"):
        raise UnresolvableTarget(f"callback method {method!r} of {path} is private")
    module_name, _, class_name = path.rpartition(".")
    if not module_name or not _allowed(module_name):
        raise UnresolvableTarget(f"callback class {path!r} is not in an installed app (or not importable here)")
    try:
        module = importlib.import_module(module_name)
        klass = module
        for part in class_name.split("."):
            klass = getattr(klass, part)
    except (ImportError, AttributeError) as exc:
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

        callback_class = job_context.current().redis.hget(keys.batch(bid), "callback_class")
        method = resolve(target, event, callback_class.decode() if callback_class else None)
        method(Status(bid), options or {})


class EmptyJob(Job):
    """Pushed into a batch whose block pushed nothing, so the batch finishes and fires."""

    name = EMPTY_CLASS
    retry = False

    def perform(self, *args: Any) -> None:
        return None
