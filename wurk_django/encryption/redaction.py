"""Keeping a decrypted argument out of error messages (ENT-610).

While a job runs, its last argument is plaintext; an exception it raises may
quote it (``ValueError(f"card {number} declined")``), and that message would
be stored in the retry and dead sets, logged and shown in the admin. Before
the exception leaves the job, every text form of the argument is replaced by
``[encrypted data]`` in the exception's arguments and notes, along its
cause/context chain. What counts as a text form:

* the whole value (its ``repr``, ``str`` and JSON);
* each string or number inside it, of 4 characters or more, or of 3 when it
  holds a digit (a card's CVC, a PIN);
* the same with its spaces, dashes and dots taken out ("4242424242424242" for
  "4242 4242 4242 4242"), and each part between them ("4242", a card's last
  four), under the same lengths.

A piece of 3 characters is masked only where it stands alone (not inside a
longer word or number), so a CVC "123" leaves "order 51234" readable. Shorter
pieces, and anything the job derives otherwise (a hash, a slice inside a
token), are not recognised: masking every "1" would make messages unreadable
and protects nothing.
"""

from __future__ import annotations

import re
from typing import Any

from .. import canonical
from .envelope import PLACEHOLDER

MIN_LENGTH = 4
#: A piece this short is masked only when it holds a digit, and only as a whole token.
SHORT_LENGTH = 3
_SEPARATORS = re.compile(r"[\s\-.]+")


def _wanted(text: str) -> bool:
    return len(text) >= MIN_LENGTH or (len(text) >= SHORT_LENGTH and any(c.isdigit() for c in text))


def needles(value: Any) -> list[str]:
    """The texts to mask, longest first."""
    found: set[str] = set()

    def add(text: str) -> None:
        text = text.strip()
        if _wanted(text):
            found.add(text)
        compact = _SEPARATORS.sub("", text)
        if compact != text and _wanted(compact):
            found.add(compact)
        parts = [part for part in _SEPARATORS.split(text) if part]
        if len(parts) > 1:
            found.update(part for part in parts if _wanted(part))

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
            text = form(value)
        except Exception:  # a form that cannot be made cannot leak either
            continue
        if len(text) >= MIN_LENGTH:
            found.add(text)
    return sorted(found, key=len, reverse=True)


def _pattern(secret: str) -> re.Pattern[str]:
    escaped = re.escape(secret)
    if len(secret) < MIN_LENGTH:
        return re.compile(rf"(?<![0-9A-Za-z]){escaped}(?![0-9A-Za-z])")
    return re.compile(escaped)


def _found(secret: str, text: str) -> bool:
    return secret in text and (len(secret) >= MIN_LENGTH or _pattern(secret).search(text) is not None)


def mask(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = _pattern(secret).sub(PLACEHOLDER, text)
    return text


def _masked_arg(arg: Any, secrets: list[str]) -> Any:
    if isinstance(arg, str):
        return mask(arg, secrets)
    try:
        shown = repr(arg)
    except Exception:
        return arg
    return PLACEHOLDER if any(_found(s, shown) for s in secrets) else arg


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
        if any(_found(s, text) for s in secrets):
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
