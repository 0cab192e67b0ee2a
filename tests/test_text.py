"""The one bytes-to-text conversion for Redis replies (issue 24 item 7)."""

from __future__ import annotations

import ast

from tests.support import PACKAGE
from wurk_django.text import to_text


def test_bytes_str_numbers_and_none():
    assert to_text(b"caf\xc3\xa9") == "café"
    assert to_text(bytearray(b"q")) == "q"
    assert to_text(memoryview(b"m")) == "m"
    assert to_text("already") == "already"
    assert to_text(42) == "42"
    assert to_text(1.5) == "1.5"
    assert to_text(None) is None


def test_bad_utf8_is_replaced_not_raised():
    assert to_text(b"ok\xff") == "ok\ufffd"


def test_no_module_defines_its_own_copy():
    """A function whose body is only ``return x.decode(...) if isinstance(x, bytes) else ...``
    (after an optional ``None`` guard) is a copy of :func:`to_text`."""
    copies = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or path.name == "text.py":
                continue
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            last = body[-1] if body else None
            if len(body) <= 3 and isinstance(last, ast.Return) and isinstance(last.value, ast.IfExp) \
                    and ".decode(" in ast.unparse(last.value):
                copies.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert copies == []
