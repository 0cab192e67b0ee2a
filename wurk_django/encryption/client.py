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
from ..arguments import _coerce, check_arguments, find_complex
from . import envelope, keyring

logger = logging.getLogger("wurk_django.client")


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


_warned: set[str] = set()


def _warn_cleartext(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        logger.warning("%s has encrypt=True but no encryption key is configured (WURK['ENCRYPTION'] or "
                       "wurk_django.encryption.enable()): its last argument is stored in clear text", name)


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
            # As Sidekiq Enterprise does: `encrypt` without keys pushes the job as it is
            # (ENT-603), so a process without keys (a test run, a tool) can still push.
            # The warning names the class once per process, never the value.
            from .. import testing

            if redis is not None and testing.mode(config) not in ("fake", "inline"):
                _warn_cleartext(str(job["class"]))
            return call_next()
        mode = config.on_complex_arguments
        head = check_arguments(job["class"], args[:-1], mode)
        job["args"] = [*head, envelope.seal(ring, _clear_value(job, args[-1], mode))]
        return call_next()
