"""The revoke channel: how a worker process hears a revoke at once (issue 44 item 3).

:func:`wurk_django.api.revoke.revoke` (and so ``AsyncResult.revoke`` and the admin's
Stop) publishes its ``REVOKE`` command on ``wurk-revoke:<db>`` in the round trip that
writes the marker. Every worker process listens there on its one subscribed
connection (:mod:`wurk_django.server.subscriber`, shared with the push watch and
the schedule wake-ups), so a ``terminate`` reaches the watchdog within a round trip
instead of at the next heartbeat, up to ``BEAT_INTERVAL`` seconds later.

The heartbeat path stays: the command also sits in the process's signal list and the
marker in the ``revoked`` set, both read each beat, so a process whose subscription
is down when a revoke is published still hears it within a beat; and when the
subscription comes back after a loss, the heartbeat is asked to beat now, to catch
what was published meanwhile. Hearing the same revoke on both paths changes nothing
the second time (:meth:`~.watchdog.Watchdog.stop`).

All of it runs on the subscriber's thread and sends nothing to Redis: the command
carries everything the stop needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...conf import Config
from ...redis import pools
from ...redis.connection import get_redis
from ...revocation import COMMAND, channel
from ...text import to_text
from .. import subscriber
from . import revocations

logger = logging.getLogger("wurk_django.worker")


class RevokeChannel:
    """This process's place on the revoke channel of ``config``'s Redis."""

    def __init__(self, config: Config, resubscribed: Callable[[], None] | None = None) -> None:
        self.config = config
        self._resubscribed = resubscribed  # the heartbeat's wake: catch up on what was missed
        self._listening: Any = None
        self._was_up = False
        self._lost = False

    def start(self) -> None:
        if self._listening is not None:
            return
        db = pools.database_of(get_redis(config=self.config))
        self._listening = subscriber.for_config(self.config).listen(channel(db), self._heard, self._changed)

    def stop(self) -> None:
        listening, self._listening = self._listening, None
        if listening is not None:
            subscriber.for_config(self.config).leave(listening)

    # -- on the subscriber's thread ------------------------------------------------

    def _heard(self, data: Any) -> None:
        text = to_text(data)
        if not text.startswith(COMMAND):
            logger.warning("ignoring a message on the revoke channel that is no revoke: %r", text[:200])
            return
        revocations.command(text, self.config)

    def _changed(self, up: bool, client_id: int | None) -> None:
        if not up:
            self._lost = self._lost or self._was_up
        elif self._lost and self._resubscribed is not None:
            # Revokes published while the subscription was down reached no one here: their
            # markers and signal-list commands are read by a beat, asked for now.
            self._lost = False
            self._resubscribed()
        self._was_up = up
