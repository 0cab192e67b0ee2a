"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

The home page is README.md, so the two never drift apart: README is what GitHub and PyPI
show, and its links into docs/ (``docs/jobs.md``) are written from the repository's top.
The site's pages live in docs/, so the home page is README with that ``docs/`` prefix
taken off its links, generated in memory as ``index.md`` (nothing written to docs/).
CHANGELOG.md, also at the top for the same readers, becomes ``changelog.md`` the same way,
and README's link to it is pointed there.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

_INTO_DOCS = re.compile(r"\]\(docs/")
_TO_CHANGELOG = re.compile(r"\]\(CHANGELOG\.md")


def on_files(files: Files, config) -> Files:
    if files.get_file_from_path("index.md") is not None:
        raise PluginError("docs/index.md exists: the home page is generated from README.md (docsite/hooks.py)")
    readme = Path(config.config_file_path).resolve().parent / "README.md"
    home = _TO_CHANGELOG.sub("](changelog.md", _INTO_DOCS.sub("](", readme.read_text()))
    files.append(File.generated(config, "index.md", content=home))
    changelog = readme.with_name("CHANGELOG.md")
    files.append(File.generated(config, "changelog.md", content=_INTO_DOCS.sub("](", changelog.read_text())))
    return files
