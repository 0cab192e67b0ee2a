"""The swarm supervisor's state machine: fork, reap, respawn, signal, drain (ENT-701..713, RUN-402..410).

The supervisor runs no Launcher and fetches nothing. Its loop ticks every
0.2 s and never sleeps for a backoff or a restart phase:

1. act on signals (a self-pipe: handlers only write a byte);
2. shut down if asked;
3. reap each *known* pid with ``waitpid(pid, WNOHANG)``, never ``-1``;
4. respawn crashed slots whose backoff is due (1 s doubling to 30 s, reset
   after 60 s alive);
5. advance the rolling restart, one phase per tick (USR1, memory recycling);
6. every 10 s, compare each child's RSS with ``MEMORY_LIMIT_MB``;
7. every 5 s, check each child's heartbeat is moving, else replace it.

Fork safety: the supervisor forks only while it is the sole thread, after
closing every Redis pool and database connection and flushing output; the
signals it traps are blocked across the fork so a child never runs the
supervisor's handlers.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis as redis_lib
from redis.exceptions import RedisClusterException

from ... import keys
from ...conf import Config
from ...errors import ConfigurationError
from ...redis import connection, sentinel
from ...redis.cluster_layout import for_cluster
from .. import cluster_heartbeat, systemd
from ..capsules import plan
from ..child import flush_output, run_child
from ..launcher import dump_threads
from ..logfiles import reopen as reopen_logs
from ..logwriter import stop_writers
from ..os_signals import SignalPipe
from .monitors import LIVENESS_CHECK_INTERVAL, MEMORY_CHECK_INTERVAL, Monitors, memory_limit_kb
from .restart import Restart, RollingRestarts
from .slots import (
    BACKOFF_RESET_AFTER,
    FIRST_BEAT_GRACE,
    GONE,
    SHUTDOWN_GRACE,
    Child,
    SlotState,
    SwarmError,
    backoff_delay,
    child_identity,
)
from .topology import Assignment, assignments

logger = logging.getLogger("wurk_django.swarm")

TICK = 0.2
TERM_RESEND_INTERVAL = 1.0
_TRAPPED = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class _Clock:
    last_memory: float = 0.0
    last_liveness: float = 0.0
    blind: bool = False
    warned_threads: bool = False
    pending: deque = field(default_factory=deque)


class Swarm(RollingRestarts, Monitors):
    """Forks and supervises one worker process per :class:`Assignment`.

    ``run()`` (standalone) forks every slot and supervises on the calling
    thread until a TERM/INT has drained every child. A co-hosted swarm calls
    ``boot()`` on the main thread and ``supervise()`` on a daemon thread, and
    stops through ``request_shutdown()``.
    """

    def __init__(self, config: Config, slots: list[Assignment], *, pipe: SignalPipe | None = None,
                 memory_limit: int | None = None, heartbeat_timeout: float | None = None,
                 cohosted: bool = False, cluster: bool = False) -> None:
        if not slots:
            raise SwarmError("the swarm topology is empty")
        self.config = config
        #: On a Redis Cluster (issue 46 item 3): each child runs the cluster worker, and the
        #: supervisor's probes read the cluster layout's keys through a cluster client.
        self.cluster = cluster
        self.layout = for_cluster(cluster)
        self.slots = slots
        self.pipe = pipe
        self.timeout = float(config.timeout)
        self.memory_limit = memory_limit_kb(config) if memory_limit is None else memory_limit
        timeout = config.swarm_heartbeat_timeout if heartbeat_timeout is None else heartbeat_timeout
        self.heartbeat_timeout = float(timeout or 0)
        self.cohosted = cohosted
        self.owner_pid: int | None = None
        self.children: dict[int, Child] = {}
        self.state = {a.index: SlotState() for a in slots}
        self.stopping = False
        self.quiet = False
        self.restart: Restart | None = None
        self._clock = _Clock()
        self._shutdown_requested = threading.Event()
        self._probe: Any = None
        self._configs: dict[int, Config] = {}
        self.booted = False
        # systemd hears from the supervisor of a standalone swarm only (run()), never from its
        # children nor from a co-hosted swarm, whose host process speaks for itself.
        self.watchdog: systemd.Watchdog | None = None
        self.ready_sent = False

    # -- public control ---------------------------------------------------------------

    def owner(self) -> bool:
        """True only in the process that forked the children (RUN-410)."""
        return self.owner_pid == os.getpid()

    def request_shutdown(self) -> None:
        """Ask the supervising thread to drain the swarm at its next tick (safe from any thread)."""
        self._shutdown_requested.set()

    def boot(self) -> None:
        """Fork every slot (ENT-703). The caller already installed its traps, if any."""
        if self.booted:
            raise SwarmError("this swarm is already booted")
        self.booted = True
        self.owner_pid = os.getpid()
        for a in self.slots:
            self._configs[a.index] = self._slot_config(a)
        logger.info("swarm supervisor %d: forking %d children (timeout %ss%s)", self.owner_pid, len(self.slots),
                    self.config.timeout,
                    f", memory limit {self.memory_limit // 1024} MB" if self.memory_limit else "")
        for a in self.slots:
            self._spawn_slot(a.index, strict=True)
        # The first memory and liveness checks come one interval after boot.
        self._clock.last_memory = self._clock.last_liveness = time.monotonic()

    def run(self) -> int:
        """Boot, then supervise on this thread until shut down. Returns the exit status."""
        try:
            self.boot()
        except BaseException:
            self.shutdown()  # drain whatever was forked before the failure
            raise
        if systemd.enabled():
            self.watchdog = systemd.Watchdog()
        self.supervise()
        return 0

    def supervise(self) -> None:
        """The supervise loop (RUN-404); returns once stopped and childless."""
        try:
            while True:
                self._tick()
                if self.stopping and not self.children:
                    return
        finally:
            self._close_probe()

    # -- the tick ---------------------------------------------------------------------

    def _wait(self) -> list[str]:
        if self.pipe is not None:
            return self.pipe.wait(TICK)
        self._shutdown_requested.wait(TICK)
        return []

    def _tick(self) -> None:
        for name in self._wait():
            self._on_signal(name)
        if self._shutdown_requested.is_set() and not self.stopping:
            self.shutdown()
            return
        now = time.monotonic()
        self._reap(now)
        if self.stopping:
            return
        if self.watchdog is not None:
            self.watchdog.tick()
            if not self.ready_sent:
                self._notify_ready()
        self._respawn_due(now)
        self._advance_restart(now)
        if now - self._clock.last_memory >= MEMORY_CHECK_INTERVAL:
            self._clock.last_memory = now
            self._check_memory()
        if now - self._clock.last_liveness >= LIVENESS_CHECK_INTERVAL:
            self._clock.last_liveness = now
            self._check_liveness(now)
        self._escalate_terms(now)

    def _on_signal(self, name: str) -> None:
        if name in ("TERM", "INT"):
            logger.info("%s received: draining %d children within %ss", name, len(self.children), self.timeout)
            self.request_shutdown()
        elif name == "TSTP":
            logger.info("TSTP received: quieting every child (sticky: new children boot quiet)")
            self.quiet = True
            self._signal_all(signal.SIGTSTP)
            if self.watchdog is not None:
                systemd.notify("STATUS=quiet: the children finish their jobs and fetch nothing new")
        elif name == "USR1":
            self.rolling_restart()
        elif name == "USR2":
            reopen_logs()
            self._signal_all(signal.SIGUSR2)
        elif name == "TTIN":
            dump_threads()

    def _notify_ready(self) -> None:
        """READY=1 once every slot's child is in ``processes``: its heartbeat starts only
        after its processors are fetching. Until then systemd counts the unit as starting."""
        if len(self.children) == len(self.slots) and all(self._has_beaten(pid) for pid in self.children):
            self.ready_sent = True
            systemd.notify("READY=1", f"STATUS=supervising {len(self.children)} children, all fetching")

    # -- forking ----------------------------------------------------------------------

    def _slot_config(self, a: Assignment) -> Config:
        # Children work on the supervisor's Redis shard (manage.py wurk --shard/--redis-url).
        config = Config(self.config.raw, QUEUES=list(a.queues), CONCURRENCY=a.concurrency).for_shard(
            self.config.shard_spec)
        # Each child runs the CAPSULES beside its slot's default capsule: a slot's queue that
        # a capsule serves too is refused here, before any fork, not in every child.
        try:
            plan(config)
        except ConfigurationError as exc:
            raise SwarmError(f"swarm slot {a.index}: {exc}") from None
        return config

    def _check_fork_safe(self) -> None:
        alive = threading.active_count()
        allowed = 2 if self.cohosted and threading.current_thread() is not threading.main_thread() else 1
        if alive <= allowed:
            return
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread())
        if self.cohosted:
            # A co-hosted respawn forks next to the host's threads; the child resets the
            # locks wurk owns and starts from a clean Launcher. Said once, not per fork.
            if not self._clock.warned_threads:
                self._clock.warned_threads = True
                logger.warning("co-hosted swarm forking while other threads run (%s); prefer "
                               "`manage.py wurk --processes N`", names)
            return
        raise SwarmError(f"refusing to fork with {alive - 1} other thread(s) alive ({names}): "
                         "locks they hold would stay locked forever in the child (RUN-810)")

    def _prepare_fork(self) -> None:
        """Close every socket and flush output before ``fork()`` (ENT-703, RUN-811)."""
        self._close_probe()
        connection.reset()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # a broken DB must not keep a worker from being forked
            logger.exception("closing database connections before fork failed")
        flush_output()
        gc.collect()
        gc.freeze()

    def _fork(self, index: int) -> int:
        """Fork one child for slot ``index``; returns its pid (the child never returns)."""
        stop_writers()  # the log writer is the one thread a supervisor runs besides its own
        # Under Sentinel, the threads that listen to the sentinels too (the supervisor's own
        # Redis calls started them); the next pool it builds starts them again.
        sentinel.stop_watchers()
        self._check_fork_safe()
        self._prepare_fork()
        parent_pid = os.getpid()
        config = self._configs[index]
        # Blocked across fork(): a signal landing before the child replaced the inherited
        # handlers would otherwise be written into the supervisor's pipe (RUN-303).
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _TRAPPED)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    run_child(config, index=index, parent_pid=parent_pid, quiet=self.quiet,
                              inherited_pipe=self.pipe, unblock=old_mask, cluster=self.cluster)
                finally:
                    os._exit(1)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        gc.unfreeze()
        now = time.monotonic()
        self.children[pid] = Child(pid, index, now, beat_moved_at=now + FIRST_BEAT_GRACE)
        return pid

    def _spawn_slot(self, index: int, strict: bool = False) -> None:
        slot = self.state[index]
        try:
            pid = self._fork(index)
        except Exception as exc:
            delay = backoff_delay(slot.streak)
            slot.streak += 1
            slot.due_at = time.monotonic() + delay
            logger.error("could not fork swarm child #%d (%s); retrying in %.0fs", index, exc, delay)
            if strict and isinstance(exc, SwarmError):
                raise
            return
        slot.pid = pid
        slot.due_at = None
        logger.info("swarm child #%d started: pid %d, queues %s, concurrency %d%s", index, pid,
                    ",".join(self.slots[index].queues), self.slots[index].concurrency,
                    " (quiet)" if self.quiet else "")

    # -- reaping and respawn ----------------------------------------------------------

    def _reap_pid(self, pid: int) -> int | None:
        """Exit code if ``pid`` has exited (reaping it), else None. Unknown pid: treated as gone."""
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return GONE  # ECHILD: not ours any more; retire the entry
        if done == 0:
            return None
        return os.waitstatus_to_exitcode(status)

    def _reap(self, now: float) -> None:
        for pid in list(self.children):
            code = self._reap_pid(pid)
            if code is None:
                continue
            child = self.children.pop(pid)
            self._child_exited(child, code, now)

    def _child_exited(self, child: Child, code: int, now: float) -> None:
        if code == GONE:
            how = "gone"
        elif code >= 0:
            how = f"exit status {code}"
        else:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        if code != 0:
            # A killed child never deregistered: drop its entry so the dashboard and the
            # reaper stop counting it (its private lists are the reaper's business).
            self._forget_identity(child.pid)
        restart = self.restart
        slot = self.state[child.index]
        if restart is not None and restart.index == child.index:
            if child.pid == restart.new_pid:
                self._replacement_died(restart, how, now)
                return
            if child.pid == restart.old_pid:
                if restart.new_pid is not None and restart.new_pid in self.children:
                    logger.info("swarm child #%d (%d) stopped for %s (%s); %d took its place", child.index,
                                child.pid, restart.reason, how, restart.new_pid)
                    slot.pid = restart.new_pid
                    self.restart = None
                    return
                # No replacement running: this is a crash, handled as one below.
                self.restart = None
        if slot.pid == child.pid:
            slot.pid = None
            if self.stopping:
                logger.info("swarm child #%d (%d) stopped (%s)", child.index, child.pid, how)
                return
            if code == 0:
                # A child only exits 0 unasked when it recycles itself (--max-jobs): replace it now.
                slot.streak = 0
                slot.due_at = now
                logger.info("swarm child #%d (%d) recycled itself; starting a fresh one", child.index, child.pid)
                return
            lived = now - child.spawned_at
            if lived >= BACKOFF_RESET_AFTER:
                slot.streak = 0
            delay = backoff_delay(slot.streak)
            slot.streak += 1
            slot.due_at = now + delay
            logger.warning("swarm child #%d (%d) died (%s) after %.1fs; respawning in %.0fs",
                           child.index, child.pid, how, lived, delay)

    def _respawn_due(self, now: float) -> None:
        for index, slot in self.state.items():
            if slot.pid is None and slot.due_at is not None and slot.due_at <= now:
                if self.restart is not None and self.restart.index == index and self.restart.new_pid is not None:
                    continue
                self._spawn_slot(index)

    def _forget_identity(self, pid: int) -> None:
        identity = child_identity(pid)
        try:
            if self.cluster:
                # Its keys are in its own slot, the process set in {wurk}'s: two commands.
                cluster_heartbeat.deregister(self._redis(), identity)
                return
            pipe = self._redis().pipeline(transaction=True)
            pipe.srem(keys.PROCESSES, identity)
            pipe.unlink(identity, keys.work(identity), keys.workers(identity))
            pipe.execute()
        except (redis_lib.RedisError, RedisClusterException) as exc:
            logger.warning("could not remove the heartbeat of dead child %s: %s", identity, exc)
    # -- signals to children ----------------------------------------------------------

    def _send(self, pid: int, sig: int) -> None:
        """Signal one known child; only the owning process may (RUN-410)."""
        if not self.owner() or pid not in self.children:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def _signal_all(self, sig: int) -> None:
        for pid in list(self.children):
            self._send(pid, sig)

    # -- shutdown ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Drain every child: TERM, wait ``timeout + 5`` s, KILL stragglers (ENT-710).

        Runs on the supervising thread only; everyone else calls :meth:`request_shutdown`.
        """
        if not self.owner():
            return
        self.stopping = True
        if self.watchdog is not None:
            systemd.notify("STOPPING=1", f"STATUS=stopping: draining {len(self.children)} children")
        self.restart = None
        self._clock.pending.clear()
        self._shutdown_requested.set()
        deadline = time.monotonic() + self.timeout + SHUTDOWN_GRACE
        last_term = 0.0
        while self.children:
            now = time.monotonic()
            if now >= deadline:
                break
            if now - last_term >= TERM_RESEND_INTERVAL:
                # Re-sent each second: a child forked a moment ago may not have its handlers yet.
                last_term = now
                self._signal_all(signal.SIGTERM)
            self._reap(now)
            if self.children:
                time.sleep(0.1)
        if self.children:
            logger.warning("%d swarm children outlived the %.0fs drain; killing them", len(self.children),
                           self.timeout + SHUTDOWN_GRACE)
            survivors = list(self.children)
            self._signal_all(signal.SIGKILL)
            for _ in range(50):
                self._reap(time.monotonic())
                if not self.children:
                    break
                time.sleep(0.02)
            for pid in survivors:
                if pid in self.children:
                    self.children.pop(pid)
                    self._forget_identity(pid)
        self._close_probe()
        logger.info("swarm supervisor %d stopped", os.getpid())


# -- entry points --------------------------------------------------------------------


#: Sidekiq Enterprise's switches for loading the app before forking. Django is always
#: set up in the parent, so they have nothing left to switch.
PRELOAD_ENVS = ("SIDEKIQ_PRELOAD", "SIDEKIQ_PRELOAD_APP")


def run_swarm(config: Config, pipe: SignalPipe, processes: str | int | None = None, *,
              cluster: bool = False) -> int:
    """``manage.py wurk --processes N``: fork and supervise on this (main) thread (ENT-701).

    ``pipe`` is the command's installed self-pipe: its traps are in place before
    the first fork, since a TERM arriving in between would kill this process and
    orphan children that keep fetching (RUN-302). ``cluster``: the Redis is a Redis
    Cluster node, and each child runs the cluster worker (issue 46 item 3).
    """
    if not hasattr(os, "fork"):
        raise SwarmError("this platform cannot fork; run `manage.py wurk` without --processes")
    if sys.platform == "darwin":
        logger.warning("swarm mode on macOS is for development only")
    for name in PRELOAD_ENVS:
        if name in os.environ:  # accepted from a Sidekiq set-up, and said to do nothing (ENT-702)
            logger.info("%s is set: it changes nothing here, the swarm parent always loads Django "
                        "and your code before it forks", name)
    try:
        swarm = Swarm(config, assignments(config, processes), pipe=pipe, cluster=cluster)
        return swarm.run()
    except SwarmError as exc:
        logger.error("wurk: cannot run the swarm: %s", exc)
        return 1
    finally:
        pipe.restore()
