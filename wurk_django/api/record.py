"""``JobRecord``: one job as stored in Redis, raw bytes plus a lazily parsed view (CORE-164)."""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from datetime import datetime
from typing import Any

from .. import keys, payload
from ..encryption.envelope import PLACEHOLDER as ENCRYPTED_PLACEHOLDER
from ..encryption.envelope import is_envelope
from ..redis.cluster_layout import layout_of
from ..text import to_text
from ._base import RedisClient, cluster_aware, latency_of, timestamp_at, to_float, to_int

__all__ = ["JobRecord", "ACTIVE_JOB_WRAPPERS", "decode_backtrace"]

# Both names Rails/Sidekiq have used for the ActiveJob adapter's wrapper class (CORE-031).
ACTIVE_JOB_WRAPPERS = frozenset({
    "Sidekiq::ActiveJob::Wrapper",
    "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
})
_MAILER_JOBS = frozenset({"ActionMailer::DeliveryJob", "ActionMailer::MailDeliveryJob"})
_AJ_PREFIX = "_aj_"
_AJ_GLOBALID = "_aj_globalid"
#: Shown instead of an argument that claims to be encrypted but is not (a job pushed
#: raw with ``encrypt`` set): hidden, yet never labelled as protected when it is not.
UNENCRYPTED_PLACEHOLDER = "[hidden: stored unencrypted]"
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$|^[A-Za-z0-9+/]{2}==$|^[A-Za-z0-9+/]{3}=$")


def _looks_encrypted(value: object) -> bool:
    """Ciphertext travels as our envelope or, from Ruby Sidekiq Enterprise, one Base64 string."""
    return is_envelope(value) or (isinstance(value, str) and _BASE64.match(value) is not None)


_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]")


def decode_backtrace(value: Any) -> list[str] | None:
    """Decode ``error_backtrace``: base64 of a zlib stream of a JSON list (CORE-027).

    Read leniently like Ruby's ``unpack1("m")``: stray characters and missing
    padding are tolerated. Anything that still does not decode gives ``None``.
    Very old Sidekiq versions stored the list itself, which is accepted too.
    """
    if value is None:
        return None
    if isinstance(value, list):
        return [str(line) for line in value]
    if not isinstance(value, (str, bytes)):
        return None
    data = value.encode("latin-1", "ignore") if isinstance(value, str) else value
    data = _NOT_BASE64.sub(b"", data.split(b"=", 1)[0])
    data += b"=" * (-len(data) % 4)
    try:
        lines = payload.loads(zlib.decompress(base64.b64decode(data)))
    except (binascii.Error, zlib.error, ValueError):
        return None
    if not isinstance(lines, list):
        return None
    return [line if isinstance(line, str) else str(line) for line in lines]


def _strip_active_job(value: Any) -> Any:
    """Show ActiveJob-serialized arguments the way a person wrote them.

    A hash that is only a GlobalID reference becomes the GID string; other
    hashes lose ActiveJob's bookkeeping keys (``_aj_*``).
    """
    if isinstance(value, list):
        return [_strip_active_job(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and _AJ_GLOBALID in value:
            return value[_AJ_GLOBALID]
        return {k: _strip_active_job(v) for k, v in value.items() if not str(k).startswith(_AJ_PREFIX)}
    return value


class JobRecord:
    """A job read from a queue (or a sorted set, via :class:`~wurk_django.api.SortedEntry`).

    ``value`` keeps the exact bytes read from Redis, so deleting uses those and
    never a re-serialization (CORE-004). ``item`` is parsed on first use; an
    unparseable value gives ``{}`` and ``args == [raw text]``.
    """

    def __init__(self, value: bytes | str | dict, queue: str | None = None,
                 redis: RedisClient | None = None) -> None:
        if isinstance(value, dict):
            # Already parsed (e.g. a Sidekiq 6 work entry): serialize once like any writer would.
            self._item: dict | None = value
            self._parsed_ok = True
            value = payload.dumps(value)
        else:
            self._item = None
            self._parsed_ok = True
        self.value: bytes = value if isinstance(value, bytes) else str(value).encode("utf-8")
        self._queue = queue
        self._redis = redis

    # -- parsing -------------------------------------------------------------------

    def _parse(self) -> dict:
        if self._item is None:
            try:
                parsed = payload.loads(self.value)
            except Exception:  # foreign or truncated data is shown, not raised
                parsed = None
            if isinstance(parsed, dict):
                self._item = parsed
            else:
                self._parsed_ok = False
                self._item = {}
        return self._item

    @property
    def item(self) -> dict:
        """The parsed payload (``{}`` when the stored value is not a JSON object)."""
        return self._parse()

    @property
    def parse_error(self) -> bool:
        """True when the stored value could not be read as a job."""
        self._parse()
        return not self._parsed_ok

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def __getitem__(self, key: str) -> Any:
        return self.item.get(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.item.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.item

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display_class} jid={self.jid} queue={self.queue}>"

    # -- payload fields ------------------------------------------------------------

    @property
    def klass(self) -> str:
        """The ``class`` field; ``"Unknown"`` for unparseable data."""
        if self.parse_error:
            return "Unknown"
        return str(self.item.get("class", "Unknown"))

    @property
    def args(self) -> list:
        if self.parse_error:
            return [to_text(self.value)]
        args = self.item.get("args")
        return args if isinstance(args, list) else []

    @property
    def jid(self) -> str | None:
        return self.item.get("jid")

    @property
    def bid(self) -> str | None:
        return self.item.get("bid")

    @property
    def tags(self) -> list:
        return self.item.get("tags") or []

    @property
    def queue(self) -> str | None:
        """The queue this record was read from, else the payload's ``queue``."""
        return self._queue or self.item.get("queue")

    @property
    def created_at(self) -> datetime | None:
        """Creation time; payloads without ``created_at`` fall back to ``enqueued_at``."""
        return timestamp_at(self.item.get("created_at", self.item.get("enqueued_at")))

    @property
    def enqueued_at(self) -> datetime | None:
        return timestamp_at(self.item.get("enqueued_at"))

    @property
    def failed_at(self) -> datetime | None:
        return timestamp_at(self.item.get("failed_at"))

    @property
    def retried_at(self) -> datetime | None:
        return timestamp_at(self.item.get("retried_at"))

    @property
    def latency(self) -> float:
        """Seconds since the job was enqueued (or created), reading both units (CORE-040)."""
        return latency_of(self.item)

    @property
    def error_class(self) -> str | None:
        return self.item.get("error_class")

    @property
    def error_message(self) -> str | None:
        return self.item.get("error_message")

    @property
    def error_backtrace(self) -> list[str] | None:
        """The decoded backtrace lines, or ``None`` if absent or corrupt (CORE-027)."""
        return decode_backtrace(self.item.get("error_backtrace"))

    # -- display -------------------------------------------------------------------

    def _wrapped_name(self) -> str | None:
        wrapped = self.item.get("wrapped")
        if wrapped:
            return str(wrapped)
        # Adapters older than the ``wrapped`` key only carried the serialized job.
        first = self.args[0] if self.args else None
        if isinstance(first, dict):
            name = first.get("job_class")
            return str(name) if name else None
        return str(first) if isinstance(first, str) else None

    @property
    def display_class(self) -> str:
        """A label for people: ``display_class`` if set, else the real class behind an
        ActiveJob wrapper (``Mailer#method`` for mail deliveries), else ``class``."""
        label = self.item.get("display_class")
        if label:
            return str(label)
        if self.klass not in ACTIVE_JOB_WRAPPERS:
            return self.klass
        job_class = self._wrapped_name()
        if job_class in _MAILER_JOBS:
            arguments = self._active_job_arguments()
            if len(arguments) >= 2:
                return f"{arguments[0]}#{arguments[1]}"
        return job_class or self.klass

    def _active_job_arguments(self) -> list:
        first = self.args[0] if self.args else None
        arguments = first.get("arguments") if isinstance(first, dict) else None
        return arguments if isinstance(arguments, list) else []

    @property
    def display_args(self) -> list:
        """Arguments for people: ActiveJob bookkeeping removed; the last argument
        hidden as ``"[encrypted data]"`` when the job is ``encrypt``-ed or it is an
        encryption envelope (CORE-036, ENT-610)."""
        if self.klass in ACTIVE_JOB_WRAPPERS:
            arguments = _strip_active_job(self._active_job_arguments()) if self.item.get("wrapped") else []
            job_class = self._wrapped_name()
            if job_class == "ActionMailer::DeliveryJob":
                # Drop mailer class, method and delivery method: the rest are the mail's own args.
                return arguments[3:]
            if job_class == "ActionMailer::MailDeliveryJob":
                rest = arguments[3:]
                params = rest[0] if rest and isinstance(rest[0], dict) else {}
                return [params.get("params"), params.get("args")]
            return arguments
        args = list(self.args)
        # Display only: the stored job is untouched (ENT-610).
        if args and is_envelope(args[-1]):
            args[-1] = ENCRYPTED_PLACEHOLDER
        elif args and payload.truthy(self.item.get("encrypt")):
            args[-1] = ENCRYPTED_PLACEHOLDER if _looks_encrypted(args[-1]) else UNENCRYPTED_PLACEHOLDER
        return args

    # -- state held elsewhere ------------------------------------------------------

    @property
    def iterable_state(self) -> dict | None:
        """Progress of an iterable job (``it-<jid>``, CORE-221), or ``None``."""
        if not self.jid:
            return None
        return read_iteration(self.redis.hgetall(keys.iteration(self.jid)))

    # -- actions -------------------------------------------------------------------

    def delete(self) -> bool:
        """Remove this exact entry from its queue: ``LREM queue:<q> 1 <value>``."""
        if not self.queue:
            return False
        redis = self.redis
        deleted = bool(redis.lrem(layout_of(redis).queue(self.queue), 1, self.value))
        if deleted:
            # The job's unique lock goes with it, so the next identical push is not dropped.
            from ..unique.unlock import release_deleted  # lazy: only a delete pays for it

            release_deleted(self.redis, self.item)
        return deleted


def read_iteration(fields: dict | None) -> dict | None:
    """Turn an ``it-<jid>`` hash into executions/runtime/cursor/cancelled (CORE-170)."""
    if not fields:
        return None
    data = {to_text(k): v for k, v in fields.items()}
    cursor = data.get("c")
    try:
        cursor = payload.loads(cursor) if cursor is not None else None
    except Exception:  # show what is there rather than fail the page
        cursor = to_text(cursor)
    cancelled = data.get("cancelled")
    return {
        "executions": to_int(data.get("ex")),
        "runtime": to_float(data.get("rt")),
        "cursor": cursor,
        "cancelled": to_int(cancelled) if cancelled is not None else None,
    }
