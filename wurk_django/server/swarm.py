"""Swarm: one supervisor forking and minding many worker processes (ENT-701..713, RUN-401..411).

Python threads share one core, so a swarm is how wurk_django uses every
core: the supervisor sets Django up once, then ``os.fork()``s one child per
slot; each child runs a full worker (a Launcher) with its own Redis pools and
its own identity ``<host>:<pid>:<nonce>`` (the nonce is inherited, so the
supervisor can compute every child's identity).

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

import atexit
import gc
import logging
import math
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis as redis_lib

from .. import connection
from ..conf import Config, parse_queue
from ..errors import ConfigurationError
from .child import flush_output, run_child
from .launcher import dump_threads
from .logfiles import reopen as reopen_logs
from .logwriter import stop_writers
from .os_signals import SignalPipe
from .state import NONCE, hostname

logger = logging.getLogger("wurk_django.swarm")

TICK = 0.2
SHUTDOWN_GRACE = 5.0
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
BACKOFF_RESET_AFTER = 60.0
MEMORY_CHECK_INTERVAL = 10.0
LIVENESS_CHECK_INTERVAL = 5.0
FIRST_BEAT_GRACE = 30.0
RESTART_BEAT_WAIT = 30.0
TERM_RESEND_INTERVAL = 1.0
COHOSTED_JOIN_SLACK = 1.0
PROBE_TIMEOUT = 0.5

GONE = -1000  # "exit code" of a pid waitpid no longer knows (ECHILD); no signal has this number
_TRAPPED = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGUSR1, signal.SIGUSR2)


class SwarmError(RuntimeError):
    """The swarm cannot start here (threads alive, not Linux-like, empty topology...)."""


# -- topology ------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """What one forked child runs: its slot number, queues and concurrency."""

    index: int
    queues: tuple[str, ...]
    concurrency: int


def cpu_count() -> tuple[int, str]:
    """CPUs this process may use, honouring a cgroup quota, and where the number came from (RUN-401)."""
    try:
        cpus = len(os.sched_getaffinity(0))
        origin = "affinity"
    except (AttributeError, OSError):
        cpus, origin = os.cpu_count() or 1, "cpu_count"
    quota = _cgroup_quota()
    if quota is not None and quota < cpus:
        return max(1, quota), "cgroup"
    return max(1, cpus), origin


def _cgroup_quota() -> int | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:  # v2: "max 100000" or "200000 100000"
            quota, period = f.read().split()[:2]
        if quota != "max":
            return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota_us = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period_us = int(f.read())
        if quota_us > 0 and period_us > 0:
            return math.ceil(quota_us / period_us)
    except (OSError, ValueError):
        pass
    return None


def parse_count(value: str | int | None) -> int:
    """How many children: ``"auto"``/``None`` (env ``WURK_COUNT``/``SIDEKIQ_COUNT``, else CPUs),
    a whole number, or a decimal multiplying the CPU count (ENT-702). Never below 1."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        value = os.environ.get("WURK_COUNT") or os.environ.get("SIDEKIQ_COUNT") or ""
        if not value.strip():
            return cpu_count()[0]
    if isinstance(value, int):
        return max(1, value)
    text = value.strip()
    try:
        return max(1, int(text))
    except ValueError:
        pass
    try:
        factor = float(text)
    except ValueError:
        logger.warning("swarm count %r is not a number; using the CPU count", value)
        return cpu_count()[0]
    if not math.isfinite(factor) or factor <= 0:
        return cpu_count()[0]
    return max(1, math.ceil(factor * cpu_count()[0]))


def assignments(config: Config, processes: int | None = None) -> list[Assignment]:
    """One Assignment per child: ``WURK["SWARM"]`` flattened in order, else ``processes``
    copies of the config's own queues and concurrency (RUN-401)."""
    topology = config.swarm
    if topology:
        out: list[Assignment] = []
        for slot in topology:
            queues = tuple(slot.get("queues") or config.raw["QUEUES"])
            for spec in queues:
                parse_queue(spec)  # a bad spec fails here, in the supervisor, not in every child
            concurrency = int(slot.get("concurrency") or config.concurrency)
            for _ in range(int(slot.get("count", 1))):
                out.append(Assignment(len(out), queues, concurrency))
        return out
    count = parse_count(processes)
    queues = tuple(f"{name},{weight}" if weight else name for name, weight in config.queues)
    return [Assignment(i, queues, config.concurrency) for i in range(count)]


def memory_limit_kb(config: Config) -> int | None:
    """The RSS cap per child in kB: ``MEMORY_LIMIT_MB``, else env ``WURK_MAXMEM_MB``, else
    ``SIDEKIQ_MAXMEM_MB``; unset, 0 or garbage disables it and never fails boot (RUN-407)."""
    raw: Any = config.memory_limit_mb
    if raw is None:
        raw = os.environ.get("WURK_MAXMEM_MB") or os.environ.get("SIDEKIQ_MAXMEM_MB")
    try:
        megabytes = float(raw) if raw is not None else 0.0
    except (TypeError, ValueError):
        logger.warning("memory limit %r is not a number of megabytes; memory recycling is off", raw)
        return None
    if not math.isfinite(megabytes) or megabytes <= 0:
        return None
    return max(1, int(megabytes * 1024))


def rss_kb(pid: int) -> int | None:
    """Resident set size of ``pid`` in kB from ``/proc/<pid>/statm``; None without /proc (ENT-709)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            resident = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE") // 1024


def child_identity(pid: int) -> str:
    """A child's heartbeat identity, computable because the nonce is inherited (RUN-406)."""
    return f"{hostname()}:{pid}:{NONCE}"


def backoff_delay(streak: int) -> float:
    """Seconds before respawn number ``streak`` (0-based): 1, 2, 4 ... capped at 30 (ENT-706)."""
    return min(BACKOFF_START * (2 ** min(streak, 16)), BACKOFF_MAX)


# -- supervisor ----------------------------------------------------------------------


@dataclass
class Child:
    pid: int
    index: int
    spawned_at: float
    #: last ``beat`` value seen and when it changed (parent's monotonic clock)
    beat: bytes | None = None
    beat_moved_at: float = 0.0
    term_at: float | None = None
    killed: bool = False


@dataclass
class SlotState:
    pid: int | None = None
    streak: int = 0
    due_at: float | None = None  # respawn due (monotonic) when the slot is empty


@dataclass
class Restart:
    """The one slot being rolled: replacement first, then the old child (ENT-708)."""

    index: int
    old_pid: int
    phase: str = "spawn"  # spawn -> beat -> exit
    new_pid: int | None = None
    deadline: float = 0.0
    retry_at: float = 0.0
    streak: int = 0
    reason: str = "restart"


@dataclass
class _Clock:
    last_memory: float = 0.0
    last_liveness: float = 0.0
    blind: bool = False
    warned_threads: bool = False
    pending: deque = field(default_factory=deque)


class Swarm:
    """Forks and supervises one worker process per :class:`Assignment`.

    ``run()`` (standalone) forks every slot and supervises on the calling
    thread until a TERM/INT has drained every child. A co-hosted swarm calls
    ``boot()`` on the main thread and ``supervise()`` on a daemon thread, and
    stops through ``request_shutdown()``.
    """

    def __init__(self, config: Config, slots: list[Assignment], *, pipe: SignalPipe | None = None,
                 memory_limit: int | None = None, heartbeat_timeout: float | None = None,
                 cohosted: bool = False) -> None:
        if not slots:
            raise SwarmError("the swarm topology is empty")
        self.config = config
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
        self._probe: redis_lib.Redis | None = None
        self._configs: dict[int, Config] = {}
        self.booted = False

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
        elif name == "USR1":
            self.rolling_restart()
        elif name == "USR2":
            reopen_logs()
            self._signal_all(signal.SIGUSR2)
        elif name == "TTIN":
            dump_threads()

    # -- forking ----------------------------------------------------------------------

    def _slot_config(self, a: Assignment) -> Config:
        return Config(self.config.raw, QUEUES=list(a.queues), CONCURRENCY=a.concurrency)

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
                              inherited_pipe=self.pipe, unblock=old_mask)
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
            pipe = self._redis().pipeline(transaction=True)
            pipe.srem("processes", identity)
            pipe.unlink(identity, f"{identity}:work")
            pipe.execute()
        except redis_lib.RedisError as exc:
            logger.warning("could not remove the heartbeat of dead child %s: %s", identity, exc)

    # -- rolling restart --------------------------------------------------------------

    def rolling_restart(self) -> None:
        """Queue every live slot for a replace-then-stop restart, one at a time (ENT-708)."""
        if self.stopping:
            return
        indexes = [i for i, s in sorted(self.state.items()) if s.pid is not None]
        logger.info("USR1 received: rolling restart of %d children", len(indexes))
        for index in indexes:
            self.queue_restart(index, "rolling restart")

    def queue_restart(self, index: int, reason: str) -> bool:
        """Queue slot ``index`` for a graceful replacement; duplicates are dropped."""
        if self.restart is not None and self.restart.index == index:
            return False
        if any(i == index for i, _ in self._clock.pending):
            return False
        self._clock.pending.append((index, reason))
        return True

    def _advance_restart(self, now: float) -> None:
        restart = self.restart
        if restart is None:
            while self._clock.pending:
                index, reason = self._clock.pending.popleft()
                old = self.state[index].pid
                if old is not None and old in self.children:
                    restart = self.restart = Restart(index, old, reason=reason)
                    break
            if restart is None:
                return
        if restart.phase == "spawn":
            if now < restart.retry_at:
                return
            try:
                restart.new_pid = self._fork(restart.index)
            except Exception as exc:
                self._replacement_died(restart, f"fork failed: {exc}", now)
                return
            logger.info("%s of swarm child #%d: replacement %d started, old %d still working",
                        restart.reason, restart.index, restart.new_pid, restart.old_pid)
            restart.phase = "beat"
            restart.deadline = now + RESTART_BEAT_WAIT
        elif restart.phase == "beat":
            assert restart.new_pid is not None
            seen = self._has_beaten(restart.new_pid)
            if not seen and now < restart.deadline:
                return
            if not seen:
                logger.warning("replacement %d of swarm child #%d has not beaten within %.0fs; stopping the old "
                               "child anyway", restart.new_pid, restart.index, RESTART_BEAT_WAIT)
            self._send(restart.old_pid, signal.SIGTERM)
            restart.phase = "exit"
            restart.deadline = now + self.timeout + SHUTDOWN_GRACE
        elif restart.phase == "exit":
            child = self.children.get(restart.old_pid)
            if child is not None and now >= restart.deadline and not child.killed:
                logger.warning("old swarm child %d outlived %.0fs; killing it", restart.old_pid,
                               self.timeout + SHUTDOWN_GRACE)
                child.killed = True
                self._send(restart.old_pid, signal.SIGKILL)

    def _replacement_died(self, restart: Restart, how: str, now: float) -> None:
        old_alive = restart.old_pid in self.children
        restart.new_pid = None
        if not old_alive:
            # Both gone: hand the slot to crash respawn.
            slot = self.state[restart.index]
            slot.pid = None
            slot.due_at = now + backoff_delay(slot.streak)
            slot.streak += 1
            self.restart = None
            logger.warning("swarm child #%d: replacement and old child both gone (%s); respawning", restart.index, how)
            return
        delay = backoff_delay(restart.streak)
        restart.streak += 1
        restart.phase = "spawn"
        restart.retry_at = now + delay
        logger.warning("replacement for swarm child #%d died before its first beat (%s); keeping %d, retrying "
                       "in %.0fs", restart.index, how, restart.old_pid, delay)

    # -- memory and liveness ----------------------------------------------------------

    def _check_memory(self) -> None:
        if not self.memory_limit:
            return
        for index, slot in sorted(self.state.items()):
            if slot.pid is None or (self.restart is not None and self.restart.index == index):
                continue
            kb = rss_kb(slot.pid)
            if kb is None or kb < self.memory_limit:
                continue
            if self.queue_restart(index, "memory recycle"):
                logger.warning("swarm child #%d (%d) uses %d MB, over the memory limit of %d MB; recycling it",
                               index, slot.pid, kb // 1024, self.memory_limit // 1024)

    def _check_liveness(self, now: float) -> None:
        """Replace a child whose heartbeat stopped moving (RUN-408)."""
        if not self.heartbeat_timeout or self.quiet:
            return
        rolling = self.restart.index if self.restart is not None else None
        watched = [c for c in self.children.values()
                   if c.index != rolling and c.term_at is None and self.state[c.index].pid == c.pid]
        if not watched:
            return
        try:
            pipe = self._redis().pipeline(transaction=False)
            for child in watched:
                pipe.hget(child_identity(child.pid), "beat")
            beats = pipe.execute()
        except redis_lib.RedisError as exc:
            if not self._clock.blind:
                logger.warning("swarm heartbeat probe failed (%s); not judging children until it works", exc)
            self._clock.blind = True
            return
        if self._clock.blind:
            self._clock.blind = False
            for child in self.children.values():
                child.beat_moved_at = max(child.beat_moved_at, now)
        for child, beat in zip(watched, beats, strict=True):
            if beat is not None and beat != child.beat:
                child.beat = beat
                child.beat_moved_at = now
            elif now - child.beat_moved_at > self.heartbeat_timeout:
                logger.warning("swarm child #%d (%d) has not beaten for %.0fs; replacing it", child.index,
                               child.pid, now - child.beat_moved_at)
                child.term_at = now
                self._send(child.pid, signal.SIGTERM)

    def _escalate_terms(self, now: float) -> None:
        for child in self.children.values():
            if child.term_at is not None and not child.killed and now - child.term_at >= self.timeout + SHUTDOWN_GRACE:
                logger.warning("swarm child #%d (%d) ignored TERM for %.0fs; killing it", child.index, child.pid,
                               now - child.term_at)
                child.killed = True
                self._send(child.pid, signal.SIGKILL)

    def _has_beaten(self, pid: int) -> bool:
        try:
            return bool(self._redis().sismember("processes", child_identity(pid)))
        except redis_lib.RedisError:
            return False  # not seen; the 30 s wait bounds it

    def _redis(self) -> redis_lib.Redis:
        """A one-connection client for the supervisor's probes, closed before every fork."""
        if self._probe is None:
            options = {k: v for k, v in self.config.redis_options.items() if k not in ("max_connections",)}
            options.update(socket_timeout=PROBE_TIMEOUT, socket_connect_timeout=PROBE_TIMEOUT, max_connections=1,
                           timeout=PROBE_TIMEOUT)
            pool = redis_lib.BlockingConnectionPool.from_url(self.config.redis_url, **options)
            self._probe = redis_lib.Redis(connection_pool=pool)
        return self._probe

    def _close_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            try:
                probe.connection_pool.disconnect()
            except Exception:  # closing a dead socket may fail; it is gone either way
                pass

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


def run_swarm(config: Config, pipe: SignalPipe, processes: str | int | None = None) -> int:
    """``manage.py wurk --processes N``: fork and supervise on this (main) thread (ENT-701).

    ``pipe`` is the command's installed self-pipe: its traps are in place before
    the first fork, as RUN-302 requires.
    """
    if not hasattr(os, "fork"):
        raise SwarmError("this platform cannot fork; run `manage.py wurk` without --processes")
    if sys.platform == "darwin":
        logger.warning("swarm mode on macOS is for development only")
    try:
        swarm = Swarm(config, assignments(config, processes), pipe=pipe)
        return swarm.run()
    except SwarmError as exc:
        logger.error("wurk: cannot run the swarm: %s", exc)
        return 1
    finally:
        pipe.restore()


_cohosted: Swarm | None = None


def start_cohosted(config: Config | None = None) -> Swarm | None:
    """Start a swarm inside this (web) process, supervised on a daemon thread (ENT-711, RUN-411).

    Allowed only where forking is safe: on the main thread, before any other
    thread exists, in a process that is not a preforking server's worker.
    Otherwise it logs why and returns None; run ``manage.py wurk --processes N``
    instead. Installs no signal handlers (the host owns them); an ``atexit``
    hook, registered before the first fork, drains the children when the host
    exits. Returns the running :class:`Swarm`; a second call returns the same one.
    """
    global _cohosted
    if _cohosted is not None and _cohosted.owner():
        return _cohosted
    reason = cohosted_refusal()
    if reason:
        logger.error("wurk: not starting a co-hosted swarm: %s. Run `python manage.py wurk --processes N` "
                     "as its own process instead.", reason)
        return None
    if config is None:
        config = Config()
    try:
        swarm = Swarm(config, assignments(config), cohosted=True)
    except (SwarmError, ConfigurationError) as exc:
        logger.error("wurk: not starting a co-hosted swarm: %s", exc)
        return None
    holder: dict[str, threading.Thread] = {}
    # Registered before the first fork, so children forked by a boot that fails
    # halfway still get drained; children inherit it but are not the owner.
    atexit.register(_stop_cohosted, swarm, holder, swarm.timeout + SHUTDOWN_GRACE + COHOSTED_JOIN_SLACK)
    try:
        swarm.boot()
    except Exception:
        logger.exception("wurk: co-hosted swarm boot failed")
        swarm.shutdown()
        return None
    from .threads import spawn

    holder["thread"] = spawn("wurk-swarm-supervisor", swarm.supervise)
    _cohosted = swarm
    return swarm


def cohosted_refusal() -> str | None:
    """Why a co-hosted swarm may not start in this process, or None (RUN-820, RUN-841)."""
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    if threading.current_thread() is not threading.main_thread():
        return "it must be started from the main thread"
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread())
        return f"other threads are already running ({names}), and forking next to them is unsafe"
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in ("gunicorn", "uwsgi") or "gunicorn" in sys.modules or "uwsgi" in sys.modules:
        return "this is a preforking server's process; use embedded mode there"
    return None


def _stop_cohosted(swarm: Swarm, holder: dict[str, threading.Thread], join: float) -> None:
    """``atexit``: ask the supervisor to drain, wait for it, drain here only if it is dead (ENT-711)."""
    if not swarm.owner():
        return
    swarm.request_shutdown()
    thread = holder.get("thread")
    if thread is not None:
        thread.join(join)
        if thread.is_alive():
            return  # wedged mid-drain: leave it; the children's orphan guards finish the job
    if swarm.children:
        swarm.shutdown()
