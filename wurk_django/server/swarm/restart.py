"""Rolling restarts: replace one slot at a time, new child first, then stop the old one (ENT-708).

USR1 queues every live slot; memory recycling queues one. Each supervisor tick
advances the one restart in progress by at most one phase:
``spawn`` (fork the replacement) -> ``beat`` (wait for its first heartbeat, at
most 30 s) -> ``exit`` (TERM the old child, KILL it after ``timeout + 5`` s).
A replacement that dies before beating is retried with the crash backoff while
the old child keeps working.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass

from .slots import SHUTDOWN_GRACE, backoff_delay

logger = logging.getLogger("wurk_django.swarm")

RESTART_BEAT_WAIT = 30.0


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


class RollingRestarts:
    """The rolling-restart half of :class:`~wurk_django.server.swarm.supervisor.Swarm`."""

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

