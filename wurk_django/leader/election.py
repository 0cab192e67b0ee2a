"""Cluster leader election on the ``dear-leader`` key (Sidekiq Enterprise's layout).

One process of the cluster holds ``dear-leader`` (its identity, with a TTL);
it renews the lock well inside the TTL, the others try again now and then.
Work only one process may do (firing cron loops, rollups) asks
:meth:`Leader.is_leader` first. This is best effort, not consensus: after a
handover two processes can both believe they lead for a few seconds (the
answer is cached), so leader-only work must be idempotent on its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import context, signals
from ..redis.cluster_layout import layout_of
from ..redis.connection import engine_client
from ..redis.layout_client import one_slot
from ..redis.scripts import lua
from ..reporting import report
from ..server.state import identity as process_identity
from ..server.timer import JOIN_TIMEOUT, TimerLoop
from ..text import to_text

logger = logging.getLogger("wurk_django.worker")

TTL = 30.0  # seconds the lock lives without a renewal
RENEW_INTERVAL = 15.0  # a leader renews this often: two chances per TTL
FOLLOWER_INTERVAL = 60.0  # a follower checks this often whether the lock is free
INITIAL_WAIT = 1.0  # the first campaign waits this long, so boot spends its first round trips on jobs
CACHE_TTL = 5.0  # is_leader() answers from memory for this long
OPT_OUT_ENVS = ("WURK_LEADER", "SIDEKIQ_LEADER")
THREAD_NAME = "wurk-leader"


def opted_out(environ: Any = None) -> bool:
    """True when ``WURK_LEADER`` (or Sidekiq's ``SIDEKIQ_LEADER``) is ``false``: this
    process never campaigns (hot-standby pools)."""
    environ = os.environ if environ is None else environ
    return any(str(environ.get(name, "")).strip().lower() == "false" for name in OPT_OUT_ENVS)


class Leader:
    """Campaigns for ``dear-leader`` on its own thread while started.

    Intervals are constructor arguments so tests (and unusual deployments)
    can shrink them; the defaults are Sidekiq Enterprise's.
    """

    def __init__(self, config: Any = None, *, identity: str | None = None, ttl: float = TTL,
                 renew_interval: float = RENEW_INTERVAL, follower_interval: float = FOLLOWER_INTERVAL,
                 initial_wait: float = INITIAL_WAIT, cache_ttl: float = CACHE_TTL,
                 redis: Any = None, disabled: bool | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        for name, value in (("ttl", ttl), ("renew_interval", renew_interval),
                            ("follower_interval", follower_interval)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Leader {name} must be seconds > 0, not {value!r}")
        if renew_interval >= ttl:
            raise ValueError(f"Leader renew_interval ({renew_interval}) must be shorter than ttl ({ttl}), "
                             "or the lock lapses between renewals")
        self.config = config
        self.identity = identity or process_identity()
        self.ttl = float(ttl)
        self.renew_interval = float(renew_interval)
        self.follower_interval = float(follower_interval)
        self.initial_wait = max(float(initial_wait), 0.0)
        self.cache_ttl = max(float(cache_ttl), 0.0)
        self.disabled = opted_out() if disabled is None else disabled
        self._redis = redis
        self._monotonic = monotonic
        self._held = False
        # The campaign runs on a TimerLoop: first campaign after initial_wait, then every
        # renew_interval while leading or follower_interval while following.
        self._loop = TimerLoop(THREAD_NAME, self._campaign_tick, self._next_wait, first_wait=self.initial_wait)
        #: The fencing token of the current term (``INCR leader-token`` at promotion), or None.
        self.token: int | None = None
        #: When (epoch seconds) this process last became leader, or None.
        self.since: float | None = None
        self._cached: tuple[float, bool] | None = None
        self._listeners: list[Callable[[Leader], None]] = []

    # -- what others ask ---------------------------------------------------------------

    @property
    def held(self) -> bool:
        """Whether the campaign thread believes it holds the lock right now (no Redis call)."""
        return self._held

    def is_leader(self) -> bool:
        """Whether ``dear-leader`` names this process, cached for ``cache_ttl`` seconds.

        False when opted out and on any Redis error: doing leader-only work twice
        is guarded elsewhere, not doing it for a moment is harmless.
        """
        if self.disabled:
            return False
        now = self._monotonic()
        cached = self._cached
        if cached is not None and now - cached[0] < self.cache_ttl:
            return cached[1]
        try:
            redis = self.redis
            current = redis.get(layout_of(redis).leader)
            answer = current is not None and to_text(current) == self.identity
        except Exception:
            answer = False
        self._cached = (now, answer)
        return answer

    def on_elected(self, listener: Callable[[Leader], None]) -> None:
        """Call ``listener(leader)`` on this process's campaign thread each time it becomes leader."""
        self._listeners.append(listener)

    @property
    def redis(self):
        """The given client, else the engine's for this config (a ``RedisCluster`` on a
        cluster: the lock, token and info are then the ``{leader}`` slot's keys)."""
        return self._redis if self._redis is not None else engine_client(context.config(self.config))

    # -- one campaign step -------------------------------------------------------------

    def campaign(self) -> bool:
        """Take the lock if free, extend it if ours; returns whether we hold it."""
        redis = self.redis
        won = bool(lua("leader/lua/campaign")(redis, [layout_of(redis).leader],
                                              [self.identity, int(self.ttl * 1000)]))
        # The answer is cached before the election listeners run: the periodic poller's
        # listener wakes its thread to fire at once, and that thread asks is_leader(). With
        # the follower's "no" still cached it would skip the tick and wait a whole minute.
        self._cached = (self._monotonic(), won)
        if won and not self._held:
            self._promoted()
        elif won:
            self._keep_info()
        elif not won and self._held:
            logger.warning("leader: %s lost the lock to another process", self.identity)
            self._held = False
            self.token = None
            self.since = None
        return won

    def _promoted(self) -> None:
        # Held first: whatever fails below, the lock is ours and must be renewed on the leader's cadence.
        self._held = True
        self.since = time.time()
        redis = self.redis
        where = layout_of(redis)
        try:
            self.token = int(redis.incr(where.leader_token))
            # One slot ({leader}) on a cluster: its primary's plain client runs the MULTI, since
            # redis-py's cluster pipelines have no transactions in every version we support.
            pipe = one_slot(redis, where.leader_info).pipeline(transaction=True)
            pipe.hset(where.leader_info, mapping={"identity": self.identity, "since": repr(self.since),
                                                  "token": self.token})
            pipe.pexpire(where.leader_info, int(self.ttl * 1000))
            pipe.execute()
        except Exception:
            logger.exception("leader: could not record this term (fencing token %s)", self.token)
        logger.info("leader: %s is now the cluster leader (term %s)", self.identity, self.token)
        for listener in [*self._listeners, _send_signal]:
            try:
                listener(self)
            except Exception as exc:  # a listener never takes leadership away
                report(exc, {"context": "leader_elected listener failed"}, self.config)

    def _keep_info(self) -> None:
        # The term record lives as long as the lock, so no stale record outlives a leader.
        try:
            redis = self.redis
            redis.pexpire(layout_of(redis).leader_info, int(self.ttl * 1000))
        except Exception:
            logger.debug("leader: could not extend leader-info", exc_info=True)

    def release(self) -> bool:
        """Give the lock up if we still own it (a compare-and-delete on the server)."""
        released = False
        try:
            redis = self.redis
            released = bool(lua("leader/lua/release_if_owner")(redis, [layout_of(redis).leader], [self.identity]))
        except Exception:
            logger.exception("leader: could not release the lock; it lapses within %ss", self.ttl)
        if released:
            logger.info("leader: %s stepped down", self.identity)
        self._held = False
        self.token = None
        self.since = None
        self._cached = None
        return released

    # -- the campaign thread -------------------------------------------------------------

    def start(self) -> threading.Thread | None:
        """Start campaigning (idempotent; nothing when opted out)."""
        if self.disabled:
            logger.info("leader: WURK_LEADER=false, this process never leads")
            return None
        return self._loop.start()

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        """Stop campaigning and release the lock, so another process leads at once.

        The join is bounded: a campaign stuck on a wedged Redis must not hold the
        shutdown open, and the loop keeps a straggler referenced, so a later
        ``start()`` cannot run a second campaigner beside it.
        """
        self._loop.stop(timeout)
        if not self.disabled:
            self.release()

    def _campaign_tick(self) -> None:
        try:
            self.campaign()
        except Exception as exc:
            report(exc, {"context": "leader campaign failed"}, self.config)

    def _next_wait(self) -> float:
        return self.renew_interval if self._held else self.follower_interval


def _send_signal(leader: Leader) -> None:
    signals.send(signals.leader_elected, Leader, identity=leader.identity, token=leader.token, leader=leader)
