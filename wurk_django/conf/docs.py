"""The settings tables of docs/configuration.md, generated from the settings table's rows
(``python -m wurk_django.settings_doc`` prints them)."""

from __future__ import annotations

from typing import Any

from .setting import SECTIONS, Setting

MARKDOWN_BEGIN = ("<!-- settings table: generated from the settings rows (wurk_django/conf/core.py and each "
                  "feature's settings.py) by `python -m wurk_django.settings_doc`; edit the rows there, not here -->")
MARKDOWN_END = "<!-- end of the generated settings table -->"


def _shown(value: Any) -> str:
    """A default as a user writes it in settings.py (double quotes, no digit separators)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def markdown(settings: tuple[Setting, ...] | None = None) -> str:
    """The settings tables of docs/configuration.md, one per section, between the two markers."""
    if settings is None:
        from .table import current

        settings = current().settings
    present = {s.section for s in settings}
    sections = [s for s in SECTIONS if s in present]
    sections += [s for s in dict.fromkeys(s.section for s in settings) if s not in sections]
    lines = [MARKDOWN_BEGIN]
    for section in sections:
        lines += ["", f"### {section}", "", "| Key | Default | Meaning |", "|---|---|---|"]
        lines += [f"| `{s.name}` | `{_shown(s.default)}` | {s.doc.replace('|', chr(92) + '|')} |"
                  for s in settings if s.section == section]
    lines += ["", MARKDOWN_END]
    return "\n".join(lines) + "\n"
