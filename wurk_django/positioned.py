"""An ordered, named registry: what the engine's seams (write hooks, death handlers) keep.

Features add an item under a name with a position; readers get the items in
position order. Reading is a plain attribute access on a list rebuilt at each
change, because it happens per push or per death while changes happen at install.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Positioned(Generic[T]):
    def __init__(self) -> None:
        self._items: dict[str, tuple[int, T]] = {}
        self._lock = threading.Lock()
        #: The items, lowest position first (a new list after each change: safe to iterate).
        self.ordered: list[T] = []

    def add(self, name: str, item: T, position: int = 0) -> None:
        """Add (or replace, by ``name``) an item."""
        with self._lock:
            self._items[name] = (position, item)
            self._rebuild()

    def remove(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)
            self._rebuild()

    def _rebuild(self) -> None:
        self.ordered = [item for _pos, item in sorted(self._items.values(), key=lambda pair: pair[0])]
