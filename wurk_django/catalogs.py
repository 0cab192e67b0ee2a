"""The admin's translation catalogs (``wurk_django/locale/<lang>/LC_MESSAGES/django.po``
and the compiled ``django.mo`` beside each): update them from the sources, compile
them without GNU gettext, and read them back (the tests compare all three).

After strings change in a template or a view, from the repository root::

    python -m wurk_django.catalogs            # .po from the sources (xgettext + msgmerge), then .mo
    python -m wurk_django.catalogs --compile  # only .po -> .mo, in pure Python (no gettext needed)
    python -m wurk_django.catalogs --add de   # start a catalog for another language

Updating runs Django's ``makemessages`` (it needs GNU gettext's tools: ``apt-get install
gettext``); compiling is done here, so the committed ``.mo`` never depends on them.
Both list the messages still without a translation and exit 1 while there are some.
"""

from __future__ import annotations

import ast
import io
import os
import struct
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
LOCALE = PACKAGE / "locale"
TEMPLATES = PACKAGE / "templates"
#: Left out of the search for strings, here and by ``makemessages``.
IGNORED = ("migrations",)
#: The translation functions, and which arguments are (context, singular, plural).
FUNCTIONS = {
    "_": (None, 0, None), "gettext": (None, 0, None), "gettext_lazy": (None, 0, None),
    "gettext_noop": (None, 0, None), "ngettext": (None, 0, 1), "ngettext_lazy": (None, 0, 1),
    "pgettext": (0, 1, None), "pgettext_lazy": (0, 1, None), "npgettext": (0, 1, 2), "npgettext_lazy": (0, 1, 2),
}

Key = tuple[str | None, str]  # (context, msgid)


@dataclass
class Entry:
    """One message of a ``.po`` file."""

    msgid: str
    context: str | None = None
    plural: str | None = None
    strings: list[str] = field(default_factory=list)  # msgstr, or msgstr[0], msgstr[1], ...
    fuzzy: bool = False

    @property
    def key(self) -> Key:
        return self.context, self.msgid

    @property
    def translated(self) -> bool:
        return not self.fuzzy and bool(self.strings) and all(self.strings)


def languages() -> list[str]:
    """The languages with a catalog."""
    return sorted(p.name for p in LOCALE.iterdir() if (p / "LC_MESSAGES" / "django.po").exists())


def po_path(language: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / "django.po"


# -- reading ------------------------------------------------------------------------


def _unquote(text: str) -> str:
    return ast.literal_eval(text)


def read_po(path: Path) -> list[Entry]:
    """Every entry of a ``.po`` file, the header (msgid ``""``) first; obsolete ones (``#~``) left out."""
    entries: list[Entry] = []
    current: Entry | None = None
    target: tuple[str, int] | None = None  # which field a continuation line extends
    fuzzy = False

    def finish() -> None:
        nonlocal current
        if current is not None:
            entries.append(current)
        current = None

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            finish()
            fuzzy, target = False, None
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            continue
        if line.startswith('"'):
            if current is None or target is None:
                raise ValueError(f"{path}: a string continues nothing: {raw!r}")
            name, index = target
            if name == "msgstr":
                current.strings[index] += _unquote(line)
            else:
                setattr(current, name, (getattr(current, name) or "") + _unquote(line))
            continue
        word, _, rest = line.partition(" ")
        if word in ("msgctxt", "msgid") and current is not None and (word == "msgctxt" or current.msgid or
                                                                       current.strings):
            finish()
        if current is None:
            current = Entry(msgid="", fuzzy=fuzzy)
        if word == "msgctxt":
            current.context, target = _unquote(rest), ("context", 0)
        elif word == "msgid":
            current.msgid, target = _unquote(rest), ("msgid", 0)
        elif word == "msgid_plural":
            current.plural, target = _unquote(rest), ("plural", 0)
        elif word == "msgstr":
            current.strings = [_unquote(rest)]
            target = ("msgstr", 0)
        elif word.startswith("msgstr["):
            index = int(word[len("msgstr["):-1])
            while len(current.strings) <= index:
                current.strings.append("")
            current.strings[index] = _unquote(rest)
            target = ("msgstr", index)
        else:
            raise ValueError(f"{path}: cannot read {raw!r}")
    finish()
    return entries


# -- compiling ----------------------------------------------------------------------


def mo_bytes(entries: list[Entry]) -> bytes:
    """A GNU ``.mo`` file of the translated entries (and the header), as ``msgfmt`` would
    keep them: fuzzy and untranslated ones are left out. No hash table: readers fall back
    to a binary search, and Python's ``gettext`` reads the table directly anyway."""
    pairs: dict[bytes, bytes] = {}
    for entry in entries:
        if entry.msgid and not entry.translated:
            continue
        key = entry.msgid if entry.plural is None else f"{entry.msgid}\0{entry.plural}"
        if entry.context is not None:
            key = f"{entry.context}\x04{key}"
        pairs[key.encode("utf-8")] = "\0".join(entry.strings).encode("utf-8")
    keys = sorted(pairs)
    header_size = 7 * 4
    originals_at = header_size
    translations_at = originals_at + 8 * len(keys)
    data_at = translations_at + 8 * len(keys)
    table_o, table_t, data = [], [], b""
    for key in keys:
        table_o.append((len(key), data_at + len(data)))
        data += key + b"\0"
    for key in keys:
        value = pairs[key]
        table_t.append((len(value), data_at + len(data)))
        data += value + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, len(keys), originals_at, translations_at, 0, 0)
    out += b"".join(struct.pack("<2I", *pair) for pair in table_o)
    out += b"".join(struct.pack("<2I", *pair) for pair in table_t)
    return out + data


def compile_all() -> list[Path]:
    """Write ``django.mo`` beside every ``django.po``."""
    written = []
    for language in languages():
        po = po_path(language)
        mo = po.with_suffix(".mo")
        mo.write_bytes(mo_bytes(read_po(po)))
        written.append(mo)
    return written


# -- the strings in the sources -----------------------------------------------------


def _calls(tokens: list[tokenize.TokenInfo]) -> Iterator[tuple[str, list[str | None]]]:
    """``(function, literal arguments)`` of every translation call in a token stream;
    an argument that is not a string literal is ``None``."""
    for i, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string not in FUNCTIONS:
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].string != "(":
            continue
        if i > 0 and tokens[i - 1].string in (".", "def"):
            continue
        args: list[str | None] = []
        current: str | None = None
        literal = True
        depth = 0
        for tok in tokens[i + 2:]:
            if tok.string in "([{" and tok.type == tokenize.OP:
                depth += 1
                literal = False
            elif tok.string in ")]}" and tok.type == tokenize.OP:
                if depth == 0:
                    args.append(current if literal else None)
                    break
                depth -= 1
            elif tok.string == "," and depth == 0:
                args.append(current if literal else None)
                current, literal = None, True
            elif tok.type == tokenize.STRING and depth == 0 and literal:
                current = (current or "") + ast.literal_eval(tok.string)  # adjacent literals join
            elif tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                continue
            else:
                literal = False
        yield token.string, args


def _keys_from_calls(calls: Iterator[tuple[str, list[str | None]]], where: str) -> dict[Key, str]:
    found: dict[Key, str] = {}
    for name, args in calls:
        context_at, singular_at, _plural_at = FUNCTIONS[name]
        needed = [i for i in (context_at, singular_at) if i is not None]
        if len(args) <= max(needed) or any(args[i] is None for i in needed):
            continue  # a variable, not a literal: nothing to extract (as xgettext)
        context = args[context_at] if context_at is not None else None
        found[(context, args[singular_at])] = where
    return found


def template_messages(path: Path) -> dict[Key, str]:
    """The messages of one template, read as ``makemessages`` reads them (Django's templatize)."""
    from django.utils.translation.template import templatize

    code = templatize(path.read_text(encoding="utf-8"), origin=str(path))
    tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    return _keys_from_calls(_calls(tokens), str(path.relative_to(PACKAGE)))


def python_messages(path: Path) -> dict[Key, str]:
    with path.open("rb") as source:
        tokens = list(tokenize.tokenize(source.readline))
    return _keys_from_calls(_calls(tokens), str(path.relative_to(PACKAGE)))


def source_messages() -> dict[Key, str]:
    """Every message the package's templates and Python sources ask to translate,
    with the file it first appears in."""
    found: dict[Key, str] = {}
    for path in sorted(TEMPLATES.rglob("*.html")):
        for key, where in template_messages(path).items():
            found.setdefault(key, where)
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in IGNORED:
            continue
        for key, where in python_messages(path).items():
            found.setdefault(key, where)
    return found


# -- updating -----------------------------------------------------------------------


def _configure_django() -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure(USE_I18N=True, INSTALLED_APPS=[], TEMPLATES=[
            {"BACKEND": "django.template.backends.django.DjangoTemplates"}])
    import django

    django.setup()


def make_messages(add: list[str] | None = None) -> None:
    """Django's ``makemessages`` over this package, for every language with a catalog
    (and ``add``): new strings come in untranslated, gone ones are dropped."""
    from django.core.management import call_command

    _configure_django()
    wanted = sorted(set(languages()) | set(add or []))
    for language in add or []:
        (LOCALE / language / "LC_MESSAGES").mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(PACKAGE)  # makemessages writes to ./locale
    try:
        call_command("makemessages", locale=wanted, domain="django", extensions=["html", "py"],
                     ignore_patterns=[f"{name}/*" for name in IGNORED], no_obsolete=True,
                     add_location="file", verbosity=0)
    finally:
        os.chdir(here)


def untranslated() -> dict[str, list[str]]:
    """Per language, the messages without a (non-fuzzy) translation."""
    return {language: [e.msgid for e in read_po(po_path(language)) if e.msgid and not e.translated]
            for language in languages()}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m wurk_django.catalogs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="only compile .po to .mo (no gettext needed)")
    parser.add_argument("--add", action="append", metavar="LANG", help="start a catalog for LANG (e.g. de)")
    options = parser.parse_args(argv)
    if not options.compile:
        make_messages(options.add)
    for mo in compile_all():
        print(f"wrote {mo.relative_to(PACKAGE.parent)}")
    missing = untranslated()
    for language, msgids in missing.items():
        for msgid in msgids:
            print(f"{language}: untranslated: {msgid!r}", file=sys.stderr)
    return 1 if any(missing.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
