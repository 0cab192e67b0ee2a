"""Periodic loops in Redis: the ``periodic`` set, ``loops:<lid>`` hashes and their fire history.

The layout is Sidekiq Enterprise's as Ruby wurk writes it, so Ruby and Python
processes share loops: a loop id (lid) is the first 16 hex characters of
``sha1("<schedule>|<class>|<options as Ruby JSON, keys sorted>")``, where the
options are every register option except the time zone. Registering the same
loop again rewrites the same keys, so booting is idempotent; ``paused`` is
only set when the hash has none, so a pause from the dashboard survives deploys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from .. import canonical, context
from ..redis.cluster_layout import layout_of
from ..text import to_text
from . import zones
from .schedule import gettext, parse

HISTORY_LENGTH = 25
#: Register options that describe the loop, not the job it pushes.
LOOP_ONLY_OPTIONS = ("tz", "paused", "label")


def lid_for(schedule: str, klass: str, options: dict[str, Any]) -> str:
    """The loop id: stable across processes and languages for the same registration."""
    ordered = {k: options[k] for k in sorted(options) if k != "tz"}
    digest = hashlib.sha1(f"{schedule}|{klass}|{canonical.dumps(ordered)}".encode()).hexdigest()
    return digest[:16]


@dataclass
class Loop:
    """One registered periodic job, as stored in ``loops:<lid>``."""

    lid: str
    schedule: str
    klass: str
    options: dict[str, Any] = field(default_factory=dict)
    tz: str = ""
    paused: bool = False
    last_fire: int | None = None  # ``lf``
    next_fire: int | None = None  # ``nf``
    #: Stored with ``options`` but outside the lid: the class's queue/retry for a Ruby
    #: leader's push, which reads only the stored options (periodic.config.ruby_push_defaults).
    push_defaults: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, schedule: str, klass: str, options: dict[str, Any], tz: str) -> Loop:
        ordered = {k: options[k] for k in sorted(options) if k != "tz"}
        return cls(lid_for(schedule, klass, ordered), schedule, klass, ordered, tz,
                   paused=bool(ordered.get("paused", False)))

    @classmethod
    def from_hash(cls, lid: str, data: dict[bytes | str, bytes | str]) -> Loop:
        text = {to_text(k): to_text(v) for k, v in data.items()}
        try:
            options = json.loads(text.get("options") or "{}")
        except ValueError:
            options = {}
        return cls(
            lid=lid,
            schedule=text.get("schedule", ""),
            klass=text.get("klass", ""),
            options=options if isinstance(options, dict) else {},
            tz=text.get("tz", ""),
            paused=text.get("paused") == "1",
            last_fire=parse_mark(text.get("lf")),
            next_fire=parse_mark(text.get("nf")),
        )

    # -- what the loop pushes ------------------------------------------------------------

    @property
    def queue(self) -> str:
        return str(self.options.get("queue") or "default")

    @property
    def args(self) -> list[Any]:
        args = self.options.get("args", [])
        return list(args) if isinstance(args, list) else [args]

    @property
    def label(self) -> str:
        return str(self.options.get("label") or "")

    def job_item(self) -> dict[str, Any]:
        """The push for one fire: the loop's job options over the class's own (queue, retry...)."""
        item = {k: v for k, v in self.options.items() if k not in LOOP_ONLY_OPTIONS}
        item["class"] = self.klass
        item["args"] = self.args
        return item

    # -- when it fires -------------------------------------------------------------------

    @property
    def zone(self) -> tzinfo:
        return zones.resolve(self.tz)

    def next_fire_at(self, after: float) -> int | None:
        return parse(self.schedule).next_fire_at(after, self.zone)

    def describe(self) -> str:
        try:
            return parse(self.schedule).describe()
        except ValueError as exc:
            return gettext("invalid: %(error)s") % {"error": exc}

    def local(self, epoch: float | None) -> datetime | None:
        """``epoch`` as an aware datetime in the loop's zone."""
        return None if epoch is None else datetime.fromtimestamp(epoch, self.zone)

    def history(self, redis: Any = None) -> list[tuple[int, str | None]]:
        """The last fires, newest first: ``(fired_at epoch, jid)``."""
        redis = context.redis(redis)
        out = []
        for raw in redis.lrange(layout_of(redis).loop_history(self.lid), 0, HISTORY_LENGTH - 1):
            try:
                fired_at, jid = json.loads(raw)
                out.append((int(fired_at), jid))
            except (ValueError, TypeError):
                continue
        return out


# -- storage ---------------------------------------------------------------------------


def persist(loop: Loop, redis: Any = None) -> None:
    """``SADD periodic`` and write ``loops:<lid>`` (``paused`` only if not set yet).

    One ``MULTI`` on one server; on a Redis Cluster the set (``{wurk}``) and the loop
    (``{loop:<lid>}``) are two slots, written by one pipeline without a transaction:
    a listed loop whose hash is missing is skipped by every reader (:class:`LoopSet`)."""
    redis = context.redis(redis)
    where = layout_of(redis)
    key = where.loop(loop.lid)
    pipe = redis.pipeline(transaction=not where.cluster)
    pipe.sadd(where.periodic, loop.lid)
    stored = {**loop.push_defaults, **loop.options}
    stored = {k: stored[k] for k in sorted(stored)}
    pipe.hset(key, mapping={"schedule": loop.schedule, "klass": loop.klass,
                            "options": canonical.dumps(stored), "tz": loop.tz})
    pipe.hsetnx(key, "paused", "1" if loop.paused else "0")
    pipe.execute()


def unregister(lid: str, redis: Any = None) -> None:
    """Forget a loop: it stops firing and leaves the dashboard."""
    redis = context.redis(redis)
    where = layout_of(redis)
    pipe = redis.pipeline(transaction=not where.cluster)  # two slots on a cluster (see persist)
    pipe.srem(where.periodic, lid)
    pipe.delete(where.loop(lid), where.loop_history(lid))
    pipe.execute()


def set_paused(lid: str, paused: bool, redis: Any = None) -> bool:
    """Pause or unpause a registered loop; False when there is no such loop.

    Stored in Redis, so it holds across deploys (registration never overwrites it).
    """
    redis = context.redis(redis)
    key = layout_of(redis).loop(lid)
    if not redis.exists(key):
        return False
    redis.hset(key, "paused", "1" if paused else "0")
    return True


def record_fire(lid: str, fired_at: int, jid: str | None, redis: Any = None) -> None:
    redis = context.redis(redis)
    history = layout_of(redis).loop_history(lid)
    pipe = redis.pipeline(transaction=False)
    pipe.lpush(history, canonical.dumps([fired_at, jid]))
    pipe.ltrim(history, 0, HISTORY_LENGTH - 1)
    pipe.execute()


class LoopSet:
    """Every registered loop, read in one round trip."""

    def __init__(self, redis: Any = None) -> None:
        self.redis = context.redis(redis)
        self.layout = layout_of(self.redis)

    def lids(self) -> list[str]:
        return sorted(to_text(m) for m in self.redis.smembers(self.layout.periodic))

    def __len__(self) -> int:
        return int(self.redis.scard(self.layout.periodic))

    size = property(__len__)

    def __iter__(self) -> Iterator[Loop]:
        lids = self.lids()
        if not lids:
            return iter(())
        pipe = self.redis.pipeline(transaction=False)
        for lid in lids:
            pipe.hgetall(self.layout.loop(lid))
        return iter([Loop.from_hash(lid, data) for lid, data in zip(lids, pipe.execute(), strict=True) if data])

    def fetch(self, lid: str) -> Loop | None:
        data = self.redis.hgetall(self.layout.loop(lid))
        return Loop.from_hash(lid, data) if data else None


def parse_mark(value: str | None) -> int | None:
    """An ``lf``/``nf`` mark as epoch seconds; ``None`` when absent, empty or not a number."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return int(float(value))
        except (ValueError, OverflowError):  # "abc", "nan", "inf"
            return None
