"""The reaper: brings jobs back from the private lists of dead processes (PRO-136..141, RUN-142).

Every ``SUPER_FETCH_REAPER_INTERVAL`` seconds one process in the cluster (an
``NX`` lock) sweeps the private lists of the queues it serves, and once an
hour one sweeps every private list. At boot each process sweeps its own queues
without the lock, so a killed sibling's jobs come back as soon as a
replacement starts.

An owner is dead when:

1. it ran on this host with our nonce (a fork sibling): its pid no longer exists;
2. otherwise: its identity hash has no ``info`` (heartbeats lapse after 60 s);
   a list judged dead this way must also have been idle for
   ``REAPER_ORPHAN_GRACE`` seconds, so a booting owner that fetched before its
   first heartbeat is left alone;
3. on this host with another nonce (a restarted worker): its pid no longer
   exists and its last beat is older than two beat intervals — a shortcut
   over the 60 s TTL, safe because a live process beats every 10 s.
"""

from __future__ import annotations

import logging
import os
import time

import redis as redis_lib

from .. import poison, signals
from ..connection import get_redis
from ..scripts import script
from .heartbeat import BEAT_INTERVAL
from .state import NONCE, hostname
from .threads import spawn
from .timer import TimerLoop

logger = logging.getLogger("wurk_django.worker")

LOCK = "super_fetch:reaper"
FULL_LOCK = "super_fetch:reaper:full"
FULL_INTERVAL = 3600
STALE_BEAT = 2 * BEAT_INTERVAL


def parse_private(key: str) -> tuple[str, str, int, str | None] | None:
    """``queue:<q>|<host>|<pid>|<nonce>|<idx>`` (or the legacy form without nonce)
    -> (public key, host, pid, nonce); parsed from the right so a ``|`` inside a
    queue name survives (PRO-112)."""
    parts = key.split("|")
    if len(parts) < 4 or not parts[-1].isdigit():
        return None
    if len(parts) >= 5 and parts[-3].isdigit():
        public = "|".join(parts[:-4])
        if public.startswith("queue:") and len(public) > len("queue:"):
            return public, parts[-4], int(parts[-3]), parts[-2]
    if parts[-2].isdigit():
        public = "|".join(parts[:-3])
        if public.startswith("queue:") and len(public) > len("queue:"):
            return public, parts[-3], int(parts[-2]), None
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Reaper:
    def __init__(self, queue_names: list[str], interval: float = 60, grace: float = 30) -> None:
        self.queue_names = queue_names
        self.interval = interval
        self.grace = grace
        self.loop = TimerLoop("wurk-reaper", self.tick, lambda: self.interval, first_wait=interval)
        self.boot_thread = None

    def start(self) -> None:
        self.loop.start()
        self.boot_thread = spawn("boot-reclaim", self.boot_sweep)

    def stop(self) -> None:
        self.loop.stop()
        if self.boot_thread is not None:
            self.boot_thread.join(5)

    def boot_sweep(self) -> int:
        try:
            return self.sweep(full=False)
        except redis_lib.RedisError as exc:
            logger.warning("boot reclaim skipped, Redis unavailable: %s", exc)
            return 0

    def tick(self) -> None:
        redis = get_redis()
        if redis.set(LOCK, 1, nx=True, ex=max(int(self.interval), 1)):
            self.sweep(full=False)
        if redis.set(FULL_LOCK, 1, nx=True, ex=FULL_INTERVAL):
            self.sweep(full=True)

    def sweep(self, full: bool) -> int:
        """Reclaim every orphaned private list; returns how many jobs moved."""
        redis = get_redis()
        live = self._live_owners(redis)
        patterns = ["queue:*|*"] if full else [f"queue:{name}|*" for name in self.queue_names]
        moved = 0
        for pattern in patterns:
            for key in redis.scan_iter(match=pattern, count=1000 if full else 100):
                name = key.decode() if isinstance(key, bytes) else key
                parsed = parse_private(name)
                if parsed is None:
                    continue
                public, host, pid, nonce = parsed
                if self._alive(redis, name, host, pid, nonce, live):
                    continue
                moved += self.drain(name, public)
        return moved

    def _live_owners(self, redis: redis_lib.Redis) -> dict[str, float]:
        """identity (and its ``host:pid`` prefix) -> last beat, for identities with ``info``."""
        members = [m.decode() for m in redis.smembers("processes")]
        if not members:
            return {}
        pipe = redis.pipeline(transaction=False)
        for identity in members:
            pipe.hmget(identity, "info", "beat")
        live: dict[str, float] = {}
        for identity, (info, beat) in zip(members, pipe.execute(), strict=True):
            if info is None:
                continue
            beat_at = float(beat) if beat else time.time()
            live[identity] = beat_at
            live[identity.rsplit(":", 1)[0]] = beat_at
        return live

    def _alive(self, redis: redis_lib.Redis, key: str, host: str, pid: int, nonce: str | None,
               live: dict[str, float]) -> bool:
        same_host = host == hostname()
        if same_host and nonce == NONCE:
            return _pid_alive(pid)
        owner = f"{host}:{pid}:{nonce}" if nonce else f"{host}:{pid}"
        beat = live.get(owner)
        if beat is not None:
            if same_host and not _pid_alive(pid) and time.time() - beat > STALE_BEAT:
                return False
            return True
        if self.grace > 0:
            idle = redis.object("idletime", key)
            if idle is not None and idle < self.grace:
                return True
        return False

    def drain(self, private: str, public: str) -> int:
        """Give every job back to the fetch end of its queue, counting the recovery (PRO-141).

        The poison verdict comes *before* the job is visible on its queue:
        pushed first, a poison pill would be fetched by a waiting thread and
        take that worker down before the check could stop it. The job is
        peeked, counted, then moved (or buried, then removed) — at every step
        it sits in at least one list, so a crash mid-drain loses nothing.
        """
        redis = get_redis()
        queue = public[len("queue:"):]
        requeue = script(redis, "reliable_requeue")
        moved = 0
        while True:
            try:
                raw = redis.lindex(private, -1)
                if raw is None:
                    break
                pill = poison.track(raw, queue, redis)
                if pill is not None:
                    poison.bury_pill(pill, raw)
                    redis.lrem(private, 1, raw)
                else:
                    requeue(keys=[private, public], args=[raw])
                moved += 1
            except Exception:
                logger.exception("reclaim of %s stopped after %d job(s); the next sweep resumes", private, moved)
                return moved
        if moved:
            logger.warning("recovered %d job(s) from %s, whose process is gone", moved, private)
            signals.send(signals.jobs_recovered, "reaper", queue=queue, count=moved)
        return moved
