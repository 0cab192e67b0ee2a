"""Registering periodic loops: from settings at worker boot, and from code.

A *registration block* is one pass over a set of registrations (a worker
registers ``WURK["PERIODIC"]`` plus every ``periodic.register`` call its code
made, as one block). After a block, loops of the classes the block mentions
that it did not write are deleted: a changed schedule replaces the old loop
instead of running beside it. Loops of classes the block never mentions are
left alone (another app or a Ruby process may own them), so removing the only
loop of a class needs ``unregister(lid)``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .. import context
from ..redis.cluster_layout import layout_of
from . import loops
from .config import build_loop, entry_loop, resolve_job, ruby_push_defaults
from .loops import Loop

logger = logging.getLogger("wurk_django.periodic")

_code: dict[str, tuple[str, str, Any, dict[str, Any]]] = {}  # lid -> (cron, job, tz, options)
_code_lock = threading.Lock()


class Manager:
    """One registration block. ``tz`` is the default zone of later ``register`` calls."""

    def __init__(self, redis: Any = None, *, tz: Any = None, resolve: bool = True) -> None:
        self._redis = redis
        self.tz = tz
        self.resolve = resolve
        self.written: dict[str, Loop] = {}

    @property
    def redis(self):
        return context.redis(self._redis)

    def register(self, cron: str, job: Any, *, tz: Any = None, **options: Any) -> Loop:
        """Store a loop now and return it; ``ValueError`` for a bad schedule, class or option."""
        loop = build_loop(cron, job, tz if tz is not None else self.tz, options)
        if self.resolve:
            _check_class(loop.klass)
        _persist(loop, self.redis)
        self.written[loop.lid] = loop
        return loop

    def add(self, loop: Loop) -> Loop:
        _persist(loop, self.redis)
        self.written[loop.lid] = loop
        return loop

    def unregister(self, lid: str) -> None:
        loops.unregister(lid, self.redis)
        self.written.pop(lid, None)

    def prune(self) -> list[str]:
        """Delete stored loops of this block's classes that this block did not write."""
        klasses = {loop.klass for loop in self.written.values()}
        if not klasses:
            return []
        redis = self.redis
        where = layout_of(redis)
        stored = [m.decode() if isinstance(m, bytes) else m for m in redis.smembers(where.periodic)]
        candidates = [lid for lid in stored if lid not in self.written]
        if not candidates:
            return []
        pipe = redis.pipeline(transaction=False)
        for lid in candidates:
            pipe.hget(where.loop(lid), "klass")
        removed = []
        for lid, klass in zip(candidates, pipe.execute(), strict=True):
            klass = klass.decode() if isinstance(klass, bytes) else klass
            if klass in klasses:
                loops.unregister(lid, redis)
                removed.append(lid)
                logger.info("periodic: removed loop %s of %s (no longer registered)", lid, klass)
        return removed


def _persist(loop: Loop, redis: Any = None) -> None:
    # The class is resolved by now (or never will be here): its queue and retry go
    # with the stored options, for a Ruby leader's push.
    loop.push_defaults = ruby_push_defaults(loop.klass)
    loops.persist(loop, redis)


def _check_class(name: str) -> None:
    from django.core.exceptions import AppRegistryNotReady

    try:
        resolve_job(name)
    except AppRegistryNotReady:
        pass  # registered while apps load: the worker checks it again at boot


def _apps_ready() -> bool:
    from django.apps import apps

    return apps.ready


def register(cron: str, job: Any, *, tz: Any = None, **options: Any) -> Loop:
    """Register a periodic job from code, e.g. in ``AppConfig.ready()``::

        periodic.register("0 4 * * *", "shop.jobs.Nightly", queue="low", args=["x"], tz="Asia/Tokyo")

    Validates at once (``ValueError`` for a bad cron string, class or option),
    stores the loop in Redis when it can (not while Django is still loading its
    apps: no Redis then), and remembers it so every worker
    booting this code registers it again (with ``WURK["PERIODIC"]``, as one block).
    Options are job options (``queue``, ``retry``, ``args``, ...) plus ``paused``
    (the initial state only) and ``label``; ``tz`` is an IANA zone name
    (default: Django's ``TIME_ZONE``).
    """
    loop = build_loop(cron, job, tz, options)
    _check_class(loop.klass)
    with _code_lock:
        _code[loop.lid] = (cron, loop.klass, tz, dict(options))
    if not _apps_ready():
        # Called while Django loads (``AppConfig.ready()``, a module import): no Redis
        # then, so every ``manage.py`` command stays quiet and fast with Redis down;
        # each worker stores the loops it remembers when it boots.
        return loop
    try:
        _persist(loop)
    except Exception as exc:  # no Redis yet: the worker stores it at boot
        logger.warning("periodic: could not store loop %s (%s) now; workers store it when they boot", loop.lid, exc)
    return loop


def unregister(lid: str) -> None:
    """Remove a loop (``SREM periodic``, delete its hash and history) and forget it here."""
    with _code_lock:
        _code.pop(lid, None)
    loops.unregister(lid)


def code_registrations() -> list[tuple[str, str, Any, dict[str, Any]]]:
    with _code_lock:
        return list(_code.values())


def forget_code_registrations() -> None:
    """Drop what ``register`` remembered (tests)."""
    with _code_lock:
        _code.clear()


def configure(block: Callable[[Manager], Any], redis: Any = None) -> Manager:
    """Run a registration block: ``configure(lambda mgr: mgr.register(...))``, then prune."""
    manager = Manager(redis)
    block(manager)
    manager.prune()
    return manager


def verify(block: Callable[[Manager], Any], redis: Any = None) -> list[Loop]:
    """Run a registration block as a dry run that must succeed: every schedule parses and
    every class resolves. On an error, whatever the block stored is removed again and the
    error is raised; on success the loops stay registered (no pruning)."""
    manager = Manager(redis)
    try:
        block(manager)
    except Exception:
        for lid in list(manager.written):
            manager.unregister(lid)
        raise
    return list(manager.written.values())


def boot(entries: Any, redis: Any = None) -> Manager:
    """Register ``WURK["PERIODIC"]`` and the code registrations as one block, then prune.

    A bad entry is logged and skipped: it must not keep the worker (and every
    other loop) from starting. ``manage.py check`` reports it beforehand.
    """
    manager = Manager(redis)
    for index, entry in enumerate(entries or []):
        try:
            loop = entry_loop(entry)
            resolve_job(loop.klass)
        except ValueError as exc:
            logger.error("periodic: WURK['PERIODIC'] entry %d skipped: %s", index, exc)
            continue
        manager.add(loop)
    for cron, job, tz, options in code_registrations():
        try:
            loop = build_loop(cron, job, tz, options)
            resolve_job(loop.klass)
        except ValueError as exc:
            logger.error("periodic: registration of %s skipped: %s", job, exc)
            continue
        manager.add(loop)
    manager.prune()
    if manager.written:
        logger.info("periodic: %d loop(s) registered", len(manager.written))
    return manager
