"""features.install(): no thread sees the features as installed before they all are."""

from __future__ import annotations

import threading
import time
import types

from wurk_django import features


def test_concurrent_first_use_waits_for_the_install(monkeypatch):
    done = threading.Event()
    calls = []

    def slow_install():
        calls.append(1)
        features.install()  # an install that comes back through a seam returns at once
        time.sleep(0.2)
        done.set()

    fake = types.SimpleNamespace(import_module=lambda name: types.SimpleNamespace(install=slow_install))
    monkeypatch.setattr(features, "importlib", fake)
    monkeypatch.setattr(features, "BUILTIN", ("fake",))
    monkeypatch.setattr(features, "_installed", False)
    seen = []

    def first_use():
        features.install()
        seen.append(done.is_set())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 8
    assert calls == [1]
