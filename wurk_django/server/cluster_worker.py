"""The worker process on a Redis Cluster (issue 46 stage 3).

``manage.py wurk`` pointed at a cluster node builds this instead of the
:class:`~wurk_django.server.launcher.Launcher` (after :mod:`.cluster_boot` found no
feature switched on that is not converted): the same processors, settle
and retry code, with

* one manager per capsule (``CAPSULES``, issue 46 item 3), each with the per-queue
  reliable fetch of :mod:`.fetch.cluster` (private lists in each queue's slot): several
  jobs a round trip for a thread running short jobs, their ACKs parked and sent together
  with that thread's next fetch, and the requeue; with ``QUEUE_LIMITS`` its variant
  taking a capped queue's slot in the queue's hash slot, one job a fetch
  (:mod:`wurk_django.queue_limits.cluster`);
* ``--max-jobs`` as the launcher does it, and ``--burst`` through ``manage.py wurk``'s
  supervision (:func:`.burst.drained` reads each queue through this worker's client);
  a swarm child runs this worker too (:mod:`.child`);
* the process's ``RedisCluster`` as every job's Redis (``ctx.redis``);
* the live revoke markers ``{wurk}:revoked`` read at each beat (issue 46 item 3), so a
  job revoked while in flight is recorded as revoked instead of run, as on one server;
  and a revoke's command to stop a running job (``terminate=True``), popped from the
  process's signals list at each beat;
* a heartbeat (:mod:`.cluster_heartbeat`) every :data:`BEAT_INTERVAL` seconds: the
  process hash ``{p:<identity>}``, the process set ``{wurk}:processes``, the stat
  counters under ``{stats}``;
* the scheduler's per-queue promotion (``Scheduler.enqueue_due``, stage 2) every
  ``POLL_INTERVAL_AVERAGE`` (or ``AVERAGE_SCHEDULED_POLL_INTERVAL``) seconds, with jitter;
* the reaper's recovery of dead processes' private lists (:mod:`.cluster_reaper`) at
  boot and every ``SUPER_FETCH_REAPER_INTERVAL`` seconds;
* the features' background components registered with ``cluster=True``
  (:func:`~wurk_django.server.launcher.register_component`: leader election, the
  periodic poller; issue 46 item 3), built once the processors fetch, started after
  the loops above, stopped in reverse order before them, as the launcher does. A
  component registered without it is never built here: its feature either is refused
  at boot (:mod:`.cluster_boot`) or has no background part on a cluster yet.
* the health listener (``HEALTH_PORT``), started last, stopped first.

The one-server launcher is untouched: nothing here is imported outside a cluster.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import threading
import time
from typing import Any

import orjson

from .. import __version__
from ..conf import Config
from ..conf.capsules import describe
from ..metrics.tracker import MetricsTracker
from ..redis.cluster_layout import CLUSTER
from ..redis.connection import cluster_for
from . import cluster_heartbeat, cluster_reaper, launcher, pidspace
from .capsules import capsule_config, plan
from .fetch.cluster import ClusterFetch
from .heartbeat import SIGNALS
from .launcher import dump_threads
from .run.manager import Manager, drain_all
from .scheduler import Scheduler
from .state import WorkerState, hostname
from .stop_once import StopOnce
from .stopping import revocations
from .threads import spawn
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")

BEAT_INTERVAL = 10.0

def _fetch_class(config: Config) -> Any:
    """The fetcher of every capsule: the cluster's reliable fetch, or its queue-limits
    variant when ``QUEUE_LIMITS`` caps a queue (:mod:`wurk_django.queue_limits.cluster`)."""
    if config.queue_limits:
        from ..queue_limits.cluster import CappedClusterFetch

        return CappedClusterFetch
    return ClusterFetch


class ClusterManager(Manager):
    """A :class:`Manager` whose processors use the cluster client as every job's Redis."""

    cluster: Any = None

    def redis(self) -> Any:
        return self.cluster


class _Listing:
    """What ``manage.py wurk`` waits on before it tells systemd the worker is ready."""

    def __init__(self) -> None:
        self.listed = threading.Event()


class ClusterWorker:
    """One worker process on a Redis Cluster; the interface ``manage.py wurk`` supervises
    (``run``, ``quiet``, ``stop``, ``hard_shutdown``, ``deregister_now``, ``stopped``)."""

    def __init__(self, config: Config, client: Any = None, on_signal: Any = None) -> None:
        self.config = config
        #: What a dashboard signal does (``manage.py wurk`` passes its own: a TERM from the
        #: Busy page then stops the process as an OS signal would).
        self.on_signal = on_signal or self._dashboard_signal
        self.client = client if client is not None else cluster_for(config)
        if self.client is None:
            raise RuntimeError("ClusterWorker needs a Redis Cluster")
        self.embedded = False
        self.state = WorkerState()
        self.started_at = time.time()
        self.metrics = MetricsTracker(config)
        # One manager per capsule (CORE-100), as the launcher runs them: a capsule's private
        # lists are in its own queues' slots (a queue is in one capsule only), so capsules
        # never share a list, and the reaper needs no per-capsule numbering here.
        self.capsules = plan(config)
        self.concurrency = sum(capsule.concurrency for capsule in self.capsules)
        fetch_class = _fetch_class(config)
        self.managers: list[ClusterManager] = []
        for index, capsule in enumerate(self.capsules):
            fetching = copy.copy(capsule_config(config, self.capsules, index) if len(self.capsules) > 1 else config)
            fetching.fetch_class = fetch_class
            manager = ClusterManager(fetching, self.state, self.metrics, name=capsule.name)
            manager.cluster = self.client  # before start(): each processor asks it once
            self.managers.append(manager)
        self.manager = self.managers[0]
        if config.max_jobs:
            self.state.max_jobs = config.max_jobs
            self.state.on_max_jobs = self._recycle
        self.scheduler = Scheduler(config)
        self._rng = random.Random()
        self.scheduler_loop = TimerLoop("scheduler", self._promote, self._poll_interval,
                                        first_wait=self._rng.random())
        self.heartbeat = _Listing()
        self.heartbeat_loop = TimerLoop("heartbeat", self.beat, lambda: BEAT_INTERVAL)
        self.reaper_loop = TimerLoop("reaper", self.reap, lambda: float(config.reaper_interval),
                                     first_wait=float(config.reaper_interval))
        self.metrics_loop = TimerLoop("metrics-flush", self._flush_metrics, lambda: 30.0, first_wait=30.0)
        # Built in run(), once the processors are fetching (as the launcher does).
        self.components: list[tuple[str, launcher.Component]] = []
        self.health = None
        if config.health_port:
            from .health import HealthListener

            # Its readiness pings the node of REDIS_URL (PING needs no slot) and reads this
            # worker's state: the same checks as on one server.
            self.health = HealthListener(self, config.health_port, config.health_bind)
        self.quieting = False
        self.stopped = threading.Event()
        self._stop_once = StopOnce()

    def _build_components(self) -> list[tuple[str, launcher.Component]]:
        from .. import features

        features.install(features.SERVER)
        built = []
        for name, factory in launcher.registered(cluster=True):
            component = factory(self)
            if component is not None:
                built.append((name, component))
        return built

    def component(self, name: str) -> launcher.Component | None:
        """The running component registered as ``name``, if this process has it."""
        return next((c for n, c in self.components if n == name), None)

    @property
    def queue_names(self) -> list[str]:
        """Every queue this process serves, capsule by capsule."""
        return [name for manager in self.managers for name in manager.fetcher.order.names]

    @property
    def stopping(self) -> bool:
        return self._stop_once.started

    def _poll_interval(self) -> float:
        average = self.config.poll_interval_average or self.config.average_scheduled_poll_interval
        return float(average) * (0.5 + self._rng.random())

    def _promote(self) -> None:
        self.scheduler.enqueue_due()

    def _flush_metrics(self) -> None:
        self.metrics.flush(self.client)

    def info(self) -> bytes:
        return orjson.dumps({
            "hostname": hostname(), "started_at": self.started_at, "pid": os.getpid(),
            "tag": self.config.tag or "", "concurrency": self.concurrency,
            # One entry per capsule, as the one-server heartbeat writes them (CORE-076).
            "capsules": {manager.name: {"concurrency": manager.config.concurrency,
                                        "mode": manager.fetcher.order.mode,
                                        "weights": manager.fetcher.order.weights()}
                         for manager in self.managers},
            "queues": self.queue_names, "labels": self.config.labels,
            "identity": self.state.identity, "version": __version__, "embedded": False,
            "runtime": "python", "cluster": True,
            # A worker restarted on this host judges by them that this one is gone (cluster_reaper).
            **pidspace.record(),
        })

    def beat(self) -> None:
        # The live revoke markers first (issue 46 item 3; stopping/revocations.py): a processor
        # checks each job against them, so once this process is listed it knows them.
        read_at = time.monotonic()
        revocations.load(self.client.zrangebyscore(CLUSTER.revoked, time.time(), "+inf"), read_at)
        processed, failed = self.state.take_counts()
        work = self.state.work_snapshot()
        # Counters taken before the write, not restored if it fails (CORE-152, as on one server).
        signals = cluster_heartbeat.beat(self.client, self.state.identity, {
            "info": self.info(), "concurrency": self.concurrency, "busy": len(work),
            "quiet": "true" if self.quieting else "false",
        }, work, {"processed": processed, "failed": failed})
        self.heartbeat.listed.set()
        for name in signals:
            if name in SIGNALS:
                self.on_signal(name)
            elif name.startswith(revocations.COMMAND):
                # revoke(..., terminate=True): stop the job if one of this process's threads runs it.
                revocations.command(name, self.config)
            else:
                logger.warning("ignoring unknown signal %r from the dashboard", name)

    def _dashboard_signal(self, name: str) -> None:
        """Off the heartbeat thread, as the launcher does (RUN-304)."""
        if name == "TSTP":
            spawn("dashboard-quiet", self.quiet)
        elif name == "TERM":
            spawn("dashboard-stop", self.stop)
        elif name == "TTIN":
            dump_threads()

    def reap(self) -> None:
        cluster_reaper.recover(self.client, self.state.identity)
        cluster_reaper.prune_processes(self.client)

    def run(self) -> None:
        # Recovery first, before this process fetches: a restarted worker's jobs go back
        # onto their queues and are fetched again (by it or by any other).
        try:
            self.reap()
        except Exception:
            logger.exception("recovering dead processes' jobs failed; the reaper tries again later")
        self.heartbeat_loop.start()
        for manager in self.managers:
            manager.start()
        self.scheduler_loop.start()
        self.reaper_loop.start()
        self.metrics_loop.start()
        try:
            self.components = self._build_components()
            for _name, component in self.components:
                component.start()
            if self.health is not None:
                self.health.start()  # last: ready only once everything above runs (RUN-110)
        except BaseException:
            logger.error("the worker failed to start its components; stopping what had started")
            try:
                self.stop(timeout=0)
            except Exception:
                logger.exception("stopping the half-started worker failed")
            raise
        if len(self.managers) == 1:
            logger.info("wurk_django worker %s started on a Redis Cluster: %d threads on %s", self.state.identity,
                        self.concurrency, ", ".join(self.queue_names))
        else:
            logger.info("wurk_django worker %s started on a Redis Cluster: %d threads in %d capsules: %s",
                        self.state.identity, self.concurrency, len(self.managers), describe(self.capsules))

    def quiet(self) -> None:
        if self.quieting:
            return
        self.quieting = True
        logger.info("quieting: no new jobs will be fetched")
        for manager in self.managers:
            manager.quiet()
        self.scheduler_loop.terminate()
        for name, component in self.components:
            quiet = getattr(component, "quiet", None)
            if quiet is not None:
                try:
                    quiet()
                except Exception:
                    logger.exception("quieting component %s failed", name)
        self.heartbeat_loop.wake()

    def stop(self, timeout: float | None = None) -> None:
        deadline = self._stop_once.begin(self.config, timeout)
        if deadline is None:
            return  # a stop has begun already
        try:
            self.quiet()
            self._drain(deadline)
        finally:
            # The health listener first (not ready any more), then the components in
            # reverse start order (the periodic poller before the leader releases its
            # lock), while the heartbeat still lists this process.
            stoppers = [(name, component.stop) for name, component in reversed(self.components)]
            if self.health is not None:
                stoppers.insert(0, ("health", self.health.stop))
            for name, stop in stoppers:
                try:
                    stop()
                except Exception:
                    logger.exception("stopping component %s failed", name)
            for loop in (self.scheduler_loop, self.reaper_loop, self.metrics_loop, self.heartbeat_loop):
                try:
                    loop.terminate()
                    loop.join(timeout=5.0)
                except Exception:
                    logger.exception("stopping %s failed", loop.name)
            for step in (self._flush_metrics, self._final_beat, self._deregister):
                try:
                    step()
                except Exception:
                    logger.exception("shutdown step %s failed", step.__name__)
            logger.info("worker %s stopped", self.state.identity)
            self.stopped.set()

    def _final_beat(self) -> None:
        self.beat()

    def _deregister(self) -> None:
        cluster_heartbeat.deregister(self.client, self.state.identity)

    def _drain(self, deadline: float) -> None:
        drain_all(self.managers, deadline, self.config)

    def _recycle(self) -> None:
        """``--max-jobs`` reached: stop fetching now, then stop as if told to (TERM), as the
        launcher does; a swarm child is then replaced by its supervisor."""
        logger.info("started %d jobs (--max-jobs): finishing the running ones and exiting", self.state.max_jobs)
        spawn("max-jobs-quiet", self.quiet)
        self.on_signal("TERM")

    def hard_shutdown(self) -> None:
        for manager in self.managers:
            manager.hard_shutdown([p for p in manager.alive_processors() if p.unit is not None])

    def deregister_now(self, budget: float = 2.0) -> bool:
        self.heartbeat_loop.terminate()
        try:
            self._deregister()
        except Exception as exc:
            logger.warning("could not remove this process from the process list: %s", exc)
            return False
        return True
