"""Heartbeat: this process's entry in Redis, refreshed every 10 s (CORE-150..154, RUN-141).

Each beat flushes the stat counters, then in one MULTI rewrites the
``<identity>:work`` hash (and its Sidekiq 6 copy ``<identity>:workers`` with
``WIRE_FORMAT`` 6 or 7), refreshes the ``<identity>`` hash and the
``processes`` set, and pops pending dashboard signals from ``<identity>-signals``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis as redis_lib

from .. import __version__, keys
from ..conf import Config
from ..fleet import RUNTIME  # the ``runtime`` of our processes' ``info``; Sidekiq and Ruby wurk write none
from ..redis.connection import get_redis, trim_idle
from ..redis.eviction import EvictionWatch
from . import events, pidspace
from .fetch import slot as fetch_slot
from .outage import OutageLog, is_outage
from .proctitle import set_title
from .state import EXPIRED, WorkerState, hostname
from .stopping import revocations

logger = logging.getLogger("wurk_django.worker")

BEAT_INTERVAL = 10
TTL = 60
DAY_STATS_TTL = 5 * 365 * 24 * 3600
RTT_WARNING_US = 50_000
SIGNALS = ("TSTP", "TERM", "TTIN")


def rss_kb() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def flush_stats(state: WorkerState, config: Config | None = None) -> None:
    """Add the counters to ``stat:processed``/``stat:failed`` and today's keys (CORE-152),
    and the jobs skipped past their ``expires_in`` to ``stat:expired`` and its day key, which
    Ruby wurk writes and its dashboard reads (an expired job also counts as processed)."""
    processed, failed = state.take_counts()
    expired = EXPIRED.take()
    if not processed and not failed and not expired:
        return
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    pipe = get_redis(config=config).pipeline(transaction=False)
    for kind, count in (("processed", processed), ("failed", failed), ("expired", expired)):
        if not count and kind == "expired":
            continue  # a key Sidekiq does not know is written only once there is something in it
        pipe.incrby(keys.stat(kind), count)
        pipe.incrby(keys.stat_on(kind, day), count)
        pipe.expire(keys.stat_on(kind, day), DAY_STATS_TTL)
    pipe.execute()


class Heartbeat:
    def __init__(self, launcher: Any, on_signal: Callable[[str], None]) -> None:
        self.launcher = launcher
        self.state: WorkerState = launcher.state
        self.on_signal = on_signal
        self._info: bytes | None = None
        self._rtts: list[int] = []
        self._first = True
        # The `heartbeat` event is one-shot: it fires when this process appears in Redis,
        # and a failed beat arms it again (the entry may be gone by the next success).
        self._announce = True
        # Set once a beat has written this process into Redis: a worker tells systemd it is
        # ready only then, so "ready" means listed as well as fetching.
        self.listed = threading.Event()
        self._stats_outage = OutageLog("stat flush", "; counters are kept for the next beat")
        config = launcher.config
        # Redis's eviction policy and evicted_keys, read each beat: a growing count is logged
        # (issue 43 item 3), and the statsd gauges send it.
        self.evictions = EvictionWatch(config.redis_url, config.allow_eviction)

    def info(self) -> bytes:
        if self._info is None:
            config = self.launcher.config
            # One entry per capsule, as Sidekiq 7 writes them (CORE-076); the flat
            # ``queues`` and per-capsule ``weights`` list are for older readers.
            capsules = {manager.name: {"concurrency": manager.config.concurrency,
                                       "mode": manager.fetcher.order.mode,
                                       "weights": manager.fetcher.order.weights()}
                        for manager in self.launcher.managers}
            self._info = orjson.dumps({
                "hostname": hostname(),
                "started_at": self.launcher.started_at,
                "pid": os.getpid(),
                "tag": config.tag or "",
                "concurrency": self.launcher.concurrency,
                "capsules": capsules,
                "queues": list(dict.fromkeys(self.launcher.queue_names)),
                "weights": [capsule["weights"] for capsule in capsules.values()],
                "labels": config.labels,
                "identity": self.state.identity,
                "version": __version__,
                "embedded": self.launcher.embedded,
                # Not Sidekiq's: tells a mixed fleet's processes which entries are ours (fleet.py).
                "runtime": RUNTIME,
                # pid_scope and pid_started: a restarted process on this host judges by them
                # that this one is gone, without waiting for its beats to lapse (reaper.py).
                **pidspace.record(),
            })
        return self._info

    def beat(self) -> None:
        try:
            self._beat()
        except BaseException:
            self._announce = True
            raise

    def _beat(self) -> None:
        try:
            flush_stats(self.state, self.launcher.config)
        except Exception as exc:
            if is_outage(exc):
                self._stats_outage.failed(exc)
            else:
                logger.exception("could not flush stat counters")
        else:
            self._stats_outage.succeeded()
        key = self.state.identity
        config = self.launcher.config
        redis = get_redis(config=config)
        started = time.monotonic_ns()
        redis.ping()
        rtt_us = (time.monotonic_ns() - started) // 1000
        self._check_rtt(rtt_us)
        work = self.state.work_snapshot()
        pipe = redis.pipeline(transaction=True)
        # Sidekiq 6 reads the busy jobs from ``:workers``, 7 and 8 from ``:work``: the same values.
        names = (keys.work(key), keys.workers(key)) if config.wire_format.float_seconds else (keys.work(key),)
        pipe.unlink(*names)
        if work:
            for name in names:
                pipe.hset(name, mapping=work)
                pipe.expire(name, TTL)
        # The live revoke markers (revocations.py): a processor checks jobs against them. The
        # revoke channel brings new ones at once (revoke_channel.py); this read is the fallback.
        pipe.zrangebyscore(revocations.KEY, time.time(), "+inf")
        # Whether a crash of late named no job (fetch/slot.py, EXACT_WINDOW): then this
        # process names each job it starts until the key lapses.
        pipe.pttl(keys.EXACT_MARKS)
        pipe.sadd(keys.PROCESSES, key)
        pipe.exists(key)
        pipe.hset(key, mapping={
            "info": self.info(),
            "concurrency": self.launcher.concurrency,
            "busy": len(work),
            "beat": repr(time.time()),
            "quiet": "true" if self.launcher.quieting else "false",
            "rss": rss_kb(),
            "rtt_us": rtt_us,
        })
        pipe.expire(key, TTL)
        pipe.rpop(keys.signals_list(key), 10)
        read_at = time.monotonic()  # revokes heard on the channel from now on may be missing from this read
        try:
            replies = pipe.execute()
        except redis_lib.OutOfMemoryError:
            # A full Redis refuses the beat's writes but renews TTLs: keep this live
            # process's entry from lapsing, or other workers' reapers would take it for
            # dead and hand the jobs it is running to someone else.
            keep = redis.pipeline(transaction=False)
            for name in (key, *names):
                keep.expire(name, TTL)
            keep.execute()
            raise
        # Connections the process's threads opened at once and no longer use (a busy
        # spell, the boot) are closed: an idle worker holds a few, not one per thread.
        trim_idle()
        existed = replies[-4]
        self.listed.set()
        revocations.load(replies[-7], read_at)
        fetch_slot.heard_exact_window(replies[-6])
        if self._announce and not existed:
            self._announce = False
            events.fire("heartbeat", self.launcher)
        events.fire("beat", self.launcher)
        if not self.launcher.embedded:  # a web server's workers keep their own titles
            set_title(__version__, config.tag, len(work), self.launcher.concurrency, self.launcher.quieting)
        popped = replies[-1] or []
        for raw in popped:
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if name in SIGNALS:
                self.on_signal(name)
            elif name.startswith(revocations.COMMAND):
                revocations.command(name, config)
            else:
                logger.warning("ignoring unknown signal %r from the dashboard", name)
        self._check_evictions(redis)

    def _check_evictions(self, redis: redis_lib.Redis) -> None:
        # Never the beat's failure: the entry is written already, and a server that refuses
        # INFO (renamed away) only costs this reading.
        try:
            self.evictions.check(redis)
        except Exception as exc:
            logger.debug("could not read Redis INFO for evicted_keys: %s", exc)

    def _check_rtt(self, rtt_us: int) -> None:
        # A rolling window of the last five beats: five slow ones in a row warn wherever
        # they start; after a warning the count starts again so it is not repeated each beat.
        self._rtts = [*self._rtts[-4:], rtt_us]
        if len(self._rtts) == 5 and all(r > RTT_WARNING_US for r in self._rtts):
            logger.warning("Redis round trips are slow: last five %s µs", self._rtts)
            self._rtts = []

    def clear(self) -> None:
        """Remove this process from Redis after a clean stop (CORE-157)."""
        key = self.state.identity
        pipe = get_redis(config=self.launcher.config).pipeline(transaction=True)
        pipe.srem(keys.PROCESSES, key)
        pipe.unlink(key, keys.work(key), keys.workers(key))
        pipe.execute()
