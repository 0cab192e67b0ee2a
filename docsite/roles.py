"""A griffe extension (mkdocs.yml, mkdocstrings ``extensions:``): Sphinx roles to Markdown.

The docstrings are written for reading in the source, reStructuredText-flavoured:
``:class:`Job```, ``:func:`~wurk_django.redis.connection.get_redis```, a paragraph ending in
``::`` before an indented example. Markdown shows a role as the literal ``:class:``
followed by a code span, so each role becomes a plain code span (``~`` keeping only the
last dotted name, as Sphinx shows it), and a closing ``::`` becomes ``:``; the indented
block under it is already a Markdown code block.

It also keeps the plumbing dunders (``__repr__``, ``__eq__``, ``__slots__``...) off the
reference pages: mkdocs.yml's ``filters: public`` follows each module's ``__all__`` but
counts every special method as public. The protocol ones (``__iter__``, ``__len__``,
``__call__``, ``__or__``...) stay: they say how an object is used. ``__init__`` is merged
into its class (``merge_init_into_class``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HIDDEN = frozenset({"__init__", "__repr__", "__str__", "__eq__", "__hash__", "__slots__", "__reduce__",
                     "__init_subclass__", "__getattr__", "__post_init__", "__del__", "__class_getitem__"})
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|obj|exc|const):`(~?)([^`]+)`")
_LITERAL_AFTER_TEXT = re.compile(r"(\S)::$", re.MULTILINE)
_LITERAL_ALONE = re.compile(r"^[ \t]*::$", re.MULTILINE)


def _role(match: re.Match[str]) -> str:
    target = match.group(2).strip()
    if target.endswith(">") and "<" in target:  # :class:`the title <path.Name>`
        return f"`{target[:target.index('<')].strip()}`"
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def markdown(text: str) -> str:
    text = _ROLE.sub(_role, text)
    return _LITERAL_ALONE.sub("", _LITERAL_AFTER_TEXT.sub(r"\1:", text))


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _walk(pkg)


def _walk(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = markdown(obj.docstring.value)
    for name, member in list(obj.members.items()):
        if member.is_alias:
            continue  # documented where it is defined
        if obj.is_class and name in _HIDDEN and name != "__init__":  # __init__ stays for the merge
            # Dropped rather than marked private: an alias (the name a package re-exports)
            # does not take the target's ``public``.
            del obj.members[name]
            continue
        _walk(member)
