"""The two middleware of encrypted arguments (ENT-606..608).

Client side, innermost: the last thing before the push, so every other
middleware sees the argument in clear and only the envelope is written.
Server side, outermost: the job's argument is opened before anything else
runs and is put back (still sealed) when the job is done, so whatever is
recorded afterwards (the retry, the dead entry, error reports) carries the
envelope, never the value.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import context, payload
from ..arguments import _coerce, check_arguments, find_complex
from ..outcome import Outcome
from . import envelope, keyring, redaction
from .errors import DecryptionError, EncryptionError

logger = logging.getLogger("wurk_django.worker")

#: ``error_class`` of a dead entry that could not be decrypted.
DECRYPTION_ERROR_CLASS = f"{DecryptionError.__module__.rpartition('.')[0]}.{DecryptionError.__qualname__}"
DEAD_REASON = "encryption_error"


def _clear_value(job: dict, value: Any, mode: Any) -> Any:
    """``ON_COMPLEX_ARGUMENTS`` for the argument to encrypt, without ever quoting it."""
    found = find_complex(value, "args[-1]")
    if found is None:
        return value
    path, bad = found
    message = (f"Job arguments to {job['class']} must be native JSON types, but a {type(bad).__name__} "
               f"is at {path} (the encrypted argument, not shown)")
    if mode == "raise":
        raise ValueError(message)
    if mode == "warn":
        logger.warning("%s. Coerced it.", message)
    return _coerce(value)


class EncryptionClientMiddleware:
    """Replaces the last argument of an ``encrypt`` job with its envelope."""

    @staticmethod
    def applies(job: dict) -> bool:
        return payload.truthy(job.get("encrypt"))

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Any) -> Any:
        if not payload.truthy(job.get("encrypt")):
            return call_next()
        args = job.get("args")
        if not isinstance(args, list) or not args or envelope.is_envelope(args[-1]):
            return call_next()  # nothing to seal, or sealed already (a retry, a re-push): never twice
        config = context.config()
        ring = keyring.current()
        if ring is None:
            from .. import testing

            if redis is None or testing.mode(config) in ("fake", "inline"):
                return call_next()  # nothing reaches Redis: tests may run without keys
            raise EncryptionError(
                f"{job['class']} has encrypt=True but no encryption key is configured (set WURK['ENCRYPTION'] "
                "or call wurk_django.encryption.enable()); refusing to store its last argument in clear text")
        mode = config.on_complex_arguments
        head = check_arguments(job["class"], args[:-1], mode)
        job["args"] = [*head, envelope.seal(ring, _clear_value(job, args[-1], mode))]
        return call_next()


class EncryptionServerMiddleware:
    """Opens the envelope for ``perform``; a job that cannot be opened goes to the dead set."""

    @staticmethod
    def applies(job: dict) -> bool:
        return payload.truthy(job.get("encrypt"))

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Any) -> Any:
        if not payload.truthy(job.get("encrypt")):
            return call_next()
        sealed = job.get("args")
        if not isinstance(sealed, list) or not sealed or not envelope.is_envelope(sealed[-1]):
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


def bury(where: context.JobContext, job: dict, exc: EncryptionError) -> None:
    """Kill a job that cannot be decrypted: stored as fetched (its envelope as it is), the
    reason in ``error_message``. Retrying cannot help: the key is gone or the bytes are bad."""
    from ..server import death

    logger.error("%s jid=%s cannot be decrypted (%s: %s); moved to the dead set",
                 job.get("class"), job.get("jid"), type(exc).__name__, exc)
    death.die_as_fetched(where, exc, reason=death.INVALID, job=job, error_class=DECRYPTION_ERROR_CLASS,
                         error_message=f"{DEAD_REASON}: {type(exc).__name__}: {exc}",
                         failed_at=payload.now_ms())
