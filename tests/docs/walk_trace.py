"""Traces one plain push and its run in a fresh process and prints the package modules
each entered, as JSON: ``{"push": [...], "run": [...]}`` (tests/docs/test_architecture_walk.py).

A fresh process, so what other tests left behind (a receiver connected, a feature's
settings, a registered job) cannot put modules on the way that a plain project never
enters. Run from the repository root with ``DJANGO_SETTINGS_MODULE=tests.settings``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

PACKAGE = "/wurk_django/"


def _recorder(only_thread: str | None = None):
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


def main() -> None:
    import django

    django.setup()
    import redis
    from django.conf import settings

    from tests.jobsapp.jobs import RecordJob
    from wurk_django.conf import Config
    from wurk_django.server.launcher import Launcher

    client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL)
    client.flushdb()  # the test database only, as every test does
    # The push, in this thread; the first push installs what it installs once.
    RecordJob.perform_async("warm")
    profile, on, pushed = _recorder()
    sys.setprofile(profile)
    on.set()
    RecordJob.perform_async("traced")
    on.clear()
    sys.setprofile(None)
    client.delete("queue:default")
    # The run, in a processor thread. threading.setprofile reaches only threads started
    # after it (Python 3.11 cannot reach running ones), so it is set before the launcher.
    profile, on, ran = _recorder(only_thread="processor")
    threading.setprofile(profile)
    launcher = Launcher(Config({**settings.WURK, "CONCURRENCY": 1}), embedded=True)
    launcher.run()
    try:
        RecordJob.perform_async("warm")
        _wait(lambda: client.llen("test:ran") == 1)
        time.sleep(0.2)  # back in its fetch
        on.set()
        RecordJob.perform_async("traced")
        _wait(lambda: client.llen("test:ran") == 2)
        time.sleep(0.2)  # its settlement and acknowledgement
        on.clear()
    finally:
        threading.setprofile(None)
        launcher.stop(timeout=10)
        client.flushdb()
    print(json.dumps({"push": sorted(pushed), "run": sorted(ran)}))


def _wait(done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("the traced job did not run within 30 s")
        time.sleep(0.01)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    main()
