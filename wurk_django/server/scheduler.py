"""The scheduled poller: moves due jobs from ``retry`` and ``schedule`` onto queues (CORE-145..148).

Due jobs are taken from the set and pushed onto their queues by one script
(Sidekiq Pro's reliable scheduler), so a worker that dies mid-sweep loses no
job and any number of workers (Ruby ones included) can poll the same sets
without double pushes. Promotion re-stamps ``enqueued_at`` and leaves the rest
of the payload byte for byte as it was; client middleware does not run again.
Polls are spread out so the whole cluster polls about once per
``AVERAGE_SCHEDULED_POLL_INTERVAL`` seconds.
"""

from __future__ import annotations

import logging
import random
import time

from .. import keys, payload
from ..conf import Config
from ..connection import get_redis
from ..errors import InvalidJob
from ..scripts import script
from . import death
from .outage import is_outage
from .processes import prune_processes
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")

SETS = (keys.RETRY, keys.SCHEDULE)
INITIAL_WAIT = 10
BATCH = 500  # due jobs promoted per script call


class Scheduler:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._rng = random.Random()
        first = self._rng.random() * 5
        if config.poll_interval_average is None:
            first += INITIAL_WAIT
        self.loop = TimerLoop("scheduler", self.tick, self.interval, first_wait=first)
        self._pruned = False

    def start(self) -> None:
        self.loop.start()

    def terminate(self) -> None:
        self.loop.terminate()

    def tick(self) -> None:
        if not self._pruned:
            self._pruned = True
            self._prune_processes()
        self.enqueue_due()

    def enqueue_due(self, now: float | None = None) -> int:
        """Move every job due by ``now`` onto its queue; returns how many moved.

        Each call of the promote script takes up to ``BATCH`` due jobs out of the
        set and pushes them in the same atomic step, so a worker dying mid-sweep
        loses nothing and two workers never push one job twice.
        """
        redis = get_redis(config=self.config)
        promote = script(redis, "promote_due")
        moved = 0
        for name in SETS:
            while not self.loop.done:
                at = now if now is not None else time.time()
                taken, buried, *members = promote(keys=[name, keys.QUEUES, keys.DEAD],
                                                  args=[payload.score(at), keys.QUEUE_PREFIX, int(at * 1000), BATCH])
                moved += int(taken) - int(buried)
                if buried:
                    logger.error("%d due job(s) in %s were not valid job JSON; moved them to the dead set",
                                 buried, name)
                for raw in members:
                    # The script stored them in the same step; the death path tells the handlers.
                    death.die(None, InvalidJob(f"a due job in {name} is not valid job JSON"),
                              reason=death.SCHEDULER, config=self.config, raw=raw, stored=True)
                if int(taken) < BATCH:
                    break
        return moved

    def interval(self) -> float:
        """About one poll per average interval across all processes (CORE-148)."""
        try:
            count = max(int(get_redis(config=self.config).scard(keys.PROCESSES)), 1)
        except Exception:  # an outage only makes the interval less precise
            count = 1
        average = self.config.poll_interval_average or count * self.config.average_scheduled_poll_interval
        if count < 10:
            return average * self._rng.random() + average / 2
        return average * self._rng.random() * 2

    def _prune_processes(self) -> None:
        try:
            prune_processes(get_redis(config=self.config))
        except Exception as exc:
            if not is_outage(exc):
                logger.exception("could not prune the processes set")
                return
            self._pruned = False  # try again at the next tick; the loop reports the outage once
            raise
