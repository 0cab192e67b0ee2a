"""Raising an exception inside another thread: the one place that touches the interpreter for it.

CPython offers ``PyThreadState_SetAsyncExc``: the target thread raises the
exception at its next bytecode boundary. That is prompt in Python code and
impossible inside one long C call (``time.sleep``, a socket read, a regex, a
hash over a large buffer, a database driver waiting on the server): the
exception waits until the call returns to Python. docs/time-limits.md says what
was measured.

Where the call is unavailable (an interpreter other than CPython), :data:`SUPPORTED`
is False and :func:`raise_in` returns False: a soft stop is then not delivered,
and only the hard stop (abandoning the thread) remains.
"""

from __future__ import annotations

import ctypes
import platform
from typing import Any

SUPPORTED = platform.python_implementation() == "CPython" and hasattr(ctypes, "pythonapi")

if SUPPORTED:
    # A prototype of our own: setting argtypes on ctypes.pythonapi's shared function object
    # would change it for every other library in the process that calls it.
    _set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
        ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


def raise_in(ident: int | None, exc_type: type[BaseException]) -> bool:
    """Ask thread ``ident`` to raise ``exc_type`` at its next bytecode; True if asked."""
    if not SUPPORTED or not ident:
        return False
    changed = _set_async_exc(ident, exc_type)
    if changed > 1:  # more than one thread state touched: undo, never hit the wrong thread
        _set_async_exc(ident, _null())
        return False
    return changed == 1


def clear(ident: int | None) -> None:
    """Withdraw an exception asked for with :func:`raise_in` and not yet raised."""
    if SUPPORTED and ident:
        _set_async_exc(ident, _null())


def _null() -> Any:
    # py_object(None) would pass Py_None; the C API wants NULL to clear.
    return ctypes.cast(None, ctypes.py_object)
