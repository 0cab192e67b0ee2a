"""The encryption's client middleware: seals the last argument of an ``encrypt`` job (ENT-606, ENT-607).

Innermost on the client side: the last thing before the push, so every other
middleware sees the argument in clear and only the envelope is written. Apart
from the server middleware (:mod:`wurk_django.encryption.middleware`), which
opens envelopes in a worker.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import context, payload
from ..client.arguments import _coerce, check_arguments, find_complex
from . import envelope, keyring
from .errors import EncryptionError

logger = logging.getLogger("wurk_django.client.push")


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
        config = context.config()  # inside a job, the worker's own (its shard, its settings)
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
