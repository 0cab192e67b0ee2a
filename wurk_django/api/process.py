"""Live worker processes and what they are running (CORE-167..169)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from .. import keys, payload
from ..processes import prune_processes
from ..redis.cluster_layout import layout_of
from ..text import to_text
from ._base import RedisClient, cluster_aware, one_slot, to_float, to_int, utc
from .record import JobRecord

__all__ = ["ProcessSet", "Process", "WorkSet", "Workers", "Work", "EmbeddedProcessError"]

SIGNAL_TTL = 60  # seconds a signal waits for the next beat before it is dropped (CORE-060)
_HEARTBEAT_FIELDS = ("info", "concurrency", "busy", "beat", "quiet", "rss", "rtt_us")


class EmbeddedProcessError(RuntimeError):
    """Quiet/stop was asked of an embedded worker, which never acts on signals (CORE-160)."""


def _sorted_identities(redis: RedisClient) -> list[str]:
    return sorted(to_text(i) for i in redis.sscan_iter(layout_of(redis).processes))


class Process(dict):
    """One live worker process: its parsed ``info`` merged with the heartbeat fields.

    Dict access gives every field (``hostname``, ``pid``, ``started_at``,
    ``busy``, ``beat``, ``rss``, ...).
    """

    def __init__(self, data: dict, redis: RedisClient | None = None, leader: str | None = None) -> None:
        super().__init__(data)
        self._redis = redis
        self._leader = leader

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    @property
    def identity(self) -> str:
        return str(self.get("identity", ""))

    @property
    def tag(self) -> str:
        return self.get("tag") or ""

    @property
    def labels(self) -> list:
        return list(self.get("labels") or [])

    @property
    def version(self) -> str | None:
        return self.get("version")

    @property
    def embedded(self) -> bool:
        return bool(self.get("embedded"))

    @property
    def capsules(self) -> dict:
        return self.get("capsules") or {}

    @property
    def queues(self) -> list[str]:
        """Queue names across all capsules; older processes only list ``queues``."""
        if self.capsules:
            names: dict[str, None] = {}
            for capsule in self.capsules.values():
                for name in (capsule or {}).get("weights") or {}:
                    names[name] = None
            return list(names)
        return list(self.get("queues") or [])

    @property
    def weights(self) -> list[dict]:
        """Per-capsule ``{queue: weight}`` maps (the deprecated ``weights`` field if present)."""
        if self.get("weights") is not None:
            return list(self["weights"])
        return [(capsule or {}).get("weights") or {} for capsule in self.capsules.values()]

    @property
    def stopping(self) -> bool:
        """True once the process is quiet (it finishes its jobs and fetches no more)."""
        return self.get("quiet") == "true"

    @property
    def leader(self) -> bool:
        """Whether Enterprise's ``dear-leader`` key names this process (core only reads it)."""
        current = self._leader if self._leader is not None else _leader(self.redis)
        return bool(current) and current == self.identity

    @property
    def started_at(self) -> datetime | None:
        started = self.get("started_at")
        return utc(float(started)) if isinstance(started, (int, float)) else None

    def quiet(self) -> None:
        """Ask the process to stop fetching jobs (``TSTP``); acts at its next beat (≤ 10 s)."""
        self._refuse_embedded("quiet")
        self._signal("TSTP")

    def stop(self) -> None:
        """Ask the process to shut down (``TERM``); acts at its next beat (≤ 10 s)."""
        self._refuse_embedded("stop")
        self._signal("TERM")

    def dump_threads(self) -> None:
        """Ask the process to log every thread's stack (``TTIN``)."""
        self._signal("TTIN")

    def _refuse_embedded(self, action: str) -> None:
        if self.embedded:
            raise EmbeddedProcessError(f"cannot {action} embedded process {self.identity}: "
                                       "its host application controls its lifecycle")

    def _signal(self, sig: str) -> None:
        redis = self.redis
        key = layout_of(redis).signals(self.identity)
        pipe = one_slot(redis, key).pipeline(transaction=True)
        pipe.lpush(key, sig)
        pipe.expire(key, SIGNAL_TTL)
        pipe.execute()


class ProcessSet:
    """The live processes. Built with ``clean=True`` it first prunes dead identities."""

    def __init__(self, clean: bool = True, redis: RedisClient | None = None) -> None:
        self._redis = redis
        if clean:
            self.cleanup()

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def cleanup(self) -> int:
        """Drop identities whose heartbeat hash has no ``info`` (the process died and its
        hash expired). At most once a minute cluster-wide via the ``process_cleanup``
        lock. Returns how many were removed. On a Redis Cluster the workers' reaper
        does this (:mod:`wurk_django.server.cluster_reaper`): 0 here."""
        redis = self.redis
        if layout_of(redis).cluster:
            return 0
        return prune_processes(redis)

    def __iter__(self) -> Iterator[Process]:
        """Processes sorted by identity; identities without ``info`` are skipped."""
        redis = self.redis
        layout = layout_of(redis)
        identities = _sorted_identities(redis)
        if not identities:
            return
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.hmget(layout.process(identity), *_HEARTBEAT_FIELDS)
        pipe.get(layout.leader)
        *rows, leader = pipe.execute()
        leader_id = to_text(leader) or ""
        for row in rows:
            info, concurrency, busy, beat, quiet, rss, rtt_us = row
            if info is None:
                continue
            try:
                data = payload.loads(info)
            except Exception:  # one corrupt heartbeat must not hide the others
                continue
            if not isinstance(data, dict):
                continue
            data.update({
                # 8.1.5+ keeps concurrency in the hash; older writers only had it in ``info``.
                "concurrency": to_int(concurrency) if concurrency is not None else to_int(data.get("concurrency")),
                "busy": to_int(busy),
                "beat": to_float(beat),
                "quiet": to_text(quiet),
                "rss": to_int(rss),
                "rtt_us": to_int(rtt_us),
            })
            yield Process(data, redis=self._redis, leader=leader_id)

    @property
    def size(self) -> int:
        """``SCARD processes``: may include a dead process until the next cleanup."""
        redis = self.redis
        return int(redis.scard(layout_of(redis).processes))

    def __len__(self) -> int:
        return self.size

    @property
    def total_concurrency(self) -> int:
        return sum(p.get("concurrency", 0) for p in self)

    @property
    def total_rss_in_kb(self) -> int:
        return sum(p.get("rss", 0) for p in self)

    total_rss = total_rss_in_kb

    @property
    def leader(self) -> str:
        """Identity of the Enterprise leader, or ``""``."""
        return _leader(self.redis)

    def get(self, identity: str) -> Process | None:
        for process in self:
            if process.identity == identity:
                return process
        return None


class Work:
    """One job running on one thread of one process (from ``<identity>:work``)."""

    def __init__(self, process_id: str, thread_id: str, data: dict) -> None:
        self.process_id = process_id
        self.thread_id = thread_id
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data.get(key)

    def __repr__(self) -> str:
        return f"<Work {self.process_id} {self.thread_id} {self.queue}>"

    @property
    def queue(self) -> str | None:
        return self._data.get("queue")

    @property
    def run_at(self) -> datetime | None:
        run_at = self._data.get("run_at")
        if isinstance(run_at, bool) or not isinstance(run_at, (int, float)):
            return None
        return utc(float(run_at))

    @property
    def payload(self) -> str | None:
        """The job JSON as a string (Sidekiq 6 stored an object: it is serialized)."""
        raw = self._data.get("payload")
        if isinstance(raw, dict):
            return payload.dumps(raw).decode("utf-8")
        return raw

    @property
    def job(self) -> JobRecord:
        raw = self._data.get("payload")
        return JobRecord(raw if isinstance(raw, dict) else (raw or ""), self.queue)


class WorkSet:
    """Every job running right now, as ``(identity, tid, Work)``, oldest start first.

    Built from the work hashes each process rewrites per beat, so it lags by up to
    one beat (10 s).
    """

    def __init__(self, redis: RedisClient | None = None) -> None:
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def __iter__(self) -> Iterator[tuple[str, str, Work]]:
        redis = self.redis
        layout = layout_of(redis)
        identities = _sorted_identities(redis)
        if not identities:
            return
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.hgetall(layout.work(identity))
            # Sidekiq 6's name: no Ruby process runs on a cluster (nor writes it there).
            if not layout.cluster:
                pipe.hgetall(keys.workers(identity))
        replies = pipe.execute()
        found: list[tuple[str, str, Work]] = []
        for n, identity in enumerate(identities):
            # A Sidekiq 6 process writes only ``:workers``; ours with WIRE_FORMAT 7 write both, the same.
            threads = (replies[n] if layout.cluster else replies[2 * n] or replies[2 * n + 1]) or {}
            for tid, raw in threads.items():
                if not raw:
                    continue
                try:
                    data = payload.loads(raw)
                except Exception:  # skip one corrupt entry, show the rest
                    continue
                if isinstance(data, dict):
                    found.append((identity, to_text(tid), Work(identity, to_text(tid), data)))
        found.sort(key=lambda row: _run_at_key(row[2]))
        yield from found

    @property
    def size(self) -> int:
        """Busy threads per the heartbeats (Σ ``busy``), cheaper than counting work entries."""
        redis = self.redis
        layout = layout_of(redis)
        identities = _sorted_identities(redis)
        if not identities:
            return 0
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.hget(layout.process(identity), "busy")
        return sum(to_int(busy) for busy in pipe.execute())

    def __len__(self) -> int:
        return self.size

    def find_work(self, jid: str) -> Work | None:
        """The running job with this jid, or ``None``."""
        for _identity, _tid, work in self:
            if work.job.jid == jid:
                return work
        return None


def _leader(redis: RedisClient) -> str:
    return to_text(redis.get(layout_of(redis).leader)) or ""


def _run_at_key(work: Work) -> float:
    run_at = work["run_at"]
    return float(run_at) if isinstance(run_at, (int, float)) and not isinstance(run_at, bool) else 0.0


# Sidekiq's older name for the same thing.
Workers = WorkSet
