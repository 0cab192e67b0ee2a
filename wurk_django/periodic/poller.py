"""The periodic poller: every worker runs one; only the cluster's leader fires loops.

Each tick (about once a minute, just after the minute turns) the leader walks
the registered loops. A loop whose next-fire mark is due is *claimed* with a
compare-and-swap script on its marks, then enqueued. Two processes that both
believe they lead (the leader check is cached for a few seconds, so this
happens around a handover) read the same mark, but only one swaps it: a tick
fires once. Ticks missed while nobody led are not made up: a loop that came
due fires once when a leader is back, and the miss is logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import context
from ..client.push import Client
from ..redis.cluster_layout import layout_of
from ..redis.connection import engine_client
from ..redis.layout_client import one_slot
from ..redis.scripts import lua
from ..server.outage import OutageLog, is_outage
from ..server.threads import spawn
from ..server.timer import JOIN_TIMEOUT
from ..text import to_text
from . import loops, registration
from .clock import Clock
from .loops import Loop, LoopSet

logger = logging.getLogger("wurk_django.periodic")

INTERVAL = 60.0  # seconds between ticks (ticks land just after each minute turns)
FIRST_WAIT = 60.0  # the first tick waits this long (the leader is known by then)
TICK_OFFSET = 1.0  # seconds after the minute a tick runs, so a slot on the minute is due
MISSED_AFTER = 90  # a fire this late is logged as a missed tick


class Poller:
    """The periodic poller of one worker process (a launcher component)."""

    def __init__(self, config: Any, *, leader: Any = None, entries: Any = None, clock: Clock | None = None,
                 redis: Any = None, first_wait: float = FIRST_WAIT, interval: float = INTERVAL) -> None:
        self.config = config
        self._leader = leader
        self.entries = entries if entries is not None else config.periodic
        self.clock = clock or Clock()
        self._redis = redis
        self.first_wait = first_wait
        self.interval = interval
        self.client = Client(config=config)
        self._cond = threading.Condition()
        self._done = False
        self._woken = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.registered = False
        self._leading = False
        # A Redis outage is one line when it starts and one when it ends, like every
        # other component's, not a traceback a minute.
        self.outage = OutageLog("periodic", "; trying again next minute")

    @property
    def redis(self):
        """The given client, else the engine's (a ``RedisCluster`` on a cluster, where each
        loop's marks and history are its ``{loop:<lid>}`` slot's)."""
        return self._redis if self._redis is not None else engine_client(self.config)

    def leader(self):
        if self._leader is not None:
            return self._leader
        from ..leader import current

        return current()

    def is_leader(self) -> bool:
        lead = self.leader()
        return bool(lead is not None and lead.is_leader())

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> threading.Thread:
        with self._lock:
            if self._thread is not None:
                return self._thread
            with self._cond:
                self._done = False
            lead = self.leader()
            if lead is not None and hasattr(lead, "on_elected"):
                # A new leader ticks at once, so a slot that came due during the
                # handover fires now rather than a minute late.
                lead.on_elected(lambda _leader: self.wake())
            self._thread = spawn("periodic", self._run)
            return self._thread

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                self._thread = None

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def _wait(self, seconds: float) -> bool:
        deadline = time.monotonic() + self.clock.real_seconds(max(seconds, 0.0))
        with self._cond:
            while not self._done and not self._woken:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._woken = False
            return not self._done

    def _next_wait(self) -> float:
        """Clock seconds to just after the next minute turns."""
        now = self.clock.now()
        return self.interval - (now % self.interval) + TICK_OFFSET

    def _run(self) -> None:
        self._register()
        if not self._wait(self.first_wait):
            return
        while True:
            self._guarded_tick()
            if not self._wait(self._next_wait()):
                return

    def _guarded_tick(self) -> None:
        """One tick of the thread: nothing it raises stops the poller."""
        try:
            if not self.registered:
                self._register()
            self.tick()
        except Exception as exc:
            if is_outage(exc):
                self.outage.failed(exc)
            else:
                logger.exception("periodic: tick failed; trying again next minute")
        else:
            self.outage.succeeded()

    def _register(self) -> None:
        try:
            registration.boot(self.entries, self.redis)
            self.registered = True
        except Exception as exc:
            if is_outage(exc):
                self.outage.failed(exc)
                return
            logger.exception("periodic: could not register loops; trying again at the next tick")

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> list[str]:
        """Fire every due loop if this process leads; returns the jids pushed."""
        leading = self.is_leader()
        if leading != self._leading:
            self._leading = leading
            logger.info("periodic: this process %s", "leads: it fires periodic jobs now" if leading
                        else "no longer leads: another process fires periodic jobs")
        if not leading:
            return []
        fired = []
        for loop in LoopSet(self.redis):
            if self._done:
                break
            try:
                jid = self.step(loop)
            except Exception as exc:
                if is_outage(exc):
                    raise  # the rest of the tick would fail the same way: one outage line
                logger.exception("periodic: loop %s (%s) failed this tick", loop.lid, loop.klass)
                continue
            if jid is not None:
                fired.append(jid)
        return fired

    def step(self, loop: Loop) -> str | None:
        """Fire ``loop`` if its slot is due and this process wins the claim."""
        if loop.paused:
            return None
        now = int(self.clock.now())
        redis = self.redis
        key = layout_of(redis).loop(loop.lid)
        lf_raw, nf_raw = (to_text(v) for v in redis.hmget(key, "lf", "nf"))
        # Ruby wurk writes both as integer seconds, but "" for an exhausted schedule
        # (and a hand edit may leave "1736157600.0"): read leniently, claim on the bytes.
        slot = loops.parse_mark(nf_raw)
        if slot is None:
            last = loops.parse_mark(lf_raw)
            slot = loop.next_fire_at(last if last is not None else now - 60)
        if slot is None or slot > now:
            return None
        if now - slot > MISSED_AFTER:
            logger.warning("[cron] missed tick lid=%s klass=%s expected_at=%d fired_at=%d drift=%ds",
                           loop.lid, loop.klass, slot, now, now - slot)
        future = loop.next_fire_at(now)
        claimed = lua("periodic/lua/claim_fire")(
            redis, [key], [nf_raw or str(slot), str(now), "" if future is None else str(future)])
        if not claimed:
            # Only around a leader handover: another process that also believed it led took the slot.
            logger.info("periodic: loop %s slot %d was fired by another process", loop.lid, slot)
            return None
        if future is None:
            logger.info("periodic: loop %s (%s) has no further fire time", loop.lid, loop.klass)
        return self._enqueue(loop, now)

    def _enqueue(self, loop: Loop, fired_at: int) -> str | None:
        try:
            jid = self.client.push(loop.job_item())
        except Exception as exc:
            # The slot is claimed: retrying could fire it twice, so this fire is lost.
            logger.error("periodic: loop %s claimed its slot but could not enqueue %s; this fire is lost: %s",
                         loop.lid, loop.klass, exc, exc_info=None if is_outage(exc) else exc)
            return None
        try:
            loops.record_fire(loop.lid, fired_at, jid, redis=self.redis)
        except Exception:
            logger.exception("periodic: could not record the fire of loop %s", loop.lid)
        return jid


def fire(lid: str, *, config: Any = None, clock: Callable[[], float] = time.time, redis: Any = None) -> str | None:
    """Fire a loop now, whoever leads and whether or not it is due: enqueue, record
    the fire in its history and move its marks as a tick would. Returns the jid,
    or None for an unknown lid."""
    config = context.config(config)
    redis = redis or engine_client(config)
    loop = LoopSet(redis).fetch(lid)
    if loop is None:
        return None
    now = int(clock())
    jid = Client(config=config).push(loop.job_item())
    future = loop.next_fire_at(now)
    key = layout_of(redis).loop(lid)
    pipe = one_slot(redis, key).pipeline(transaction=True)  # a cluster's MULTI: on the slot's primary
    pipe.hset(key, "lf", str(now))
    if future is None:
        pipe.hdel(key, "nf")
    else:
        pipe.hset(key, "nf", str(future))
    pipe.execute()
    loops.record_fire(lid, now, jid, redis=redis)
    return jid


def enqueue_now(lid: str, *, config: Any = None, redis: Any = None) -> str | None:
    """Push a loop's job once, leaving its marks and history alone (the dashboard's
    "Enqueue now"). Returns the jid, or None for an unknown lid."""
    config = context.config(config)
    loop = LoopSet(redis or engine_client(config)).fetch(lid)
    if loop is None:
        return None
    return Client(config=config).push(loop.job_item())
