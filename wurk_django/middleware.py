"""Middleware chains, client side and server side (CORE-082, CORE-114).

A middleware is a class whose instances are called once per job:

* client: ``mw(job_class, job, queue, redis, call_next)``; return
  ``call_next()`` to continue, or a falsy value to stop the push;
* server: ``mw(job_instance, job, queue, call_next)``; not calling
  ``call_next()`` skips ``perform``; raising fails the job. The job's
  context (the worker's config, the Redis the job came from and, once
  ``call_next()`` returned, how an inner layer ended the run) is
  ``wurk_django.context.current()``; a middleware that ends the run another
  way sets its ``outcome`` and returns (see wurk_django.outcome).

A fresh instance is built per job from the arguments given at registration,
so middleware can keep per-job state on ``self`` safely across threads.

A middleware class may define ``applies(job) -> bool`` (a static or class
method): when it returns False the middleware is left out of that job's chain
(no instance, no call). It is asked when the middleware's turn comes, so one
further out may still change the job. The built-in ones (unique jobs,
encryption, the batch client) use it so that a job which does not use their
feature pays nothing for them; it must be cheap and change nothing (the
profiling middleware asks whether the job carries a profile token). One whose
``applies`` says no to every job that lacks a given key names that key in
``applies_key``: the chain asks ``applies`` only of a job that has it, so the
common job costs it a dict lookup, not a call.

A server middleware that acts only when the layers inside it raise may define
``rescue(self, exc, instance, job, queue) -> bool`` as well as its ``__call__``
(which must mean ``try: return call_next() except Exception as exc: ...``). The
chain then runs the inner layers inside a ``try`` of its own and builds the
instance only when one raises: ``rescue`` returns True when it handled ``exc``
(the run returns ``None``), False to let it through; it may also raise. A job
that does not fail pays no instance, no ``call_next`` and no frame for it (the
rate limiters' middleware: every job, for a failure few jobs have).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from django.utils.module_loading import import_string


class Entry:
    __slots__ = ("klass", "args", "kwargs", "applies", "key", "rescues")

    def __init__(self, klass: Any, args: tuple = (), kwargs: dict | None = None) -> None:
        self.klass = import_string(klass) if isinstance(klass, str) else klass
        self.args = args
        self.kwargs = kwargs or {}
        self.applies: Callable[[dict], bool] | None = getattr(self.klass, "applies", None)
        # A job without this key is one applies() says no to (see the module docstring).
        self.key: str | None = getattr(self.klass, "applies_key", None) if self.applies is not None else None
        # Acts only on an exception of the inner layers (see the module docstring).
        self.rescues = callable(getattr(self.klass, "rescue", None))

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

    def applies_to(self, job: dict) -> bool:
        """Whether any middleware of this chain has something to do with ``job``."""
        return any(_applies(e, job) for e in self._entries)

    def invoke(self, args: tuple, last: Callable[[], Any]) -> Any:
        """Run every middleware that applies around ``last``; each gets ``*args, call_next``.
        ``args[1]`` is the job dict on both sides."""
        if not self._entries:
            return last()
        job = args[1] if len(args) > 1 and isinstance(args[1], dict) else None
        return _step(self._entries, 0, args, job, last)


def _step(entries: list[Entry], i: int, args: tuple, job: dict | None, last: Callable[[], Any]) -> Any:
    """Call the first middleware from ``entries[i]`` on that applies, or ``last``.

    Each ``call_next`` is a ``partial`` of this function, not a closure over a
    local that refers to itself: that would be a reference cycle per job, which
    only the garbage collector frees (ten objects a job, a collection every
    sixty jobs on a busy worker)."""
    count = len(entries)
    while i < count:
        entry = entries[i]
        i += 1
        # Asked when its turn comes, so a middleware further out may still turn the
        # feature on (args[1] is the job on both sides).
        if job is not None:
            key = entry.key
            if key is not None and key not in job:
                continue
            if entry.applies is not None and not entry.applies(job):
                continue
        if entry.rescues:
            # The same as calling it with call_next, minus the instance and the layer
            # for a job whose inner layers return: it is made only to rescue.
            try:
                return _step(entries, i, args, job, last)
            except Exception as exc:
                if entry.make().rescue(exc, *args):
                    return None
                raise
        return entry.make()(*args, partial(_step, entries, i, args, job, last))
    return last()


def _applies(entry: Entry, job: dict) -> bool:
    if entry.key is not None and entry.key not in job:
        return False
    return entry.applies is None or bool(entry.applies(job))


# -- built-in middleware registry ------------------------------------------------------
#
# Features (batches, unique jobs, limiters, encryption...) register their own
# middleware here, in code, instead of asking users to list them in settings.
# Each entry has a position: negative positions run *outside* the user's
# CLIENT_MIDDLEWARE / SERVER_MIDDLEWARE (they see the job first and the outcome
# last), positive ones run *inside* (closest to the push or to ``perform``).
# The user's own list keeps its order at position 0. docs/architecture.md has
# the table of every built-in position.

SIDES = ("client", "server")
_builtin: dict[str, dict[str, tuple[int, Any, tuple, dict]]] = {side: {} for side in SIDES}
#: Bumped by every change to the built-ins: a chain cached under another version is stale.
_version = 0


def register(side: str, name: str, klass: Any, *args: Any, position: int, **kwargs: Any) -> None:
    """Register a built-in middleware under ``name`` (re-registering replaces it).

    ``position`` must not be 0 (that slot is the user's list); lower runs first.
    """
    if side not in SIDES:
        raise ValueError(f"middleware side must be one of {SIDES}, not {side!r}")
    if not isinstance(position, int) or isinstance(position, bool) or position == 0:
        raise ValueError(f"a built-in middleware position must be a non-zero int, not {position!r}")
    global _version
    _builtin[side][name] = (position, klass, args, kwargs)
    _version += 1


def unregister(side: str, name: str) -> None:
    global _version
    _builtin[side].pop(name, None)
    _version += 1


def registered(side: str) -> list[tuple[int, str]]:
    """``(position, name)`` of the built-ins of one side, in chain order."""
    return sorted((pos, name) for name, (pos, *_rest) in _builtin[side].items())


def build_chain(side: str, user_entries: Iterable[Any]) -> Chain:
    """Built-ins around the user's middleware, in position order (the one place chains are built)."""
    # Lazy: features.install() imports the feature packages, whose install() imports
    # this module to register here; and it must run at first use, not at import.
    # Only this side's part: a process that pushes loads nothing of the worker.
    from . import features

    features.install(side)
    chain = Chain()
    entries = sorted(_builtin[side].items(), key=lambda item: item[1][0])
    for _name, (pos, klass, args, kwargs) in entries:
        if pos < 0:
            chain.add(klass, *args, **kwargs)
    user = Chain(user_entries)
    chain._entries.extend(user._entries)
    for _name, (pos, klass, args, kwargs) in entries:
        if pos > 0:
            chain.add(klass, *args, **kwargs)
    return chain


def client_chain(config: Any) -> Chain:
    """The client chain for ``config``: built-ins plus ``CLIENT_MIDDLEWARE``.

    Built once per config and registry state, then shared: every push reads it, and
    building it costs more than the rest of a push's Python. A settings change makes
    a new config (a new chain); a middleware registered later bumps the registry's
    version (a new chain on the next push). Callers that want to change a chain
    change a :meth:`Chain.copy` (``Client.middleware`` is one).
    """
    cached = config.memo.get("client_chain")
    if cached is not None and cached[0] == _version:
        return cached[1]
    # The version read before the build: a registration meanwhile (build_chain installs
    # the features, which register) leaves this entry stale, so the next push builds again.
    version = _version
    chain = build_chain("client", config.client_middleware)
    config.memo["client_chain"] = (version, chain)
    return chain


def server_chain(config: Any) -> Chain:
    """The server chain for ``config``: built-ins plus ``SERVER_MIDDLEWARE``."""
    return build_chain("server", config.server_middleware)
