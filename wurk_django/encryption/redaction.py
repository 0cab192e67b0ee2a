"""Keeping a decrypted argument out of error messages (ENT-610).

While a job runs, its last argument is plaintext; an exception it raises may
quote it (``ValueError(f"card {number} declined")``), and that message would
be stored in the retry and dead sets, logged and shown in the admin. Before
the exception leaves the job, every text form of the argument (the whole
value, and each string or number inside it of at least
:data:`MIN_LENGTH` characters) is replaced by ``[encrypted data]`` in the
exception's arguments and notes, along its cause/context chain. Shorter
pieces are left alone: masking every "1" would make messages unreadable and
protects nothing.
"""

from __future__ import annotations

from typing import Any

from .. import canonical
from .envelope import PLACEHOLDER

MIN_LENGTH = 4


def needles(value: Any) -> list[str]:
    """The texts to mask, longest first."""
    found: set[str] = set()

    def add(text: str) -> None:
        if len(text) >= MIN_LENGTH:
            found.add(text)

    def walk(item: Any) -> None:
        if isinstance(item, str):
            add(item)
        elif isinstance(item, bool) or item is None:
            return
        elif isinstance(item, (int, float)):
            add(str(item))
        elif isinstance(item, dict):
            for inner in item.values():
                walk(inner)
        elif isinstance(item, list):
            for inner in item:
                walk(inner)

    walk(value)
    for form in (repr, str, canonical.dumps):
        try:
            add(form(value))
        except Exception:  # a form that cannot be made cannot leak either
            pass
    return sorted(found, key=len, reverse=True)


def mask(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, PLACEHOLDER)
    return text


def _masked_arg(arg: Any, secrets: list[str]) -> Any:
    if isinstance(arg, str):
        return mask(arg, secrets)
    try:
        shown = repr(arg)
    except Exception:
        return arg
    return PLACEHOLDER if any(s in shown for s in secrets) else arg


def _chain(exc: BaseException):
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def leaks(exc: BaseException, secrets: list[str]) -> bool:
    """True when the message of ``exc`` or of an exception in its chain still shows a secret."""
    for item in _chain(exc):
        try:
            text = str(item)
        except Exception:
            continue
        if any(s in text for s in secrets):
            return True
    return False


def scrub(exc: BaseException, value: Any) -> bool:
    """Mask ``value`` in ``exc`` and its chain in place; False when a custom ``__str__``
    still shows it (the caller must then replace the exception)."""
    secrets = needles(value)
    if not secrets:
        return True
    for item in _chain(exc):
        try:
            item.args = tuple(_masked_arg(a, secrets) for a in item.args)
        except Exception:  # an exception type with read-only args
            pass
        notes = getattr(item, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [mask(n, secrets) if isinstance(n, str) else n for n in notes]
    return not leaks(exc, secrets)


class RedactedError(Exception):
    """Stands in for an exception whose message could not be cleaned of an encrypted argument."""
