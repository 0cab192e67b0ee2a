"""``manage.py wurk --reload``: restart the worker when its Python code changes (development).

As with Django's autoreloader, a parent process runs the worker as a child
(``RUN_MAIN=true``) and starts it again whenever it exits with status 3. Unlike ``runserver``, the
worker keeps its main thread (signals are delivered there), so the file watch
runs on a thread of its own: on a change it asks for a normal graceful stop,
and the command exits 3 once the running jobs are done.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("wurk_django.worker")

CHECK_INTERVAL = 1.0
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGUSR2, signal.SIGTTIN)


class CodeWatcher:
    def __init__(self, on_change: Callable[[Path], None], interval: float = CHECK_INTERVAL) -> None:
        self.on_change = on_change
        self.interval = interval
        self.changed: Path | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wurk-reload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _snapshot(self) -> dict[Path, float]:
        from django.utils import autoreload

        mtimes = {}
        for path in autoreload.iter_all_python_module_files():
            try:
                mtimes[path] = path.stat().st_mtime
            except OSError:
                continue  # a module file that went away: ignored, as runserver does
        return mtimes

    def _run(self) -> None:
        known = self._snapshot()
        while not self._stop.wait(self.interval):
            for path, mtime in self._snapshot().items():
                if path in known and mtime != known[path]:
                    self.changed = path
                    logger.info("%s changed: restarting the worker", path)
                    self.on_change(path)
                    return
                known.setdefault(path, mtime)


def run_watcher_parent() -> int:
    """The parent side: run the worker as a child, again each time it exits with status 3.

    Signals sent to this parent (TERM from a terminal or a process manager, TSTP,
    USR2, TTIN) are passed on to the worker, so stopping the parent drains the
    worker as usual; the parent then exits with the worker's status.
    """
    from django.utils import autoreload

    logger.info("watching for code changes (--reload)")
    args = [str(a) for a in autoreload.get_child_arguments()]
    child: subprocess.Popen | None = None

    def forward(signum: int, frame: object) -> None:
        if child is not None and child.poll() is None:
            os.kill(child.pid, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        child = subprocess.Popen(args, env={**os.environ, "RUN_MAIN": "true"}, close_fds=False)
        code = child.wait()
        if code != 3:
            return code
