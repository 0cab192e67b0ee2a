"""Launcher: starts and stops every component of a worker process (RUN-110, RUN-111).

Start order: managers, one per capsule (the only step on the way to the first job), then the
features' components are built, then heartbeat (beats at once), reaper,
scheduled poller (first tick after a wait) and the components start. Stop: quiet,
drain every manager against one deadline, in parallel, then tear down in reverse, each
step guarded on its own so one failure cannot strand the rest.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

from .. import signals
from ..client import push_spool
from ..conf import Config
from ..conf.capsules import describe
from ..metrics.tracker import FLUSH_INTERVAL, MetricsTracker
from ..redis import wire
from . import events
from .capsules import capsule_config, plan
from .heartbeat import BEAT_INTERVAL, Heartbeat, flush_stats
from .reaper import Reaper
from .run.manager import Manager, drain_all
from .scheduler import Scheduler
from .state import EXPIRED, WorkerState
from .stop_once import StopOnce
from .stopping.revoke_channel import RevokeChannel
from .threads import spawn
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")


class Component(Protocol):
    """A background part of a worker process that a feature adds (the leader, the
    periodic poller...). ``start()`` must return at once (spawn a thread or a
    :class:`TimerLoop`) and must not tick at t=0; ``stop()`` must return within a
    few seconds. ``quiet()``, if present, is called when the worker stops fetching."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


ComponentFactory = Callable[["Launcher"], "Component | None"]
_components: dict[str, tuple[int, ComponentFactory]] = {}
#: Components whose feature runs on a Redis Cluster too (issue 46 item 3): the cluster
#: worker (:mod:`.cluster_worker`) builds these, and only these.
_on_cluster: set[str] = set()


def register_component(name: str, factory: ComponentFactory, *, position: int, cluster: bool = False) -> None:
    """Add (or replace) a component every :class:`Launcher` builds with ``factory(launcher)``.

    Components start after the built-in ones, lowest position first, and stop
    in reverse order before the reaper and the heartbeat stop. A factory returns
    ``None`` when its feature is off for this process.

    ``cluster=True`` says the feature works on a Redis Cluster (its keys go through
    the cluster layout): the worker on a cluster builds it too, with ``factory(worker)``
    where ``worker`` has the launcher's ``config``, ``state``, ``managers``,
    ``queue_names`` and ``component()``. Left False, the cluster worker never builds it.
    """
    _components[name] = (position, factory)
    if cluster:
        _on_cluster.add(name)
    else:
        _on_cluster.discard(name)


def unregister_component(name: str) -> None:
    _components.pop(name, None)
    _on_cluster.discard(name)


def registered(*, cluster: bool = False) -> list[tuple[str, ComponentFactory]]:
    """``(name, factory)`` of the registered components, lowest position first; only those
    registered with ``cluster=True`` when ``cluster``."""
    ordered = sorted(_components.items(), key=lambda item: item[1][0])
    return [(name, factory) for name, (_pos, factory) in ordered if not cluster or name in _on_cluster]


class Launcher:
    def __init__(self, config: Config, *, embedded: bool = False,
                 request_shutdown: Callable[[], None] | None = None,
                 on_signal: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.embedded = embedded
        self.state = WorkerState()
        # stat:expired: the expiry feature reports each skip by signal (one receiver a process).
        signals.job_expired.connect(EXPIRED.add, weak=False, dispatch_uid="wurk_stat_expired")
        self.started_at = time.time()
        self.metrics = MetricsTracker(config)
        self.metrics_loop = TimerLoop("metrics-flush", self.metrics.flush, lambda: FLUSH_INTERVAL,
                                      first_wait=FLUSH_INTERVAL)
        # Pushes that exited processes saved to the push spool: at boot, then once a minute.
        self.spool_loop = TimerLoop("push-spool", lambda: push_spool.resume_all(config),
                                    lambda: push_spool.SCAN_INTERVAL)
        # One manager per capsule (CORE-100): the default capsule's first, with the config
        # itself when it is the only one, so a process without capsules runs as it always did.
        self.capsules = plan(config)
        self.concurrency = sum(capsule.concurrency for capsule in self.capsules)
        self.managers = [
            Manager(capsule_config(config, self.capsules, index) if len(self.capsules) > 1 else config,
                    self.state, self.metrics, name=capsule.name, request_shutdown=request_shutdown)
            for index, capsule in enumerate(self.capsules)]
        self.manager = self.managers[0]
        self.scheduler = Scheduler(config)
        self._on_signal = on_signal or self._dashboard_signal
        self.heartbeat = Heartbeat(self, self._on_signal)
        self.heartbeat_loop = TimerLoop("heartbeat", self.heartbeat.beat, lambda: BEAT_INTERVAL)
        # Revokes heard at once on the subscribed connection; the beat reads them too (the fallback).
        self.revoke_channel = RevokeChannel(config, self.heartbeat_loop.wake)
        # Only a fetcher with private lists leaves anything to reap.
        # It sweeps the queues of every capsule at boot (PRO-138).
        self.reaper = (Reaper(self.queue_names, config.reaper_interval, config.reaper_orphan_grace, config=config)
                       if any(hasattr(m.fetcher, "private_lists") for m in self.managers) else None)
        # Built in run(), once the processors are fetching: a feature's component (the
        # leader, the periodic poller, the rollups) and the modules it loads never
        # stand between a booting worker and its first job.
        self.components: list[tuple[str, Component]] = []
        if config.max_jobs and not embedded:  # a web server's workers are recycled by the web server
            self.state.max_jobs = config.max_jobs
            self.state.on_max_jobs = self._recycle
        self.health = None
        if config.health_port and not embedded:
            from .health import HealthListener

            self.health = HealthListener(self, config.health_port, config.health_bind)
        self.quieting = False
        self.stopped = threading.Event()
        self._stop_once = StopOnce()

    def _build_components(self) -> list[tuple[str, Component]]:
        # Lazy: features.install() imports the feature packages, whose install() imports
        # this module to register here; and it must run at first use, not at import.
        from .. import features

        features.install(features.SERVER)
        built = []
        for name, factory in registered():
            component = factory(self)
            if component is not None:
                built.append((name, component))
        return built

    @property
    def queue_names(self) -> list[str]:
        """Every queue this process serves, capsule by capsule."""
        return [name for manager in self.managers for name in manager.fetcher.order.names]

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` has begun (it may still be draining)."""
        return self._stop_once.started

    def component(self, name: str) -> Component | None:
        """The running component registered as ``name``, if this process has it."""
        return next((c for n, c in self.components if n == name), None)

    def run(self) -> None:
        """Start every component. A ``worker_startup`` receiver that raises stops the boot
        before anything starts (:class:`StartupError`); a failure past that point stops
        what did start, deregisters this process, and re-raises (RUN-110, CORE-154)."""
        # Processor threads hand the GIL to each other: a push from this process sleeps
        # for its reply instead of polling for it (wire.spin_off says why).
        wire.spin_off()
        events.fire("startup", self)
        try:
            for manager in self.managers:
                manager.start()
            # Built here, once the processors are fetching, so that a feature's modules
            # never stand between a booting worker and its first job.
            self.components = self._build_components()
            self.heartbeat_loop.start()
            if self.reaper is not None:
                self.reaper.start()
            self.scheduler.start()
            self.revoke_channel.start()
            for _name, component in self.components:
                component.start()
            self.metrics_loop.start()
            if push_spool.directory(self.config) is not None:
                self.spool_loop.start()
            if self.health is not None:
                self.health.start()  # last: ready only once everything above runs (RUN-110)
        except BaseException:
            # Half-started: without this the heartbeat already running would keep the
            # process listed (and beating) while the caller unwinds.
            logger.error("the worker failed to start; stopping what had started")
            try:
                self.stop(timeout=0)
            except Exception:
                logger.exception("stopping the half-started worker failed")
            raise
        if len(self.managers) == 1:
            logger.info("wurk_django worker %s started: %d threads on %s", self.state.identity,
                        self.concurrency, ", ".join(self.queue_names))
        else:
            logger.info("wurk_django worker %s started: %d threads in %d capsules: %s", self.state.identity,
                        self.concurrency, len(self.managers), describe(self.capsules))

    def quiet(self) -> None:
        """Stop taking new jobs; running ones finish. There is no way back to fetching: a
        quiet process only stops (CORE-156)."""
        if self.quieting:
            return
        self.quieting = True
        logger.info("quieting: no new jobs will be fetched")
        for manager in self.managers:
            manager.quiet()
        self.scheduler.terminate()
        for name, component in self.components:
            quiet = getattr(component, "quiet", None)
            if quiet is not None:
                try:
                    quiet()
                except Exception:
                    logger.exception("quieting component %s failed", name)
        events.fire("quiet", self)
        # Beat now: the process list shows "quiet" at once, not a beat later, so
        # `wurk_quiet --wait` and the dashboard see it as soon as it is true.
        self.heartbeat_loop.wake()

    def stop(self, timeout: float | None = None) -> None:
        """Drain within ``timeout`` (default: the configured one), requeue what is left, deregister (CORE-157).

        A host that embeds the worker passes its own, shorter budget (DJ-062).
        """
        deadline = self._stop_once.begin(self.config, timeout)
        if deadline is None:
            return  # a stop has begun already
        try:
            self.quiet()
            events.fire("shutdown", self)
            self._drain(deadline)
        finally:
            self._teardown()

    def _drain(self, deadline: float) -> None:
        drain_all(self.managers, deadline, self.config)

    def hard_shutdown(self) -> None:
        """Requeue every capsule's running jobs now and interrupt their threads (a second
        TERM while stopping)."""
        for manager in self.managers:
            manager.hard_shutdown([p for p in manager.alive_processors() if p.unit is not None])

    def _teardown(self) -> None:
        # The metrics flusher first (its last flush may feed a rollup component), then the
        # components in reverse start order (periodic loops before the leader lock goes).
        steps = [self.scheduler.loop.join, self.spool_loop.stop, self.metrics_loop.stop, self.metrics.flush,
                 *[component.stop for _name, component in reversed(self.components)],
                 self._stop_reaper, self.revoke_channel.stop, self._stop_heartbeat, self._final_flush, self.heartbeat.clear]
        for step in steps:
            try:
                step()
            except Exception:
                logger.exception("shutdown step %s failed", getattr(step, "__name__", step))
        # Logged before `stopped` is set: the main thread (or a swarm child's os._exit)
        # ends the process as soon as it sees it, and this line would be lost.
        logger.info("worker %s stopped", self.state.identity)
        # Before `stopped` too: a standalone worker's main thread returns once it is set.
        events.fire("exit", self)
        self.stopped.set()
        if self.health is not None:
            try:
                self.health.stop()
            except Exception:
                logger.exception("closing the health listener failed")

    def deregister_now(self, budget: float = 2.0) -> bool:
        """Hard exit path: remove this process's entry from ``processes`` within ``budget``
        seconds, best effort, so the dashboard does not list a dead worker until pruning.

        The heartbeat loop is stopped first (a beat landing afterwards would bring the
        entry back); a beat stuck on Redis is not waited for past the budget.
        """
        deadline = time.monotonic() + budget
        self.heartbeat_loop.terminate()
        self.heartbeat_loop.join(timeout=max(deadline - time.monotonic(), 0) / 2)
        done = threading.Event()

        def clear() -> None:
            try:
                self.heartbeat.clear()
                done.set()
            except Exception as exc:
                logger.warning("could not remove this process from the process list: %s", exc)

        thread = threading.Thread(target=clear, name="deregister", daemon=True)
        thread.start()
        thread.join(max(deadline - time.monotonic(), 0))
        return done.is_set()

    def _recycle(self) -> None:
        """``--max-jobs`` reached: stop fetching now, then stop as if told to (TERM).
        Standalone exits 0 so its supervisor starts a fresh one; a swarm child is replaced."""
        logger.info("started %d jobs (--max-jobs): finishing the running ones and exiting", self.state.max_jobs)
        spawn("max-jobs-quiet", self.quiet)
        self._on_signal("TERM")

    def _stop_reaper(self) -> None:
        if self.reaper is not None:
            self.reaper.stop()

    def _stop_heartbeat(self) -> None:
        # Unbounded on purpose: a beat landing after deregistration would bring the
        # entry back for 60 s. The beat's own calls are bounded by socket timeouts.
        self.heartbeat_loop.terminate()
        self.heartbeat_loop.join(timeout=None)

    def _final_flush(self) -> None:
        flush_stats(self.state, self.config)

    def _dashboard_signal(self, name: str) -> None:
        """Embedded mode applies dashboard signals itself, off the heartbeat thread (RUN-304)."""
        if name == "TSTP":
            spawn("dashboard-quiet", self.quiet)
        elif name == "TERM":
            spawn("dashboard-stop", self.stop)
        elif name == "TTIN":
            dump_threads()


def dump_threads() -> None:
    """Log every thread's name and stack at WARNING, one record per thread (CORE-159, RUN-821).

    Through the logger, so the dump lands wherever the worker's log goes (a file, a
    log collector); faulthandler writes the same to stderr too, as it needs no lock
    and still works when a wedged thread holds the logging lock.
    """
    frames = sys._current_frames()
    threads = {thread.ident: thread for thread in threading.enumerate()}
    logger.warning("thread dump (TTIN): %d threads", len(frames))
    for ident, frame in frames.items():
        thread = threads.get(ident)
        name = thread.name if thread is not None else "?"
        stack = "".join(traceback.format_stack(frame)).rstrip()
        logger.warning("thread %s (%s, tid %s)\n%s", name, ident, thread and thread.native_id, stack)
    del frames
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
