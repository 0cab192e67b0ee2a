"""docs/architecture.md's walk of one job stays true (issue 41 item 7).

The walk names the modules a plain push and its run pass through. A page like that goes
stale the day a module is added on the way, so these tests trace a real push (in this
thread) and a real run (a worker's processor thread, in this process) and fail when the
job enters a module of the package that the walk's part for it does not name. They do
not ask the walk to be short, only honest.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from tests.support import wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = "/wurk_django/"


def _section(start: str, end: str) -> str:
    text = PAGE.read_text()
    return text[text.index(start):text.index(end)]


def _recorder(only_thread: str | None = None):
    """A profile function collecting the package modules entered, and the set it fills."""
    entered: set[str] = set()
    on = threading.Event()

    def profile(frame, event, arg):
        if event != "call" or not on.is_set():
            return
        filename = frame.f_code.co_filename
        if PACKAGE not in filename:
            return
        if only_thread is not None and only_thread not in threading.current_thread().name:
            return
        entered.add(filename.rsplit(PACKAGE, 1)[1])

    return profile, on, entered


def _unnamed(entered: set[str], section: str) -> list[str]:
    return sorted(module for module in entered if f"`{module}`" not in section)


def test_every_module_a_push_enters_is_named_in_the_walk():
    from tests.jobsapp.jobs import RecordJob

    RecordJob.perform_async("warm")  # what a first push installs once is not the walk
    profile, on, entered = _recorder()
    sys.setprofile(profile)
    on.set()
    try:
        RecordJob.perform_async("traced")
    finally:
        on.clear()
        sys.setprofile(None)
    assert "client/push.py" in entered and "client/writer.py" in entered  # the trace saw the push
    unnamed = _unnamed(entered, _section("### The push", "### The run"))
    assert not unnamed, f"a push enters modules docs/architecture.md's walk does not name: {unnamed}"


def test_every_module_a_run_enters_is_named_in_the_walk(redis_db):
    from django.conf import settings

    from tests.jobsapp.jobs import RecordJob
    from wurk_django.conf import Config
    from wurk_django.server.launcher import Launcher

    profile, on, entered = _recorder(only_thread="processor")
    # Before the launcher starts its threads: threading.setprofile reaches only threads
    # started after it (Python 3.11 has no way to reach running ones).
    threading.setprofile(profile)
    launcher = Launcher(Config({**settings.WURK, "CONCURRENCY": 1}), embedded=True)
    try:
        launcher.run()
        RecordJob.perform_async("warm")
        wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"warm"], timeout=30, message="the first job")
        time.sleep(0.2)  # the thread is back in its fetch
        on.set()
        RecordJob.perform_async("traced")
        wait_for(lambda: len(redis_db.lrange("test:ran", 0, -1)) == 2, timeout=30, message="the traced job")
        time.sleep(0.2)  # its settlement and acknowledgement
        on.clear()
    finally:
        threading.setprofile(None)
        launcher.stop(timeout=10)
    assert "server/run/settle.py" in entered and "server/fetch/slot.py" in entered  # the trace saw the run
    unnamed = _unnamed(entered, _section("### The run", "## Where a feature plugs in"))
    assert not unnamed, f"a run enters modules docs/architecture.md's walk does not name: {unnamed}"


def test_a_module_the_walk_does_not_name_is_caught():
    section = "the door is `client/push.py`; the writer is `client/writer.py`"
    assert _unnamed({"client/push.py", "client/writer.py", "client/new_step.py"}, section) == ["client/new_step.py"]
