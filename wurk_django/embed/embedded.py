"""Embedded mode: a small wurk worker on threads inside a web server process (DJ-061..DJ-065, RUN-501..504).

It is the same :class:`~wurk_django.server.launcher.Launcher` that
``manage.py wurk`` runs, built with ``embedded=True``: ``EMBEDDED_CONCURRENCY``
processor threads (2 by default), a heartbeat that says ``"embedded": true``,
and no signal handlers — the web server owns the process's signals and calls
:func:`stop` from its own shutdown path.

A boot that fails (Redis down, say) is logged and retried on a background
thread while the site keeps serving. At most one embedded worker runs per
process: :func:`start` is idempotent per pid, so every entry point may call it.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import Any

import redis as redis_lib

from .. import context
from ..conf import Config
from ..errors import ConfigurationError, RedisVersionError
from ..redis import connection, scripts
from ..server.threads import spawn

logger = logging.getLogger("wurk_django.embedded")


def ensure_log_output(config: Any) -> bool:
    """Give wurk's loggers a stderr handler when the host process left them with none.

    A web server (gunicorn, uwsgi) usually configures only its own loggers; wurk's
    INFO lines (boot, each job's start/done/fail) would then go nowhere, and the
    silence would read as "no jobs ran". A project that configured ``wurk_django``
    (a handler, or a level on it or on ``wurk_django.job``) or whose root logger
    already takes INFO is left as it is. True when a handler was added.
    """
    from ..server.run.joblog import JSONFormatter, PlainFormatter

    root = logging.getLogger("wurk_django")
    if root.handlers or root.level != logging.NOTSET or logging.getLogger("wurk_django.job").level != logging.NOTSET:
        return False
    ancestor = logging.getLogger()
    if ancestor.handlers and ancestor.isEnabledFor(logging.INFO):
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if config.log_format == "json" else PlainFormatter())
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if config.verbose else logging.INFO)
    root.propagate = False
    return True

#: Backoff between boot attempts while Redis is unreachable.
FIRST_RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 30.0
#: What a stop waits for a drain that another thread already runs, on top of its budget:
#: the 3 s hard-shutdown unwind plus the launcher's bounded joins.
STOP_WAIT_SLACK = 10.0


class _Embedded:
    """The embedded worker of one process: its launcher, once booted, and its boot retries."""

    def __init__(self, concurrency: int | None, drain_timeout: float | None) -> None:
        self.pid = os.getpid()
        self.concurrency = concurrency
        self.drain_timeout = drain_timeout
        self.launcher = None
        self.cancelled = threading.Event()
        # Held while booting and while stopping, so a stop never races a half-built launcher.
        self.lock = threading.Lock()
        self.retry_thread: threading.Thread | None = None
        self.stopper: threading.Thread | None = None
        self.stopper_lock = threading.Lock()
        self.discovered = False

    def _config(self):
        concurrency = self.concurrency or context.config().embedded_concurrency
        return Config(CONCURRENCY=concurrency)

    def boot(self) -> bool:
        """One attempt: True when running; a failure is logged and the partial boot undone (RUN-503)."""
        with self.lock:
            if self.cancelled.is_set():
                return False
            if self.launcher is not None:
                return True
            # Lazy: the worker engine is loaded only by a web process that runs it;
            # every web process imports this module through the gunicorn/ASGI hooks.
            from ..server.launcher import Launcher

            launcher = None
            try:
                config = self._config()
                if not self.discovered:
                    from django.utils.module_loading import autodiscover_modules

                    for module in config.autodiscover:
                        autodiscover_modules(module)
                    self.discovered = True
                version = connection.check_server(connection.get_redis(config=config), config)
                scripts.preload(connection.get_redis(config=config))  # every Lua script, at boot (PRO-004)
                ensure_log_output(config)
                launcher = Launcher(config, embedded=True, request_shutdown=self.stop_in_background,
                                    on_signal=self._dashboard_signal)
                # Kept before run(): run() brings threads up one by one, and a raise
                # half-way must still leave them reachable for the drain.
                self.launcher = launcher
                launcher.run()
            except Exception as exc:
                self.launcher = None
                if launcher is not None:
                    _guarded_stop(launcher, 0)
                if isinstance(exc, (ConfigurationError, RedisVersionError)):
                    # Retrying cannot fix settings or the server's version.
                    self.cancelled.set()
                    logger.error("wurk: embedded boot failed, not retrying: %s", exc)
                elif isinstance(exc, redis_lib.RedisError):
                    logger.error("wurk: embedded boot failed (Redis %s: %s); the site keeps serving, retrying",
                                 type(exc).__name__, exc)
                else:
                    logger.exception("wurk: embedded boot failed; the site keeps serving, retrying")
                return False
            from ..conf.capsules import describe

            logger.info("wurk: running embedded in the web process (pid %s): %d job threads on %s, Redis %s",
                        self.pid, launcher.concurrency,
                        ", ".join(config.queue_names) if len(launcher.capsules) == 1 else describe(launcher.capsules),
                        version)
            return True

    def retry_in_background(self) -> None:
        if self.cancelled.is_set():
            return
        self.retry_thread = spawn("wurk-embedded-boot", self._retry_loop)

    def _retry_loop(self) -> None:
        delay = FIRST_RETRY_DELAY
        while not self.cancelled.wait(delay):
            if self.boot():
                return
            delay = min(delay * 2, MAX_RETRY_DELAY)

    def stop(self, timeout: float | None) -> None:
        self.cancelled.set()
        with self.lock:
            launcher = self.launcher
            if launcher is not None:
                budget = timeout if timeout is not None else self.drain_timeout
                if budget is None:
                    budget = launcher.config.timeout
                launcher.stop(timeout=budget)
                # Returns at once when another thread (a dashboard TERM) runs the drain: wait for it.
                if not launcher.stopped.wait(budget + STOP_WAIT_SLACK):
                    logger.warning("wurk: embedded worker did not finish stopping")
            # Fresh pools for the web code that carries on; no socket of the worker lingers (RUN-504).
            connection.reset()

    def stop_in_background(self) -> None:
        """Internal shutdown requests stop on one retained thread, never on the caller's (RUN-504)."""
        with self.stopper_lock:
            if self.stopper is None:
                self.stopper = spawn("wurk-embedded-stop", lambda: self.stop(None))

    def _dashboard_signal(self, name: str) -> None:
        from ..server.launcher import dump_threads  # lazy: as in _boot, the engine only when used

        # The web server owns the process's signals, so dashboard signals are applied here (RUN-304).
        if name == "TERM":
            self.stop_in_background()
        elif name == "TSTP" and self.launcher is not None:
            spawn("wurk-embedded-quiet", self.launcher.quiet)
        elif name == "TTIN":
            dump_threads()


def _guarded_stop(launcher, timeout: float) -> None:
    try:
        launcher.stop(timeout=timeout)
    except Exception:
        logger.exception("wurk: could not stop a partly booted embedded worker")


_lock = threading.Lock()
_instance: _Embedded | None = None
_atexit_pid: int | None = None


def _reinit_after_fork() -> None:
    # Another thread may have held the lock at fork time; the child must not inherit it locked.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reinit_after_fork)


def _current() -> _Embedded | None:
    instance = _instance
    return instance if instance is not None and instance.pid == os.getpid() else None


def attempted() -> bool:
    """Whether :func:`start` already ran in this process (successfully or not, stopped since or not)."""
    return _current() is not None


def running() -> bool:
    """Whether an embedded worker is running in this process right now."""
    instance = _current()
    launcher = instance.launcher if instance is not None else None
    return launcher is not None and not launcher.stopped.is_set()


def launcher():
    """This process's embedded :class:`~wurk_django.server.launcher.Launcher`, or None."""
    instance = _current()
    return instance.launcher if instance is not None else None


def start(*, concurrency: int | None = None, drain_timeout: float | None = None, source: str = "start()") -> bool:
    """Start the embedded worker in this process, once; True when it runs.

    Call it after the app registry is ready, in the process that serves (after
    any fork). ``concurrency`` defaults to ``WURK["EMBEDDED_CONCURRENCY"]``;
    ``drain_timeout`` is what :func:`stop` allows running jobs by default
    (``WURK["TIMEOUT"]`` when None). When Redis cannot be reached the failure is
    logged, False is returned, and the boot is retried in the background.
    """
    global _instance, _atexit_pid
    with _lock:
        instance = _current()
        if instance is not None and not instance.cancelled.is_set():
            return instance.launcher is not None
        # First start in this process, or a start after stop(): a new worker with fresh pools.
        instance = _instance = _Embedded(concurrency, drain_timeout)
        if _atexit_pid != os.getpid():
            # Registered before the boot: a partial boot must still be drained at exit (RUN-503).
            atexit.register(_stop_at_exit)
            _atexit_pid = os.getpid()
    logger.debug("wurk: starting embedded worker from %s", source)
    if instance.boot():
        return True
    instance.retry_in_background()
    return False


def stop(timeout: float | None = None) -> None:
    """Quiet, drain within ``timeout`` seconds, requeue what is left, deregister and disconnect (RUN-504).

    ``timeout`` defaults to the ``drain_timeout`` given to :func:`start`, else
    ``WURK["TIMEOUT"]``; 0 requeues running jobs at once. A pending boot retry
    is cancelled. Does nothing in a process where :func:`start` never ran, and
    returns once the worker has stopped when called again or concurrently.
    """
    instance = _current()
    if instance is not None:
        instance.stop(timeout)


def _stop_at_exit() -> None:
    # Forked children inherit atexit hooks; only the process that started may drain.
    if _atexit_pid == os.getpid():
        stop()
