"""A worker process's lifecycle events, sent as Django signals (CORE-154, RUN-111, RUN-141).

``startup`` runs before any thread starts, in connection order, and a receiver
that raises aborts the boot. ``quiet``, ``shutdown`` and ``exit`` run in the
reverse of connection order, as teardown code does (the last thing set up is
the first taken down). ``heartbeat`` runs when this process's entry appears in
Redis: at the first beat and, once a beat has failed, at the next beat that
finds the entry gone;
``beat`` runs after every successful beat. Apart from ``startup``, a receiver
that raises is logged and the others still run: a worker never stops because
a hook failed.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.dispatch import Signal

from .. import signals

logger = logging.getLogger("wurk_django.worker")

EVENTS: dict[str, Signal] = {
    "startup": signals.worker_startup,
    "quiet": signals.worker_quiet,
    "shutdown": signals.worker_shutdown,
    "exit": signals.worker_exit,
    "heartbeat": signals.worker_heartbeat,
    "beat": signals.worker_beat,
}
REVERSED = frozenset({"quiet", "shutdown", "exit"})


class StartupError(RuntimeError):
    """A ``worker_startup`` receiver raised: the worker does not start."""


def _receivers(signal: Signal, sender: Any) -> list:
    """The live receivers in connection order, async ones wrapped to run here."""
    # Django's own send() walks the same list; it offers no reversed walk, so this
    # reads it the way send() does (a list of sync and a list of async receivers).
    live = signal._live_receivers(sender)
    if isinstance(live, tuple):
        sync, asynchronous = live
        return [*sync, *(async_to_sync(receiver) for receiver in asynchronous)]
    return list(live)


def fire(event: str, launcher: Any, **kwargs: Any) -> None:
    """Send ``event``'s signal with ``sender=Launcher`` and ``launcher=launcher``."""
    signal = EVENTS[event]
    if not signal.receivers:  # checked first: `beat` fires every 10 s, usually unheard
        return
    sender = type(launcher)
    receivers = _receivers(signal, sender)
    if event in REVERSED:
        receivers.reverse()
    for receiver in receivers:
        try:
            receiver(signal=signal, sender=sender, launcher=launcher, **kwargs)
        except Exception as exc:
            if event == "startup":
                raise StartupError(f"worker_startup receiver {_name(receiver)} failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
            logger.exception("worker_%s receiver %s failed", event, _name(receiver))


def _name(receiver: Any) -> str:
    return getattr(receiver, "__qualname__", None) or repr(receiver)
