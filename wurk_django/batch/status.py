"""Reading batches: ``Status`` (one batch), ``BatchSet`` and ``DeadBatchSet`` (PRO-260, PRO-261)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from .. import context as job_context
from .. import keys
from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..text import to_text
from . import fire, scripts

PAGE = 100


def _float(value: bytes | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _int(value: bytes | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _redis() -> Any:
    """A batch's Redis: on a Redis Cluster the ``RedisCluster`` (issue 46 item 3)."""
    return job_context.layout_redis()


def _layout() -> SidekiqLayout:
    return layout_of(_redis())


class Status:
    """A snapshot of one batch's hash (read once; :meth:`reload` reads again)."""

    def __init__(self, bid: str, *, fields: dict[bytes, bytes] | None = None) -> None:
        if not isinstance(bid, str) or not bid.strip():
            raise ValueError(f"a bid must be a non-empty string, not {bid!r}")
        self.bid = bid
        self._fields = fields if fields is not None else _redis().hgetall(_layout().batch(bid))

    def reload(self) -> Status:
        self._fields = _redis().hgetall(_layout().batch(self.bid))
        return self

    def __repr__(self) -> str:
        return f"<Status {self.bid} {self.pending}/{self.total} pending>"

    def _get(self, name: str) -> str:
        return to_text(self._fields.get(name.encode())) or ""

    @property
    def exists(self) -> bool:
        return bool(self._fields)

    @property
    def total(self) -> int:
        return _int(self._fields.get(b"total"))

    @property
    def pending(self) -> int:
        return _int(self._fields.get(b"pending"))

    @property
    def failures(self) -> int:
        return _int(self._fields.get(b"failures"))

    @property
    def created_at(self) -> float | None:
        return _float(self._fields.get(b"created_at"))

    @property
    def complete_at(self) -> float | None:
        return _float(self._fields.get(b"complete_at"))

    @property
    def success_at(self) -> float | None:
        return _float(self._fields.get(b"success_at"))

    @property
    def death_at(self) -> float | None:
        return _float(self._fields.get(b"death_at"))

    @property
    def description(self) -> str | None:
        return self._get("description") or None

    @property
    def parent_bid(self) -> str | None:
        return self._get("parent_bid") or None

    @property
    def callback_queue(self) -> str:
        return self._get("callback_queue") or "default"

    @property
    def tags(self) -> list[str]:
        try:
            tags = json.loads(self._get("tags") or "[]")
        except ValueError:
            return []
        return [str(t) for t in tags] if isinstance(tags, list) else []

    @property
    def invalidated(self) -> bool:
        return self._get("invalidated") == "1"

    @property
    def dead(self) -> bool:
        """The batch (or a batch under it) has a dead job that was not retried."""
        return self._get("death") == "1"

    @property
    def success(self) -> bool:
        return self._get("success") == "1"

    @property
    def complete(self) -> bool:
        """Every job ran (succeeded or died), the children too."""
        if self._get("complete") == "1":
            return True
        return self.total > 0 and _redis().scard(_layout().batch(self.bid, "jids")) == 0

    def callback_jids(self, event: str) -> list[str]:
        """The jids of the callback jobs ``event`` pushed, in the order of :meth:`callbacks`
        (empty before it fired, or when an older version fired it)."""
        text = self._get(f"{event}_jids")
        return text.split(",") if text else []

    def callbacks(self) -> list[tuple[str, str, dict]]:
        """The registered ``(event, target, options)`` entries."""
        return [(event, target, options) for event in ("complete", "success", "death")
                for target, options in fire.callback_entries(self._get("callbacks"), event)]

    # -- live reads -------------------------------------------------------------------

    @property
    def failed_jids(self) -> list[str]:
        return sorted(j.decode() for j in _redis().smembers(_layout().batch(self.bid, "failed")))

    @property
    def dead_jids(self) -> list[str]:
        return sorted(j.decode() for j in _redis().smembers(_layout().batch(self.bid, "died")))

    @property
    def child_count(self) -> int:
        return int(_redis().scard(_layout().batch(self.bid, "kids")))

    def children(self) -> list[str]:
        return sorted(k.decode() for k in _redis().smembers(_layout().batch(self.bid, "kids")))

    def pending_jids(self, count: int = 100) -> list[str]:
        """Up to ``count`` live members that are jobs (holds of open blocks left out)."""
        found: list[str] = []
        for jid in _redis().sscan_iter(_layout().batch(self.bid, "jids"), count=100):
            text = jid.decode()
            if not text.startswith("hold:"):
                found.append(text)
                if len(found) >= count:
                    break
        return found

    @property
    def failure_info(self) -> list:
        """Always empty: kept for code written against Sidekiq Pro before version 8."""
        return []

    def data(self) -> dict[str, Any]:
        """Everything a progress page needs, as JSON-ready values."""
        return {
            "bid": self.bid,
            "total": self.total,
            "pending": self.pending,
            "failures": self.failures,
            "created_at": self.created_at,
            "complete_at": self.complete_at,
            "success_at": self.success_at,
            "death_at": self.death_at,
            "complete": self.complete,
            "invalidated": self.invalidated,
            "description": self.description,
            "parent_bid": self.parent_bid,
            "tags": self.tags,
            "failed_jids": self.failed_jids,
            "dead_jids": self.dead_jids,
            "child_count": self.child_count,
        }

    def join(self, timeout: float | None = None, interval: float = 0.5) -> Status:
        """Poll until the batch is complete (for tests and scripts, never in a job)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.reload().complete:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"batch {self.bid} did not complete in {timeout}s")
            time.sleep(interval)
        return self

    def delete(self) -> None:
        """Delete the batch and unlink it from its parent (whose gate then runs).

        Jobs still queued then ack into nothing. The callback markers are kept
        (30 days), so a batch recreated under the same bid would not fire again.
        """
        parent = self.parent_bid
        pending, live, kids = scripts.delete(_redis(), self.bid, parent, self.tags)
        if parent:
            fire.gate_reporting(parent, pending, live, kids)


class BatchSet:
    """Every batch in the ``batches`` index, newest first, read 100 at a time (on a Redis
    Cluster the index ``{wurk}:batches``, the batches' keys ``{b:<bid>}``: issue 46 item 3)."""

    #: The index on one server; :attr:`key` names it in the layout of the Redis read.
    index = keys.BATCHES

    @property
    def key(self) -> str:
        layout = _layout()
        return layout.batches if self.index == keys.BATCHES else layout.dead_batches

    @property
    def size(self) -> int:
        return int(_redis().zcard(self.key))

    def __len__(self) -> int:
        return self.size

    def page(self, start: int, count: int) -> list[Status]:
        """``count`` batches from rank ``start`` (newest first), read in one round trip each way."""
        redis = _redis()
        layout = layout_of(redis)
        bids = [b.decode() for b in redis.zrange(self.key, start, start + count - 1, desc=True)]
        pipe = redis.pipeline(transaction=False)
        for bid in bids:
            pipe.hgetall(layout.batch(bid))
        return [Status(bid, fields=fields) for bid, fields in zip(bids, pipe.execute(), strict=True)]

    def __iter__(self) -> Iterator[Status]:
        start = 0
        while True:
            page = self.page(start, PAGE)
            yield from page
            if len(page) < PAGE:
                return
            start += PAGE

    def scan_tags(self, tag: str) -> Iterator[str]:
        """The bids tagged ``tag``."""
        for bid in _redis().sscan_iter(_layout().batch_tag(tag), count=100):
            yield bid.decode()


class DeadBatchSet(BatchSet):
    """Batches with a dead job, newest death first (Sidekiq Pro's ``Batch::DeadSet``)."""

    index = keys.DEAD_BATCHES
