"""``Idempotency-Key`` replays: the first answer to a key is kept in Redis for
``HTTP_API_IDEMPOTENCY_TTL`` seconds and given again to a repeat of the request.

Claiming a key is one ``SET NX``: of two requests with one key at once, one claims it
and pushes, the other is told the key is in use (409) and pushes nothing, so one key
makes at most one job. A claim whose request fails (an error answer, a crash) is given
up, so the client's retry is answered afresh; a claim whose process died expires after
:data:`CLAIM_SECONDS`. Keys are per token: two tokens may use the same key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .. import context, keys
from .problems import Problem

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_LENGTH = 255
#: Seconds a claim lives while its request is answered (a process that dies holding it
#: blocks the key no longer than this).
CLAIM_SECONDS = 60


@dataclass(frozen=True)
class Stored:
    status: int
    body: Any


class Claim:
    """One request's hold on its key, until :meth:`keep` or :meth:`release`."""

    def __init__(self, key: str, fingerprint: str) -> None:
        self.key = key
        self.fingerprint = fingerprint

    def keep(self, status: int, body: Any) -> None:
        """Store the answer for the key's TTL (only successes are kept: see :func:`answer`)."""
        record = {"state": "done", "fp": self.fingerprint, "status": status, "body": body}
        context.redis().set(self.key, json.dumps(record), ex=context.config().http_api_idempotency_ttl)

    def release(self) -> None:
        context.redis().delete(self.key)


def check_key(value: str) -> str:
    if not 1 <= len(value) <= MAX_LENGTH or not value.isprintable() or not value.isascii():
        raise Problem("invalid-idempotency-key",
                      f"an {HEADER} is 1 to {MAX_LENGTH} printable ASCII characters")
    return value


def claim(token: str, value: str, request_fingerprint: str) -> Claim | Stored:
    """Claim ``value`` for this request, or the stored answer of its first request.

    Raises :class:`Problem` when the key is being answered for another request (409)
    or was used for a different request (422)."""
    digest = hashlib.sha256(check_key(value).encode()).hexdigest()
    key = keys.http_api_idempotency(token, digest)
    redis = context.redis()
    marker = json.dumps({"state": "claimed", "fp": request_fingerprint})
    if redis.set(key, marker, nx=True, ex=CLAIM_SECONDS):
        return Claim(key, request_fingerprint)
    raw = redis.get(key)
    record = json.loads(raw) if raw else {"state": "claimed", "fp": request_fingerprint}
    if record.get("fp") != request_fingerprint:
        raise Problem("idempotency-key-reused",
                      f"this {HEADER} was first used for a different request (method, path or body)")
    if record.get("state") != "done":
        raise Problem("idempotency-key-in-use", f"the first request with this {HEADER} is still being answered",
                      headers={"Retry-After": "1"})
    return Stored(record["status"], record["body"])


def fingerprint(method: str, path: str, body: bytes) -> str:
    return hashlib.sha256(b"\0".join((method.encode(), path.encode(), body))).hexdigest()
