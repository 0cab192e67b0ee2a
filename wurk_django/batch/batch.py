"""``Batch``: a group of jobs with callbacks when all of them have run (PRO-200..224).

::

    batch = Batch()
    batch.description = "Import 10,000 rows"
    batch.on("success", "shop.jobs.ImportDone", {"file": name})
    with batch.jobs():
        for row in rows:
            ImportRow.perform_async(row.id)

Nothing is written until the first ``jobs()`` block. Inside the block every
push is stamped with the batch's ``bid``; the pushes are kept and written at
the end of the block (each one with its registration in the batch, in one
script), or every ``autoflush`` jobs. While a block is open the batch holds an
extra pending member, so it cannot finish (and fire) before the block has
pushed everything, however fast the workers are.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .. import canonical, signals
from .. import context as job_context
from ..client import cluster_writer
from ..client.writer import Writer
from ..conf import QUEUE_NAME, Config
from ..errors import WurkError
from ..redis.cluster_layout import SIDEKIQ, SidekiqLayout, layout_of
from ..text import to_text
from . import context, fire, scripts
from .context import Buffer

if TYPE_CHECKING:
    from .status import Status

logger = logging.getLogger("wurk_django.batch")

EVENTS = ("success", "complete", "death")
#: The no-op job pushed into a batch whose block pushed nothing, so the batch still
#: finishes and fires (Sidekiq Pro's wire name; every worker must know it).
EMPTY_CLASS = "Sidekiq::Batch::Empty"
#: How many scripted pushes go to Redis per round trip when a block's buffer is written.
FLUSH_CHUNK = 1000
_ACK_ATTEMPTS = 3


class NoSuchBatch(WurkError, ValueError):
    """A bid was reopened that names no batch (never created, expired or deleted)."""


def new_bid() -> str:
    """14 characters: URL-safe base64 of 10 random bytes, without padding."""
    return base64.urlsafe_b64encode(secrets.token_bytes(10)).rstrip(b"=").decode()


def dotted_path(target: Any) -> str:
    return f"{target.__module__}.{target.__qualname__}"


def encode_entry(entry: list[Any]) -> str:
    """Callback entries are compared byte for byte in Redis: compact separators, raw
    UTF-8 and an unescaped ``/``, the bytes Ruby's JSON writes for the same entry."""
    return canonical.dumps(entry)


def _seconds(value: Any, what: str, *, allow_zero: bool = False) -> int:
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'>= 0' if allow_zero else '> 0'} seconds or a timedelta, not {value!r}")
    return int(value)


def _check_autoflush(value: Any) -> int | None:
    if value is None or value is True or value is False:
        return None
    if isinstance(value, int) and value > 0:
        return value
    raise ValueError(f"autoflush must be None, True, False or a positive int, not {value!r}")


class Batch:
    """A new batch (``Batch()``), or an existing one reopened by its bid (``Batch(bid)``)."""

    def __init__(self, bid: str | None = None) -> None:
        self.description: str | None = None
        self.callback_queue: str = "default"
        self._callback_class: str | None = None
        self._tags: list[str] = []
        self._linger: int | None = None
        self.autoflush: Any = None
        self.parent_bid: str | None = None
        self.created_at: float | None = None
        self._expires_in = scripts.DEFAULT_EXPIRY
        self._staged: list[str] = []  # encoded callback entries, before the first write
        if bid is None:
            self.bid = new_bid()
            self.mutable = True
            self._written = False
            return
        if not isinstance(bid, str) or not bid:
            raise ValueError(f"a bid must be a non-empty string, not {bid!r}")
        self.bid = bid
        self.mutable = False
        self._written = True
        self._load()

    def __repr__(self) -> str:
        return f"<Batch {self.bid}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Batch) and other.bid == self.bid

    def __hash__(self) -> int:
        return hash(self.bid)

    def _load(self) -> None:
        redis = self._redis()
        fields = redis.hgetall(layout_of(redis).batch(self.bid))
        if not fields:
            raise NoSuchBatch(f"no batch {self.bid!r} (never created, expired or deleted)")
        get = lambda name: to_text(fields.get(name.encode()))  # noqa: E731
        self.description = get("description") or None
        self.callback_queue = get("callback_queue") or "default"
        self._callback_class = get("callback_class") or None
        self.parent_bid = get("parent_bid") or None
        try:
            tags = json.loads(get("tags") or "[]")
            self._tags = [str(t) for t in tags] if isinstance(tags, list) else []
        except ValueError:
            self._tags = []
        linger = get("linger")
        self._linger = int(float(linger)) if linger else None
        created = get("created_at")
        self.created_at = float(created) if created else None

    # -- configuration ------------------------------------------------------------

    @property
    def callback_class(self) -> str | None:
        """Where ``"#method"`` callback targets are looked up; a class is stored as its dotted path."""
        return self._callback_class

    @callback_class.setter
    def callback_class(self, value: Any) -> None:
        if value is None or isinstance(value, str):
            self._callback_class = value or None
        elif isinstance(value, type):
            self._callback_class = dotted_path(value)
        else:
            raise ValueError(f"callback_class must be a class or a dotted path, not {value!r}")

    @property
    def tags(self) -> list[str]:
        return list(self._tags)

    @tags.setter
    def tags(self, value: Any) -> None:
        if isinstance(value, str) or not hasattr(value, "__iter__"):
            raise ValueError(f"tags must be a list of strings, not {value!r}")
        self._tags = [str(t) for t in value]

    @property
    def linger(self) -> int | None:
        """Seconds the batch stays readable after ``success`` (default 24 hours)."""
        return self._linger

    @linger.setter
    def linger(self, value: Any) -> None:
        self._linger = None if value is None else _seconds(value, "linger", allow_zero=True)
        if self._written:
            redis = self._redis()
            redis.hset(layout_of(redis).batch(self.bid), "linger", "" if self._linger is None else str(self._linger))

    def expires_in(self, seconds: int | float | dt.timedelta) -> Batch:
        """How long the batch lives (default 30 days); set before the first ``jobs()``."""
        self._expires_in = _seconds(seconds, "expires_in")
        return self

    # -- callbacks ----------------------------------------------------------------

    def on(self, event: str, target: Any, options: dict | None = None) -> Batch:
        """Run ``target`` when ``event`` (``"success"``, ``"complete"`` or ``"death"``) happens.

        ``target`` is a class (its ``on_<event>(status, options)`` is called), a
        dotted path ``"pkg.mod.Klass"`` or ``"pkg.mod.Klass#method"``, or
        ``"#method"`` (a method of :attr:`callback_class`). ``options`` is a dict
        that survives JSON (its keys come back as strings).

        A target this process can import must have the method: ``ValueError`` here
        names what is missing, rather than a dead callback job once the batch is done.
        A class it cannot import (a Ruby class, another service's module) is taken
        as it is.
        """
        if event not in EVENTS:
            raise ValueError(f"batch event must be one of {EVENTS}, not {event!r}")
        if isinstance(target, (type, str)) and target:
            from .callbacks import problem  # the callback runner imports this module

            wrong = problem(target, event, self._callback_class)
            if wrong is not None:
                raise ValueError(f"batch.on({event!r}, ...): {wrong}")
        if isinstance(target, type):
            target = dotted_path(target)
        if not isinstance(target, str) or not target or target == "#" or target.endswith("#"):
            raise ValueError(f"a callback target must be a class, 'pkg.mod.Klass[#method]' or '#method', "
                             f"not {target!r}")
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise ValueError(f"callback options must be a dict, not {options!r}")
        try:
            entry = encode_entry([event, target, options])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"callback options must be JSON-serialisable: {exc}") from None
        if not self._written:
            if entry in self._staged:
                return self
            if len(self._staged) >= scripts.CALLBACKS_MAX:
                logger.warning("batch %s already has %s callbacks; dropped %s", self.bid, scripts.CALLBACKS_MAX, entry)
                return self
            self._staged.append(entry)
            return self
        result = scripts.append_callback(self._redis(), self.bid, entry, event)
        if result == -1:
            raise NoSuchBatch(f"cannot add a callback: no batch {self.bid!r}")
        if result == -2:
            logger.warning("batch %s already has %s callbacks; dropped %s", self.bid, scripts.CALLBACKS_MAX, entry)
        elif result in (b"1", "1"):
            logger.warning("batch %s: %r already fired, so this callback will never run: %s", self.bid, event, entry)
        return self

    # -- jobs ---------------------------------------------------------------------

    @contextlib.contextmanager
    def jobs(self) -> Iterator[Batch]:
        """Pushes inside the block join this batch; a new batch is written at the first block.

        If the block raises, nothing it pushed is written; a batch created by the
        block then never fires (it expires with its TTL).
        """
        autoflush = _check_autoflush(self.autoflush)
        if not self._written and not QUEUE_NAME.match(str(self.callback_queue or "default")):
            raise ValueError(f"callback_queue must be a queue name, not {self.callback_queue!r}")
        open_now = context.open_bids.get()
        if self.bid in open_now:
            yield self  # a block inside a block of the same batch: the outer one holds and writes
            return
        # Inside a job, the worker's config (its shard); elsewhere the settings' (or a via() block's).
        config = job_context.config()
        self.home = config  # the server its jobs must go to (the client middleware checks each push)
        writer = Writer(config)
        # On a Redis Cluster the batch's keys are {b:<bid>} (issue 46 item 3, batch/cluster.py).
        redis = job_context.layout_redis(config=config)
        layout = layout_of(redis)
        created = not self._written
        commands: list[tuple[Any, ...]] = []
        if created:
            parent = context.current_batch.get()
            if parent is not None and parent.bid != self.bid:
                self.parent_bid = parent.bid
            commands += self._first_write(time.time(), layout)
        jid = context.job_jid()
        # Inside a job the hold is named after it, so a re-run after a crash takes the same one.
        sentinel = f"hold:{jid}" if jid else f"hold:{secrets.token_hex(12)}"
        commands.append(scripts.hold_command(self.bid, sentinel, self._expires_in, layout))
        if layout.cluster:
            # Single-slot commands over several slots (the batch's, the fleet's index, its tags',
            # its parent's), all answered before the block's first push: the hold is in place
            # and the parent counts this child before any of its jobs can run.
            cluster_writer.send(redis, commands)
        else:
            writer.send(commands)
        if created:
            signals.send(signals.batch_created, "batch", bid=self.bid)
        self._written = True
        self._staged = []
        buffer = Buffer(self.bid, autoflush)
        tokens = context.set_batch(self, buffer)
        open_token = context.open_bids.set(open_now | {self.bid})
        from ..client.transaction import immediate_pushes

        try:
            with immediate_pushes():
                yield self
        except BaseException:
            buffer.take()  # nothing the failed block pushed is written
            if not created:
                # A block that reopened a live batch must not keep it open forever.
                with contextlib.suppress(Exception):
                    self._release(sentinel, config)
            raise
        finally:
            context.restore(tokens)
            context.open_bids.reset(open_token)
            self.mutable = False
        self._write_buffer(writer, buffer)
        if created:
            self._push_empty_marker_if_needed(config)
        self._release(sentinel, config)

    def creation_commands(self, now: float, *, members: Sequence[str] = (),
                          layout: SidekiqLayout = SIDEKIQ) -> list[tuple[Any, ...]]:
        """The commands that write this new batch, for a caller's own round trip (a workflow
        writes all its step batches in one transaction), with ``members`` registered as its
        pending jobs from the start: jobs a script pushes later (a workflow's steps), so the
        batch waits for them however late that is. Nothing is sent here. ``layout``: the
        cluster's for a Redis Cluster (single-key commands there, each in its own slot)."""
        commands = self._first_write(now, layout)
        if members:
            commands += [("SADD", layout.batch(self.bid, "jids"), *members),
                         ("HSET", layout.batch(self.bid), "total", len(members), "pending", len(members)),
                         ("EXPIRE", layout.batch(self.bid, "jids"), self._expires_in)]
        return commands

    def _first_write(self, now: float, layout: SidekiqLayout = SIDEKIQ) -> list[tuple[Any, ...]]:
        bid = self.bid
        self.created_at = now
        callbacks = "[" + ",".join(self._staged) + "]"
        commands: list[tuple[Any, ...]] = [
            ("HSET", layout.batch(bid), "created_at", repr(now), "description", self.description or "",
             "callback_queue", self.callback_queue or "default", "callback_class", self._callback_class or "",
             "parent_bid", self.parent_bid or "", "tags", encode_entry(self._tags),
             "linger", "" if self._linger is None else str(self._linger), "callbacks", callbacks,
             "total", 0, "pending", 0, "failures", 0),
            ("EXPIRE", layout.batch(bid), self._expires_in),
            ("ZADD", layout.batches, repr(now), bid),
            ("ZREMRANGEBYSCORE", layout.batches, "-inf", f"({now - scripts.DEFAULT_EXPIRY!r}"),
            ("ZREMRANGEBYRANK", layout.batches, 0, -scripts.INDEX_MAX),
        ]
        for tag in self._tags:
            commands += [("SADD", layout.batch_tag(tag), bid),
                         ("EXPIRE", layout.batch_tag(tag), self._expires_in, "NX"),
                         ("EXPIRE", layout.batch_tag(tag), self._expires_in, "GT")]
        if self.parent_bid:
            parent = self.parent_bid
            commands += [("SADD", layout.batch(parent, "kids"), bid), ("SADD", layout.batch(parent, "pkids"), bid),
                         ("EXPIRE", layout.batch(parent, "kids"), scripts.DEFAULT_EXPIRY, "NX"),
                         ("EXPIRE", layout.batch(parent, "pkids"), scripts.DEFAULT_EXPIRY, "NX")]
        return commands

    def _write_buffer(self, writer: Writer, buffer: Buffer) -> None:
        ops = buffer.take()  # the write hooks made these already
        for start in range(0, len(ops), FLUSH_CHUNK):
            writer.write_operations(ops[start:start + FLUSH_CHUNK], hooks=False)

    def _push_empty_marker_if_needed(self, config: Config) -> None:
        redis = job_context.layout_redis(config=config)
        layout = layout_of(redis)
        pipe = redis.pipeline(transaction=False)
        pipe.hget(layout.batch(self.bid), "total")
        pipe.scard(layout.batch(self.bid, "kids"))
        total, kids = pipe.execute()
        if int(total or 0) == 0 and int(kids or 0) == 0:
            from ..client.push import Client

            # Outside any block now, so no buffer takes it: it is written at once.
            Client(config=config).push({"class": EMPTY_CLASS, "args": [], "queue": "default", "retry": False,
                                        "bid": self.bid})

    def _release(self, sentinel: str, config: Config) -> None:
        state = ack_with_retries(self.bid, sentinel, job_context.layout_redis(config=config))
        fire.gate_reporting(self.bid, state[1], state[2], state[3], config)

    # -- reading and changing -------------------------------------------------------

    def include(self, jid: str) -> bool:
        """Whether ``jid`` is a live member (pushed, not yet succeeded or dead)."""
        redis = self._redis()
        return bool(redis.sismember(layout_of(redis).batch(self.bid, "jids"), jid))

    def remove_jobs(self, *jids: str) -> int:
        """Take jobs out of the batch (they stop counting); returns how many were members."""
        if not jids:
            return 0
        removed, pending, live, kids = scripts.remove_jobs(self._redis(), self.bid, list(jids))
        if removed:
            fire.gate_reporting(self.bid, pending, live, kids, job_context.config())
        return removed

    def invalidate_all(self) -> None:
        """Cancel this batch and every batch under it: queued jobs are skipped by the
        workers and count as successes, so the batches drain and fire normally."""
        redis = self._redis()
        seen: set[str] = set()
        todo = [self.bid]
        while todo:
            bid = todo.pop()
            if bid in seen:
                continue
            seen.add(bid)
            scripts.invalidate(redis, bid)
            todo += [k.decode() for k in redis.smembers(layout_of(redis).batch(bid, "kids"))]

    @property
    def valid(self) -> bool:
        redis = self._redis()
        return redis.hget(layout_of(redis).batch(self.bid), "invalidated") != b"1"

    @property
    def status(self) -> Status:
        from .status import Status

        return Status(self.bid)

    @property
    def parent(self) -> Batch | None:
        return Batch(self.parent_bid) if self.parent_bid else None

    @staticmethod
    def _redis():
        return job_context.layout_redis()


def ack_with_retries(bid: str, jid: str, redis: Any) -> list[int]:
    """BATCH_ACK_SUCCESS on ``redis``, tried three times (it is safe to repeat); raises if Redis stays down."""
    for attempt in range(1, _ACK_ATTEMPTS + 1):
        try:
            return scripts.ack_success(redis, bid, jid)
        except Exception:
            if attempt == _ACK_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")
