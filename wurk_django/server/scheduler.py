"""The scheduled poller: moves due jobs from ``retry`` and ``schedule`` onto queues (CORE-145..148).

Each due job is taken by an atomic pop-by-score script, so any number of
workers (Ruby ones included) can poll the same sets without double pushes.
Polls are spread out so the whole cluster polls about once per
``AVERAGE_SCHEDULED_POLL_INTERVAL`` seconds.
"""

from __future__ import annotations

import logging
import random
import time

from .. import payload
from ..client import Client
from ..conf import Config
from ..connection import get_redis
from ..scripts import script
from . import death
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")

SETS = ("retry", "schedule")
INITIAL_WAIT = 10


class Scheduler:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = Client(config=config)
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
        """Push every job due by ``now``; returns how many moved."""
        redis = get_redis(config=self.config)
        pop = script(redis, "zpop_due")
        moved = 0
        for name in SETS:
            while not self.loop.done:
                raw = pop(keys=[name], args=[payload.score(now if now is not None else time.time())])
                if raw is None:
                    break
                self._push(name, raw)
                moved += 1
        return moved

    def _push(self, set_name: str, raw: bytes) -> None:
        job = None
        try:
            job = payload.loads(raw)
            if not isinstance(job, dict):
                raise ValueError("not a JSON object")
            self.client.push(job)
        except Exception as exc:
            # The member already left the set; never drop it on the floor: it dies as
            # received (reason SCHEDULER), so the death handlers and ``job_died`` hear of it.
            logger.error("could not enqueue a due job from %s (%s); moved it to the dead set", set_name, exc)
            death.die(job if isinstance(job, dict) else None, exc, reason=death.SCHEDULER, config=self.config,
                      raw=raw)

    def interval(self) -> float:
        """About one poll per average interval across all processes (CORE-148)."""
        try:
            count = max(int(get_redis(config=self.config).scard("processes")), 1)
        except Exception:  # an outage only makes the interval less precise
            count = 1
        average = self.config.poll_interval_average or count * self.config.average_scheduled_poll_interval
        if count < 10:
            return average * self._rng.random() + average / 2
        return average * self._rng.random() * 2

    def _prune_processes(self) -> None:
        from ..api import ProcessSet

        try:
            ProcessSet(clean=True)
        except Exception:
            logger.exception("could not prune the processes set")
