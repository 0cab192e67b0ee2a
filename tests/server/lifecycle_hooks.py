"""Receivers of the worker lifecycle signals for tests/server/test_lifecycle.py, imported by
tests.server.settings_ops (``WURK_TEST_PROBE_MODULE``). ``WURK_TEST_HOOKS`` picks the mode:
``record`` writes each event to the Redis list ``test:lifecycle``; ``fail-startup`` makes a
startup receiver raise; ``fail-component`` adds a component whose start raises once this
process is listed in ``processes``."""

import os
import threading
import time

import redis

from wurk_django import signals

MODE = os.environ.get("WURK_TEST_HOOKS", "record")
_redis = redis.Redis.from_url(os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))


def _record(text: str) -> None:
    _redis.rpush("test:lifecycle", text)


def _processors() -> int:
    return sum("processor" in thread.name for thread in threading.enumerate())


def _listed(launcher) -> int:
    return int(_redis.sismember("processes", launcher.state.identity))


def startup_a(sender, launcher, **kwargs):
    _record(f"startup:a:{_processors()}")
    if MODE == "fail-startup":
        raise RuntimeError("the license server said no")
    if MODE == "fail-component":
        from wurk_django.server.launcher import register_component

        register_component("test-refuser", lambda launcher: _Refuser(launcher), position=10_000)


def startup_b(sender, launcher, **kwargs):
    _record(f"startup:b:{_processors()}")


class _Refuser:
    def __init__(self, launcher) -> None:
        self.launcher = launcher

    def start(self) -> None:
        deadline = time.monotonic() + 30
        while not _listed(self.launcher) and time.monotonic() < deadline:
            time.sleep(0.05)
        _record(f"listed-before-failing:{_listed(self.launcher)}")
        raise RuntimeError("component refused to start")

    def stop(self) -> None:
        pass


def _recorder(event: str, name: str):
    def receiver(sender, launcher, **kwargs):
        suffix = f":{_listed(launcher)}" if event == "exit" else ""
        _record(f"{event}:{name}{suffix}")
    receiver.__qualname__ = f"{event}_{name}"
    return receiver


signals.worker_startup.connect(startup_a, weak=False)
signals.worker_startup.connect(startup_b, weak=False)
for _event in ("quiet", "shutdown", "exit", "heartbeat", "beat"):
    for _name in ("a", "b"):
        getattr(signals, f"worker_{_event}").connect(_recorder(_event, _name), weak=False)
