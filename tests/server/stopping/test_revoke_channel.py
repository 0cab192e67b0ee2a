"""A revoke heard twice, and heard between a beat's read and its reply (issue 44 item 3).

A worker hears a revoke on the revoke channel at once and again through its signal list
at the next beat (server/stopping/revoke_channel.py, revocations.py): the second hearing
must not raise the soft stop again in a job that caught the first, nor put off its hard
stop; and a beat whose read of the markers went out before the revoke's write must not
make the process forget what the channel told it. In one process, no Redis.
"""

from __future__ import annotations

import threading
import time
import types

import orjson

from wurk_django.errors import SoftTimeLimitExceeded
from wurk_django.revocation import COMMAND, marker
from wurk_django.server.run.run import Run
from wurk_django.server.stopping import revocations, watchdog
from wurk_django.server.stopping.revoke_channel import RevokeChannel
from wurk_django.server.stopping.watchdog import Watchdog


class _Manager:
    def __init__(self) -> None:
        self.run: Run | None = None
        self.abandoned: list[Run] = []

    def runs(self) -> list[Run]:
        return [self.run] if self.run is not None else []

    def abandon(self, run: Run) -> None:
        self.abandoned.append(run)


def _catching_thread(stop: threading.Event) -> tuple[threading.Thread, list[str]]:
    """A job that counts the soft stops it catches and runs on until told."""
    seen: list[str] = []
    ready = threading.Event()

    def body() -> None:
        ready.set()
        while not stop.is_set():
            try:
                while not stop.is_set():
                    time.sleep(0.01)
            except SoftTimeLimitExceeded:
                seen.append("soft")

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    ready.wait(10)
    return thread, seen


def _command(jid: str, by: str, terminate: bool = True) -> bytes:
    return (COMMAND + orjson.dumps({"jid": jid, "by": by, "at": time.time(), "terminate": terminate}).decode()).encode()


def test_the_same_revoke_heard_on_the_channel_then_at_the_beat_stops_the_job_once(monkeypatch):
    dog = Watchdog()
    manager = _Manager()
    monkeypatch.setattr(watchdog, "WATCHDOG", dog)
    monkeypatch.setattr(watchdog, "MANAGERS", {manager})
    monkeypatch.setattr(revocations, "jids", {})
    monkeypatch.setattr(revocations, "_heard", {})
    stop = threading.Event()
    thread, seen = _catching_thread(stop)
    manager.run = Run(types.SimpleNamespace(job={"jid": "j" * 24, "class": "X"}), manager, thread, "t",
                      {"jid": "j" * 24})
    config = types.SimpleNamespace(revoke_grace=600)
    channel = RevokeChannel(config)  # type: ignore[arg-type]
    try:
        command = _command("j" * 24, "alice")
        channel._heard(command)  # on the subscriber's thread
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == ["soft"]
        hard_at = dog._watches[manager.run].hard_at
        revocations.command(command.decode(), config)  # the same revoke, from the signal list at the beat
        time.sleep(0.3)
        assert seen == ["soft"], "a second hearing raised the soft stop again"
        assert dog._watches[manager.run].hard_at == hard_at
        assert [stop.by for stop in manager.run.stops] == ["alice"]
        assert revocations.jids["j" * 24][0] == "alice"
    finally:
        stop.set()
        thread.join(10)


def test_a_beat_that_read_before_the_revoke_keeps_what_the_channel_told(monkeypatch):
    monkeypatch.setattr(revocations, "jids", {})
    monkeypatch.setattr(revocations, "_heard", {})
    config = types.SimpleNamespace(revoke_grace=10)
    old = marker("o" * 24, "bob", time.time())
    read_at = time.monotonic()  # the beat sends its read of the markers...
    revocations.command(_command("n" * 24, "carol", terminate=False).decode(), config)  # ...a revoke is heard
    revocations.load([old], read_at)  # ...the read comes back without the new marker
    assert set(revocations.jids) == {"o" * 24, "n" * 24}
    # The next beat read after it: its marker is what counts now (here it has lapsed).
    revocations.load([old], time.monotonic())
    assert set(revocations.jids) == {"o" * 24}
    # The channel's message that is no revoke is ignored.
    RevokeChannel(config)._heard(b"hello")  # type: ignore[arg-type]
    assert set(revocations.jids) == {"o" * 24}
