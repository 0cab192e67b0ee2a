"""Who is calling the HTTP API: the ``Authorization: Bearer`` header matched against
``WURK["HTTP_API_TOKENS"]`` in constant time, and what each scope opens."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from .. import context

ENQUEUE = "enqueue"
READ = "read"
ADMIN = "admin"


@dataclass(frozen=True)
class Token:
    """One configured token: its name (for logs, the rate limit and idempotency keys), its
    secret, its scopes and its own rate limit (``None``: the ``HTTP_API_RATE_LIMIT``)."""

    name: str
    secret: bytes
    scopes: frozenset[str]
    rate_limit: dict[str, Any] | None = None

    @classmethod
    def from_setting(cls, name: str, entry: dict[str, Any]) -> Token:
        return cls(name, entry["TOKEN"].encode(), frozenset(entry["SCOPES"]), entry.get("RATE_LIMIT"))

    def allows(self, scope: str) -> bool:
        """``admin`` opens every endpoint; the other scopes open their own."""
        return ADMIN in self.scopes or scope in self.scopes

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"<Token {self.name!r} scopes={sorted(self.scopes)}>"


def presented(header: str) -> bytes | None:
    """The token of an ``Authorization`` header (``Bearer <token>``, scheme in any case)."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip().encode()


def authenticate(header: str) -> Token | None:
    """The configured token the header presents, or ``None``.

    Every configured token is compared, with :func:`hmac.compare_digest`, whichever
    matches: how long this takes says how many tokens there are, never which one (or how
    much of one) a guess got right."""
    given = presented(header)
    if given is None:
        return None
    found = None
    for token in context.config().http_api_tokens.values():
        if hmac.compare_digest(given, token.secret):
            found = token
    return found
