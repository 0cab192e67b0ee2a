"""What the supervisor knows about each slot and each forked child, and the crash backoff (ENT-706)."""

from __future__ import annotations

from dataclasses import dataclass

from ..state import NONCE, hostname

SHUTDOWN_GRACE = 5.0
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
BACKOFF_RESET_AFTER = 60.0
FIRST_BEAT_GRACE = 30.0

GONE = -1000  # "exit code" of a pid waitpid no longer knows (ECHILD); no signal has this number


class SwarmError(RuntimeError):
    """The swarm cannot start here (threads alive, not Linux-like, empty topology...)."""


def child_identity(pid: int) -> str:
    """A child's heartbeat identity, computable because the nonce is inherited (RUN-406)."""
    return f"{hostname()}:{pid}:{NONCE}"


def backoff_delay(streak: int) -> float:
    """Seconds before respawn number ``streak`` (0-based): 1, 2, 4 ... capped at 30 (ENT-706)."""
    return min(BACKOFF_START * (2 ** min(streak, 16)), BACKOFF_MAX)

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


