"""The scheduled poller: moves due jobs from ``retry`` and ``schedule`` onto queues (CORE-145..148).

Due jobs are moved by one script that takes them out of the set and pushes
them in the same atomic step (``lua/promote_due.lua``, the reliable scheduler):
any number of workers (Ruby ones included) can poll the same sets without
double pushes, and a process dying mid-sweep loses nothing.
Polls are spread out so the whole cluster polls about once per
``AVERAGE_SCHEDULED_POLL_INTERVAL`` seconds.

On time without polling more: after each sweep the poller reads the earliest
score left in ``retry`` and ``schedule`` (same round trip as its process count)
and sleeps until then when that comes before its usual interval; and every
push into those sets through the Writer publishes its earliest score on
``wake-schedule:<db>``, which the process's subscribed connection (subscriber.py,
shared with the push watch) hears and uses to cut the current sleep short. A
sweep is never sooner than ``MIN_GAP`` after the previous one, so a storm of due
jobs or retries costs at most ``1 / MIN_GAP`` sweeps a second per process; a
sleep with nothing due is as long as it always was.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from .. import keys, payload
from ..client.operations import wake_args
from ..conf import Config
from ..errors import InvalidJob
from ..keys import schedule_wake_channel
from ..processes import prune_processes
from ..redis import pools
from ..redis.cluster_layout import CLUSTER
from ..redis.connection import cluster_for, get_redis, send_commands
from ..redis.scripts import lua, script
from . import death, subscriber
from .outage import is_outage
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")

SETS = ("retry", "schedule")
INITIAL_WAIT = 10
BATCH = 500  # due jobs promoted per script call
#: Fewest seconds between two sweeps, however much is due.
MIN_GAP = 0.5
#: With several processes, a sweep for a due time starts up to this much after it, at random,
#: so that the first one awake usually moves everything and the others find little.
DUE_JITTER = 0.2


def plan_wait(now: float, usual: float, next_due: float | None, since_sweep: float, jitter: float = 0.0) -> float:
    """Seconds to sleep: the usual interval, or less when something is due sooner.

    ``now`` and ``next_due`` are epoch seconds (``next_due`` None: nothing scheduled);
    ``since_sweep`` is how long ago the last sweep ended. A wait for a due time is
    never shorter than what keeps sweeps ``MIN_GAP`` apart.
    """
    if next_due is None:
        return usual
    until_due = max(next_due - now, 0.0) + jitter
    return min(usual, max(until_due, MIN_GAP - since_sweep))


class _DueLoop(TimerLoop):
    """A :class:`TimerLoop` whose current sleep can be cut short to an earlier deadline."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: float | None = None

    def _wait(self, seconds: float) -> bool:
        with self._cond:
            self._deadline = time.monotonic() + seconds
            while not self._done:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._deadline = None
            return not self._done

    def wake_by(self, deadline: float) -> bool:
        """End the current sleep at ``deadline`` (monotonic) if that is sooner; True if it moved."""
        with self._cond:
            if self._deadline is None or deadline >= self._deadline:
                return False
            self._deadline = deadline
            self._cond.notify_all()
            return True


def queues_of(members: list[bytes]) -> set[bytes]:
    """The queue names of the due ``members`` that are jobs (a member that is not is buried by
    the script, which needs no key of a queue for it)."""
    names = set()
    for raw in members:
        try:
            job = payload.loads(raw)
        except Exception:  # not JSON: the script buries it
            continue
        queue = job.get("queue") if isinstance(job, dict) else None
        if isinstance(queue, str) and queue:
            names.add(queue.encode())
    return names


def promote_keys(queues: list[bytes]) -> list[bytes]:
    """``promote_due.lua``'s keys of each queue, in order: its list and its wake-up list."""
    queue_prefix, wake_prefix = keys.QUEUE_PREFIX.encode(), keys.wake("").encode()
    return [key for name in queues for key in (queue_prefix + name, wake_prefix + name)]


def _stamp(config: Config | None, at: float) -> str:
    """The ``enqueued_at`` the promote script writes, as JSON number text in the configured unit."""
    wire = config.wire_format if config is not None else payload.SIDEKIQ8
    return repr(wire.at(at))


class Scheduler:
    def __init__(self, config: Config, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._rng = random.Random()
        self._clock = clock
        self._monotonic = monotonic
        first = self._rng.random() * 5
        if config.poll_interval_average is None:
            first += INITIAL_WAIT
        self.loop = _DueLoop("scheduler", self.tick, self.interval, first_wait=first)
        self._pruned = False
        self._swept_at = monotonic()
        self._processes = 1
        self._listening: Any = None  # this scheduler's place on the process's subscription

    def start(self) -> None:
        self.loop.start()
        if self._listening is None:
            db = pools.database_of(get_redis(config=self.config))
            self._listening = subscriber.for_config(self.config).listen(schedule_wake_channel(db),
                                                                         self._heard_message)

    def terminate(self) -> None:
        self.loop.terminate()
        listening, self._listening = self._listening, None
        if listening is not None:
            subscriber.for_config(self.config).leave(listening)

    def tick(self) -> None:
        if not self._pruned:
            self._pruned = True
            self._prune_processes()
        try:
            self.enqueue_due()
        finally:
            self._swept_at = self._monotonic()

    def enqueue_due(self, now: float | None = None) -> int:
        """Move every job due by ``now`` onto its queue; returns how many moved.

        Each call of the promote script takes up to ``BATCH`` due jobs out of the
        set and pushes them in the same atomic step, so a worker dying mid-sweep
        loses nothing and two workers never push one job twice.
        """
        clustered = cluster_for(self.config)
        if clustered is not None:
            return self._enqueue_due_per_queue(clustered, now)
        redis = get_redis(config=self.config)
        promote = script(redis, "promote_due")
        moved = 0
        for name in SETS:
            queues: set[bytes] = set()
            while not self.loop.done:
                at = now if now is not None else time.time()
                score = payload.score(at)
                # The script takes every key in KEYS: the due jobs' queues are read first (a
                # round trip that, with nothing due, replaces the script's).
                due = redis.zrange(name, "-inf", score, byscore=True, offset=0, num=BATCH)
                if not due:
                    break
                queues |= queues_of(due)
                named = sorted(queues)
                taken, buried, members, missing = promote(
                    keys=[name, keys.QUEUES, keys.DEAD, *promote_keys(named)],
                    args=[score, _stamp(self.config, at), BATCH, *wake_args(), *named])
                moved += self._promoted(int(taken), int(buried), members, name, None)
                if missing:
                    queues |= set(missing)  # due meanwhile: the next call names their keys
                    continue
                if int(taken) < BATCH:
                    break
        return moved

    def _promoted(self, taken: int, buried: int, members: list, name: str, redis: Any) -> int:
        """How many of the ``taken`` members a promote script moved were pushed; its ``buried``
        ``members`` are told to the death path."""
        if buried:
            logger.error("%d due job(s) in %s were not valid job JSON; moved them to the dead set", buried, name)
        for raw in members:
            # The script stored them in the same step; the death path tells the handlers.
            death.die(None, InvalidJob(f"a due job in {name} is not valid job JSON"),
                      reason=death.SCHEDULER, config=self.config, redis=redis, raw=raw, stored=True)
        return taken - buried

    def _enqueue_due_per_queue(self, redis: Any, now: float | None) -> int:
        """On a Redis Cluster (issue 46): each queue of the queue set has its own ``schedule``
        and ``retry`` sets in its slot; one declared-keys script per set and batch moves its
        due jobs onto that queue (``lua/promote_queue.lua``)."""
        promote = lua("promote_queue")
        moved = 0
        for queue in sorted(member.decode() for member in redis.smembers(CLUSTER.queues)):
            for name in (CLUSTER.retry(queue), CLUSTER.schedule(queue)):
                while not self.loop.done:
                    at = now if now is not None else time.time()
                    taken, buried, *members = promote(
                        redis, keys=[name, CLUSTER.queue(queue), CLUSTER.dead(queue), CLUSTER.wake(queue)],
                        args=[payload.score(at), _stamp(self.config, at), BATCH, *wake_args()])
                    moved += self._promoted(int(taken), int(buried), members, name, redis)
                    if int(taken) < BATCH:
                        break
        return moved

    def usual_interval(self, count: int) -> float:
        """About one poll per average interval across all processes (CORE-148)."""
        average = self.config.poll_interval_average or count * self.config.average_scheduled_poll_interval
        if count < 10:
            return average * self._rng.random() + average / 2
        return average * self._rng.random() * 2

    def interval(self) -> float:
        """The sleep after a sweep: the usual interval, or until the earliest due entry."""
        next_due = None
        try:
            replies = send_commands(get_redis(config=self.config), [
                ("SCARD", keys.PROCESSES), *(("ZRANGE", name, 0, 0, "WITHSCORES") for name in SETS)])
            self._processes = max(int(replies[0]), 1)
            scores = [float(r[1]) for r in replies[1:] if r]
            next_due = min(scores) if scores else None
        except Exception as exc:
            # Without the read the sleep is the usual interval. An outage is reported by
            # the sweep itself; anything else is said here, not swallowed.
            if not is_outage(exc):
                logger.warning("scheduler: could not read the earliest due time (%s: %s); "
                               "sleeping the usual interval", type(exc).__name__, exc)
        return plan_wait(self._clock(), self.usual_interval(self._processes), next_due,
                         self._monotonic() - self._swept_at, self._jitter())

    def _jitter(self) -> float:
        return self._rng.random() * DUE_JITTER if self._processes > 1 else 0.0

    def heard(self, score: float) -> bool:
        """An entry due at ``score`` (epoch seconds) was just pushed: wake for it if that is
        sooner than the current sleep (never sooner than ``MIN_GAP`` after the last sweep)."""
        now = self._monotonic()
        wait = max(score - self._clock(), 0.0) + self._jitter()
        wait = max(wait, MIN_GAP - (now - self._swept_at))
        return self.loop.wake_by(now + wait)

    def _heard_message(self, data: bytes) -> None:
        try:
            score = float(data)
        except (ValueError, TypeError):
            return  # not a score: somebody else's message
        self.heard(score)

    def _prune_processes(self) -> None:
        try:
            prune_processes(get_redis(config=self.config))
        except Exception as exc:
            if not is_outage(exc):
                logger.exception("could not prune the processes set")
                return
            self._pruned = False  # try again at the next tick; the loop reports the outage once
            raise
