"""Queue names in the admin's URLs: any name Sidekiq accepts, ``mailers/high`` included.

A queue name is any non-empty string (``café``, ``with space``, ``100%``,
``mailers/high``). Django percent-encodes what a URL cannot hold when it
reverses a URL and decodes it before matching, but a ``/`` would still split
the path, and a browser folds a ``.`` or ``..`` segment away. So those are
written ``~2F`` and ``~2E`` (and ``~`` itself ``~7E``) in the URL path, and
read back here. Sidekiq's own Web UI answers 404 for names outside
``[a-z0-9_:.-]`` (CORE-183); we show them, as docs/admin.md says.
"""

from __future__ import annotations

import re

_ESCAPED = re.compile(r"~([0-9A-Fa-f]{2})")


def to_url(name: str) -> str:
    """``name`` as one URL path segment (before Django's percent-encoding)."""
    text = name.replace("~", "~7E").replace("/", "~2F")
    if text.strip(".") == "":
        text = text.replace(".", "~2E")
    return text


def from_url(segment: str) -> str:
    """The queue name a path segment written by :func:`to_url` stands for."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), segment)


class QueueNameConverter:
    """The ``<wurk_queue:name>`` path converter of the queue pages."""

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return from_url(value)

    def to_url(self, value: str) -> str:
        return to_url(value)
