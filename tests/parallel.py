"""One Redis database, port range and SQLite file per pytest-xdist worker.

``python -m pytest -n 2`` runs the suite in two worker processes. Every test flushes its
Redis database and may start redis-servers on ``WURK_TEST_PORTS``, so two workers must never
share either: worker ``gwN`` takes

- the N-th URL of ``WURK_TEST_REDIS_URLS`` (URLs separated by spaces or commas); without
  it, ``WURK_TEST_REDIS_URL``'s database minus N (15 and 14 by default). Database 0 is refused;
- the N-th of as many equal slices of ``WURK_TEST_PORTS`` as there are workers;
- ``WURK_TEST_SQLITE`` (or the default file) with ``-gwN`` before its suffix.

:func:`apply` writes them into ``os.environ`` before the settings read it, so the worker
processes a test starts inherit the worker's own values; ``WURK_TEST_PARALLEL_APPLIED``
records that it ran, so those processes (which inherit ``PYTEST_XDIST_WORKER`` too) do not
slice a second time. Outside xdist nothing changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path

APPLIED = "WURK_TEST_PARALLEL_APPLIED"
DEFAULT_URL = "redis://127.0.0.1:6379/15"
DEFAULT_PORTS = "7100-7199"


def worker_index(worker: str) -> int:
    """``gw3`` -> 3 (xdist's names for its workers)."""
    match = re.fullmatch(r"gw(\d+)", worker)
    if match is None:
        raise RuntimeError(f"unexpected PYTEST_XDIST_WORKER {worker!r} (xdist names its workers gw0, gw1, ...)")
    return int(match.group(1))


def redis_url(environ: MutableMapping[str, str], index: int) -> str:
    listed = [url for url in re.split(r"[\s,]+", environ.get("WURK_TEST_REDIS_URLS", "")) if url]
    if listed:
        if index >= len(listed):
            raise RuntimeError(f"xdist worker gw{index} has no database: WURK_TEST_REDIS_URLS names {len(listed)} "
                               f"({' '.join(listed)}); name one per worker (-n)")
        return listed[index]
    base = environ.get("WURK_TEST_REDIS_URL", DEFAULT_URL)
    head, _, db = base.rpartition("/")
    if not db.isdigit() or int(db) - index < 1:
        raise RuntimeError(f"cannot derive a database for xdist worker gw{index} from WURK_TEST_REDIS_URL {base!r}: "
                           "set WURK_TEST_REDIS_URLS, one URL per worker")
    return f"{head}/{int(db) - index}"


def port_range(environ: MutableMapping[str, str], index: int, count: int) -> str:
    spec = environ.get("WURK_TEST_PORTS", DEFAULT_PORTS)
    low, _, high = spec.partition("-")
    size = (int(high) - int(low) + 1) // count
    if size < 10:
        raise RuntimeError(f"WURK_TEST_PORTS {spec} is too small for {count} xdist workers (10 ports each at least)")
    start = int(low) + index * size
    return f"{start}-{start + size - 1}"


def sqlite_path(environ: MutableMapping[str, str], worker: str) -> str:
    path = Path(environ.get("WURK_TEST_SQLITE", str(Path(__file__).resolve().parent.parent / ".test-db.sqlite3")))
    return str(path.with_name(f"{path.stem}-{worker}{path.suffix}"))


def apply(environ: MutableMapping[str, str] = os.environ) -> None:
    """Give this xdist worker its own database, ports and SQLite file (nothing outside xdist)."""
    worker = environ.get("PYTEST_XDIST_WORKER")
    if not worker or environ.get(APPLIED) == worker:
        return
    index = worker_index(worker)
    count = int(environ.get("PYTEST_XDIST_WORKER_COUNT", index + 1))
    values = {
        "WURK_TEST_REDIS_URL": redis_url(environ, index),
        "WURK_TEST_PORTS": port_range(environ, index, count),
        "WURK_TEST_SQLITE": sqlite_path(environ, worker),
    }
    environ.update(values)
    environ[APPLIED] = worker
