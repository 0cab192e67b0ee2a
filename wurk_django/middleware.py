"""Middleware chains, client side and server side (CORE-082, CORE-114).

A middleware is a class whose instances are called once per job:

* client: ``mw(job_class, job, queue, redis, call_next)``; return
  ``call_next()`` to continue, or a falsy value to stop the push;
* server: ``mw(job_instance, job, queue, call_next)``; not calling
  ``call_next()`` skips ``perform``; raising fails the job.

A fresh instance is built per job from the arguments given at registration,
so middleware can keep per-job state on ``self`` safely across threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.utils.module_loading import import_string


class Entry:
    __slots__ = ("klass", "args", "kwargs")

    def __init__(self, klass: Any, args: tuple = (), kwargs: dict | None = None) -> None:
        self.klass = import_string(klass) if isinstance(klass, str) else klass
        self.args = args
        self.kwargs = kwargs or {}

    def make(self) -> Callable:
        return self.klass(*self.args, **self.kwargs)


class Chain:
    """An ordered list of middleware classes; the first entry is the outermost."""

    def __init__(self, entries: Iterable[Any] = ()) -> None:
        self._entries: list[Entry] = []
        for spec in entries:
            if isinstance(spec, (list, tuple)):
                klass, *rest = spec
                kwargs = rest[0] if rest and isinstance(rest[0], dict) else {}
                self.add(klass, **kwargs)
            else:
                self.add(spec)

    def copy(self) -> Chain:
        new = Chain()
        new._entries = list(self._entries)
        return new

    def _index(self, klass: Any) -> int:
        for i, entry in enumerate(self._entries):
            if entry.klass is klass:
                return i
        return -1

    def remove(self, klass: Any) -> None:
        self._entries = [e for e in self._entries if e.klass is not klass]

    def add(self, klass: Any, *args: Any, **kwargs: Any) -> None:
        """Append (innermost); re-adding moves an entry to the end."""
        entry = Entry(klass, args, kwargs)
        self.remove(entry.klass)
        self._entries.append(entry)

    def prepend(self, klass: Any, *args: Any, **kwargs: Any) -> None:
        entry = Entry(klass, args, kwargs)
        self.remove(entry.klass)
        self._entries.insert(0, entry)

    def insert_before(self, anchor: Any, klass: Any, *args: Any, **kwargs: Any) -> None:
        entry = Entry(klass, args, kwargs)
        self.remove(entry.klass)
        i = self._index(anchor)
        self._entries.insert(max(i, 0), entry)

    def insert_after(self, anchor: Any, klass: Any, *args: Any, **kwargs: Any) -> None:
        entry = Entry(klass, args, kwargs)
        self.remove(entry.klass)
        i = self._index(anchor)
        self._entries.insert(i + 1 if i >= 0 else len(self._entries), entry)

    def exists(self, klass: Any) -> bool:
        return self._index(klass) >= 0

    def clear(self) -> None:
        self._entries.clear()

    @property
    def entries(self) -> list[Any]:
        return [e.klass for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def invoke(self, args: tuple, last: Callable[[], Any]) -> Any:
        """Run every middleware around ``last``; each gets ``*args, call_next``."""
        if not self._entries:
            return last()
        instances = [e.make() for e in self._entries]

        def step(i: int) -> Any:
            if i == len(instances):
                return last()
            return instances[i](*args, lambda: step(i + 1))

        return step(0)
