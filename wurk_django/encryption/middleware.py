"""The server middleware of encrypted arguments (ENT-608); the client one,
which seals, is in :mod:`wurk_django.encryption.client`.

Server side, outermost: the job's argument is opened before anything else
runs and is put back (still sealed) when the job is done, so whatever is
recorded afterwards (the retry, the dead entry, error reports) carries the
envelope, never the value.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import context, payload
from ..outcome import Outcome
from . import envelope, keyring, redaction
from .client import EncryptionClientMiddleware  # noqa: F401  (its old home: kept importable from here)
from .errors import DecryptionError, EncryptionError

logger = logging.getLogger("wurk_django.worker")

#: ``error_class`` of a dead entry that could not be decrypted.
DECRYPTION_ERROR_CLASS = f"{DecryptionError.__module__.rpartition('.')[0]}.{DecryptionError.__qualname__}"
DEAD_REASON = "encryption_error"


class EncryptionServerMiddleware:
    """Opens the envelope for ``perform``; a job that cannot be opened goes to the dead set."""

    applies_key = "encrypt"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return payload.truthy(job.get("encrypt"))

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Any) -> Any:
        if not payload.truthy(job.get("encrypt")):
            return call_next()
        sealed = job.get("args")
        if not isinstance(sealed, list) or not sealed or not envelope.is_envelope(sealed[-1]):
            warn_plaintext(job)
            return call_next()
        try:
            ring = keyring.current()
            if ring is None:
                raise EncryptionError("no encryption key is configured in this process")
            value = envelope.unseal(ring, sealed[-1])
        except EncryptionError as exc:
            where = context.current()
            bury(where, job, exc)
            where.outcome, where.error = Outcome.DEAD, exc  # reported and counted as a failure
            return None
        job["args"] = [*sealed[:-1], value]
        try:
            return call_next()
        except Exception as exc:
            if not redaction.scrub(exc, value):
                clean = redaction.RedactedError(
                    f"{type(exc).__name__} (message withheld: it showed the encrypted argument)")
                raise clean.with_traceback(exc.__traceback__) from None
            raise
        finally:
            job["args"] = sealed


# Job classes already warned about in this process: one line a class, not one a job.
_warned_plaintext: set[str] = set()


def warn_plaintext(job: dict) -> None:
    """A job flagged ``encrypt`` arrived with its arguments in plain text: its pusher had
    encryption off (a Ruby process without ``Crypto.enable``, a raw push). The job runs as
    it is, as Sidekiq Enterprise runs it; refusing it would lose the work, and its secret
    is already readable in Redis. Said once per job class and process, so an operator
    learns that a pusher is misconfigured without a line per job."""
    name = str(job.get("class"))
    if name in _warned_plaintext:
        return
    _warned_plaintext.add(name)
    logger.warning("%s jid=%s is marked encrypt but its arguments arrived unencrypted (its pusher has "
                   "encryption off); running it as it is. Turn encryption on where it is pushed.",
                   name, job.get("jid"))


def bury(where: context.JobContext, job: dict, exc: EncryptionError) -> None:
    """Kill a job that cannot be decrypted: stored as fetched (its envelope as it is), the
    reason in ``error_message``. Retrying cannot help: the key is gone or the bytes are bad."""
    from .. import death

    logger.error("%s jid=%s cannot be decrypted (%s: %s); moved to the dead set",
                 job.get("class"), job.get("jid"), type(exc).__name__, exc)
    death.die_as_fetched(where, exc, reason=death.INVALID, job=job, error_class=DECRYPTION_ERROR_CLASS,
                         error_message=f"{DEAD_REASON}: {type(exc).__name__}: {exc}",
                         failed_at=where.config.wire_format.now())
