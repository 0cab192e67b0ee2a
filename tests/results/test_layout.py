"""One writer of result records (issue 41 item 5): outside ``wurk_django/results/``, no
module writes a ``status:<id>`` hash or even builds its key; inside, only ``record.py``
calls the store's writing functions. Read from the source, like the project's other
layout tests, so a new area that writes records on its own fails here."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import PACKAGE

RESULTS = PACKAGE / "results"
#: The store's functions that change a record (Redis or this process's memory).
WRITES = re.compile(r"\b(result_)?store\.(write|delete|commands|update_local|forget_local)\(|\bresults\.write\("
                    r"|\brecords\.update_local\(")
#: Building a record's key: only the store does (keys.py names it for the key registry).
KEY = re.compile(r"\btask_status\(|[\"']status:\{|\bresult_store\b")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _hits(pattern: re.Pattern[str], path: Path) -> list[str]:
    name = path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name
    return [f"{name}:{n}: {line.strip()}"
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_the_scan_sees_writes(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("store.write(redis, jid, {}, 1)\nkey = keys.task_status(jid)\nx = f'status:{jid}'\n")
    assert len(_hits(WRITES, sample)) == 1 and len(_hits(KEY, sample)) == 2
    sample.write_text("result_store.write(redis, jid, {}, 1)\nresults.write(r, j, {}, 1)\n")
    assert len(_hits(WRITES, sample)) == 2


def test_only_the_results_writer_writes_records():
    found = [hit for path in _sources() if path != RESULTS / "record.py" for hit in _hits(WRITES, path)]
    assert not found, "result records are written by wurk_django/results/record.py only:\n" + "\n".join(found)


def test_only_the_results_store_knows_where_records_live():
    # The cluster layout (issue 46) names every key of the Sidekiq layout beside its cluster
    # placement, a record's among them, through keys.task_status: the one other reader.
    allowed = {RESULTS / "store.py", PACKAGE / "keys.py", PACKAGE / "redis" / "cluster_layout.py"}
    found = [hit for path in _sources() if path not in allowed for hit in _hits(KEY, path)]
    assert not found, "a result record's key is built by wurk_django/results/store.py only:\n" + "\n".join(found)
