"""The push side: checking and writing jobs into Redis (``Client``, ``enqueue_to``), after
a commit, or buffered while Redis is unreachable.

``Client``, ``push``, ``push_bulk`` and ``enqueue_to`` are read lazily from
:mod:`wurk_django.client.push`: the package's other modules (the write path, the
transaction hook) are imported by code that must not load the whole client first.
"""

from typing import Any

_PUBLIC = ("Client", "push", "push_bulk", "enqueue_to")
__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        from . import push as _push

        return getattr(_push, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
