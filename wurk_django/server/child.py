"""One swarm child: the worker a supervisor forked (ENT-704, RUN-303, RUN-403, RUN-409).

Everything here runs in the child right after ``os.fork()`` returned 0, and
the child never returns into the supervisor's code: :func:`run_child` ends the
process with ``os._exit`` so the parent's ``atexit`` hooks, ``finally`` blocks
and buffered output never run (or print) a second time (RUN-813).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, NoReturn

import redis as redis_lib
from django.dispatch import Signal

from ..conf import Config
from ..redis import connection, scripts
from .launcher import Launcher, dump_threads
from .logfiles import reopen as reopen_logs
from .os_signals import SignalPipe
from .threads import spawn

logger = logging.getLogger("wurk_django.worker")

#: Sent in every swarm child after its Redis pools are reset and before its
#: worker starts (Ent ``on(:fork)``): restart your own background threads here
#: (log shippers, APM agents). ``sender`` is the child's Config, ``index`` its
#: slot number.
child_forked = Signal()

ORPHAN_CHECK_INTERVAL = 5.0
BOOT_CHECK_ATTEMPTS = 3
PR_SET_PDEATHSIG = 1


class _BootSignals:
    """What a child does with signals between the fork and its own handlers (RUN-303).

    TERM/INT go back to the default action: a child killed while booting has
    fetched nothing yet. TSTP is only recorded (the default would suspend the
    child in its slot) and replayed once the worker runs. USR2 is recorded too,
    never left to its default action (which kills): a log rotation relayed while
    the child boots still reopens its logs once its handlers are in place,
    instead of leaving it writing to the moved file. USR1 is the supervisor's and
    is ignored.
    """

    def __init__(self) -> None:
        self.quiet_requested = False
        self.reopen_requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTSTP, self._record_tstp)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.signal(signal.SIGUSR2, self._record_usr2)
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)
        # The parent may have left SIGCHLD ignored or a wakeup fd set by its host.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass

    def _record_tstp(self, signum: int, frame: Any) -> None:
        self.quiet_requested = True

    def _record_usr2(self, signum: int, frame: Any) -> None:
        self.reopen_requested = True


def close_inherited_pipe(pipe: SignalPipe | None) -> None:
    """Close the supervisor's self-pipe in the child (RUN-303).

    Left open, a TERM to one child would be written into the parent's pipe
    by the inherited handler and drain the whole swarm.
    """
    if pipe is None:
        return
    for name in ("_r", "_w"):
        fd = getattr(pipe, name, None)
        if isinstance(fd, int):
            try:
                os.close(fd)
            except OSError:
                pass


def set_parent_death_signal() -> None:
    """Linux: get SIGTERM when the forking thread dies (RUN-814); errors ignored elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def orphaned(parent_pid: int) -> bool:
    return os.getppid() != parent_pid


class OrphanWatchdog:
    """Every 5 s compare ``getppid()`` with the supervisor's pid; on a change, drain (ENT-712).

    The self-SIGTERM takes the ordinary drain path, so jobs finish or are
    requeued exactly as on a deploy. Together with PR_SET_PDEATHSIG it keeps a
    SIGKILLed supervisor's children from running on next to a new swarm.
    """

    def __init__(self, parent_pid: int, interval: float = ORPHAN_CHECK_INTERVAL) -> None:
        self.parent_pid = parent_pid
        self.interval = interval
        self._done = threading.Event()

    def check(self) -> bool:
        if orphaned(self.parent_pid):
            logger.warning("swarm supervisor %d is gone; draining this child", self.parent_pid)
            os.kill(os.getpid(), signal.SIGTERM)
            return True
        return False

    def start(self) -> threading.Thread:
        return spawn("wurk-orphan-watchdog", self._run)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            if self.check():
                return

    def stop(self) -> None:
        self._done.set()


def flush_output() -> None:
    """Flush every logging handler and stdio, so nothing buffered is written twice."""
    for ref in list(getattr(logging, "_handlerList", [])):
        handler = ref() if callable(ref) else None
        if handler is not None:
            try:
                handler.flush()
            except Exception:  # a broken handler must not stop a fork or an exit
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def run_child(config: Config, *, index: int, parent_pid: int, quiet: bool,
              inherited_pipe: SignalPipe | None, unblock: Any = None, cluster: bool = False) -> NoReturn:
    """Boot and run a worker in this freshly forked process, then ``os._exit``.

    ``unblock`` is the signal mask to restore once the supervisor's handlers
    are replaced (the supervisor blocks its signals across ``fork()``).
    ``cluster``: the Redis is a Redis Cluster node, and the worker is the cluster
    worker (:mod:`.cluster_worker`, issue 46 item 3).
    Exit status 0 after a stop, 1 after a crash (the supervisor respawns it).
    """
    code = 1
    try:
        boot = _BootSignals()
        boot.install()
        if unblock is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblock)
        close_inherited_pipe(inherited_pipe)
        set_parent_death_signal()
        if orphaned(parent_pid):
            os._exit(0)  # the supervisor died before we armed the death signal
        code = _serve(config, index=index, parent_pid=parent_pid, quiet=quiet, boot=boot, cluster=cluster)
    except BaseException:
        try:
            logger.exception("swarm child #%d (%d) crashed", index, os.getpid())
        except BaseException:
            pass
        code = 1
    finally:
        flush_output()
        os._exit(code)


def check_redis(config: Config, attempts: int = BOOT_CHECK_ATTEMPTS, delay: float = 1.0) -> None:
    """Redis answers and holds every Lua script, in one round trip (RUN-403, PRO-004):
    a child whose Redis is unreachable, or that cannot load a script, fails here (exit
    1, respawned by the supervisor with its back-off) instead of on its first job.
    Tried ``attempts`` times, ``delay`` doubling between them; a refused script is not
    tried again."""
    for attempt in range(1, attempts + 1):
        try:
            scripts.preload(connection.get_redis(config=config))
            return
        except redis_lib.ResponseError:
            raise
        except redis_lib.RedisError as exc:
            if attempt == attempts:
                raise
            logger.warning("swarm child %d: Redis check failed (%s); trying again in %.0fs", os.getpid(), exc, delay)
            time.sleep(delay)
            delay *= 2


def check_cluster(config: Config, attempts: int = BOOT_CHECK_ATTEMPTS, delay: float = 1.0) -> None:
    """:func:`check_redis` for a child on a Redis Cluster: the cluster answers from every
    primary (its scripts are loaded by SHA on first use, node by node)."""
    from redis.exceptions import RedisClusterException

    for attempt in range(1, attempts + 1):
        try:
            client = connection.cluster_for(config)
            if client is None:
                raise redis_lib.ConnectionError(f"Redis at {config.redis_url} is no longer a cluster node")
            client.ping(target_nodes=client.PRIMARIES)
            return
        except (redis_lib.RedisError, RedisClusterException) as exc:
            if attempt == attempts:
                raise
            logger.warning("swarm child %d: Redis Cluster check failed (%s); trying again in %.0fs", os.getpid(),
                           exc, delay)
            connection.reset()  # a client built while a node was unreachable is built again
            time.sleep(delay)
            delay *= 2


def _serve(config: Config, *, index: int, parent_pid: int, quiet: bool, boot: _BootSignals,
           cluster: bool = False) -> int:
    # The fork hook of wurk_django.redis.connection gave this process new locks and no pools
    # (a co-hosted respawn forks while host threads may hold the parent's); this drops any
    # pool it missed.
    connection.reset()
    if cluster:
        check_cluster(config)
    else:
        check_redis(config)
    child_forked.send(sender=config, index=index)

    pipe = SignalPipe()
    if cluster:
        from .cluster_worker import ClusterWorker

        launcher: Any = ClusterWorker(config, on_signal=pipe.send_self)
    else:
        launcher = Launcher(config, on_signal=pipe.send_self)
    pipe.install()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # the supervisor's signal: a child ignores it
    if boot.reopen_requested:
        # A USR2 relayed while we booted; one arriving from now on takes the pipe.
        reopen_logs()
    launcher.run()
    if quiet or boot.quiet_requested:
        launcher.quiet()
    watchdog = OrphanWatchdog(parent_pid)
    if watchdog.check():
        pass  # TERM is now waiting in our own pipe; the loop below drains
    watchdog.start()
    try:
        _dispatch(launcher, pipe)
    finally:
        watchdog.stop()
        pipe.restore()
    return 0


def _dispatch(launcher: Launcher, pipe: SignalPipe) -> None:
    """Act on signals until the worker has stopped (RUN-303: returns after ``stop()``)."""
    stopping = False
    while not launcher.stopped.is_set():
        # Short waits: the supervisor reaps (and a rolling restart moves on) once we exit.
        for name in pipe.wait(0.1):
            if name in ("TERM", "INT"):
                # Repeats are expected: the supervisor re-sends TERM every second
                # while it waits, so a second TERM is not "exit now" here.
                if not stopping:
                    stopping = True
                    logger.info("%s received: stopping within %ss", name, launcher.config.timeout)
                    spawn("stopper", launcher.stop)
            elif name == "TSTP":
                launcher.quiet()
            elif name == "TTIN":
                dump_threads()
            elif name == "USR2":
                reopen_logs()
