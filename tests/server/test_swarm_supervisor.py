"""The swarm supervisor's tick, reaping and shutdown on real child processes (small
Python sleepers started here, not workers): who may signal, which pids are reaped, and
what one tick does. Every child is stopped by its pid at teardown."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import wait_for
from wurk_django.conf import Config
from wurk_django.server.os_signals import SignalPipe
from wurk_django.server.swarm import Assignment, Child, Swarm
from wurk_django.server.swarm import supervisor as supervisor_mod
from wurk_django.server.swarm.slots import FIRST_BEAT_GRACE


def _term_ignored(pid: int) -> bool:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigIgn:"))
    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


@pytest.fixture
def sleepers():
    """Start child processes that sleep (one may ignore TERM); all killed by pid at the end."""
    started: list[subprocess.Popen] = []

    def start(*, ignore_term: bool = False, code: str | None = None) -> subprocess.Popen:
        body = code or ("import signal, time\n"
                        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
                        + "print('ready', flush=True)\ntime.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", body], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        if code is None:
            assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(5)
        except (ChildProcessError, subprocess.TimeoutExpired):
            pass
        proc.stdout.close()


def _swarm(count: int, **kwargs) -> Swarm:
    return Swarm(Config(), [Assignment(i, ("default",), 1) for i in range(count)], **kwargs)


def _child(pid: int, index: int) -> Child:
    """A child entry as the supervisor's own fork records it: not judged on its heartbeat
    before the first-beat grace. These sleepers never beat, and a swarm that never booted
    runs its first liveness check at its first tick, which would otherwise TERM them."""
    now = time.monotonic()
    return Child(pid, index, now, beat_moved_at=now + FIRST_BEAT_GRACE)


def _adopt(swarm: Swarm, index: int, proc: subprocess.Popen) -> None:
    swarm.children[proc.pid] = _child(proc.pid, index)
    swarm.state[index].pid = proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_run_410_only_the_owner_signals_and_shutdown_runs_on_the_supervising_tick(redis_db, sleepers, monkeypatch):
    """RUN-410: ``shutdown()`` is a no-op outside the process that forked (a forked child
    holding a copy of the swarm can never signal its siblings), and so is every signal
    send; ``request_shutdown()`` from another thread only sets a flag, acted on at the
    next tick: TERM to every child, KILL for one that outlives ``timeout`` + grace,
    every pid reaped, the table cleared."""
    monkeypatch.setattr(supervisor_mod, "SHUTDOWN_GRACE", 0.5)
    swarm = _swarm(2)
    swarm.timeout = 0.5
    obedient, stubborn = sleepers(), sleepers(ignore_term=True)
    assert _term_ignored(stubborn.pid)
    _adopt(swarm, 0, obedient)
    _adopt(swarm, 1, stubborn)

    swarm.owner_pid = os.getpid() + 1  # as in a process forked from the owner
    swarm.shutdown()
    swarm._signal_all(signal.SIGTERM)
    assert not swarm.stopping and _alive(obedient.pid) and obedient.poll() is None

    swarm.owner_pid = os.getpid()
    asker = threading.Thread(target=swarm.request_shutdown)
    asker.start()
    asker.join()
    assert not swarm.stopping and obedient.poll() is None  # a flag, nothing more

    swarm._tick()
    assert swarm.stopping and swarm.children == {}
    assert not _alive(obedient.pid) and not _alive(stubborn.pid)  # both reaped, not left as zombies


def test_run_813_only_known_pids_are_reaped_and_their_status_decoded(redis_db, sleepers, caplog):
    """RUN-813, ENT-705 step 3: each known pid is reaped with ``waitpid(pid, WNOHANG)``,
    its status decoded; never ``waitpid(-1)``: an exited child the swarm does not know
    (a co-hosting server's) is left for its owner to reap. A known pid that is no child
    of ours (``ECHILD``) retires its slot."""
    swarm = _swarm(3)
    swarm.owner_pid = os.getpid()
    known = sleepers(code="raise SystemExit(3)")
    stranger = sleepers(code="pass")
    running = sleepers()
    wait_for(lambda: known.pid not in _running_children() and stranger.pid not in _running_children(),
             message="both short children to exit")
    _adopt(swarm, 0, known)
    _adopt(swarm, 1, running)
    swarm.children[1] = Child(1, 2, time.monotonic())  # pid 1 is not our child
    swarm.state[2].pid = 1
    with caplog.at_level(logging.WARNING, logger="wurk_django.swarm"):
        swarm._reap(time.monotonic())
    assert set(swarm.children) == {running.pid}
    assert swarm.state[0].pid is None and swarm.state[0].due_at is not None  # respawn booked
    assert swarm.state[2].pid is None
    assert f"({known.pid}) died (exit status 3)" in caplog.text
    assert os.waitpid(stranger.pid, os.WNOHANG)[0] == stranger.pid  # still there for its owner


def _running_children() -> set[int]:
    """Our children that have not exited (zombies excluded)."""
    from tests.support import children_of

    return children_of(os.getpid())


def test_ent_705_one_tick_drains_signals_reaps_respawns_when_due_and_honours_term(redis_db, sleepers, monkeypatch):
    """ENT-705, RUN-404: a tick drains the signal pipe first, reaps the known pids, and
    respawns a slot only once its back-off is due: the tick never sleeps for it (the
    ticks before it return with the slot empty). A TERM in the pipe is acted on at the
    next tick: the swarm drains and the loop ends, stopping and childless."""
    pipe = SignalPipe()
    swarm = _swarm(1, pipe=pipe)
    swarm.owner_pid = os.getpid()
    forked: list[int] = []

    def fork(index: int) -> int:
        proc = sleepers()
        forked.append(proc.pid)
        swarm.children[proc.pid] = _child(proc.pid, index)
        return proc.pid

    monkeypatch.setattr(swarm, "_fork", fork)
    swarm._spawn_slot(0)
    first = forked[0]
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: first not in _running_children(), message="the child to die")
    swarm._tick()  # reaped; respawn due in 1 s (its first back-off)
    assert first not in swarm.children and swarm.state[0].pid is None and len(forked) == 1
    due = swarm.state[0].due_at
    while time.monotonic() < due:
        swarm._tick()  # returns after one TICK wait, the slot still empty
        if time.monotonic() < due:
            assert len(forked) == 1
    wait_for(lambda: (swarm._tick(), len(forked) == 2)[1], timeout=10, message="the respawn")
    assert swarm.state[0].pid == forked[1] and forked[1] in swarm.children

    os.write(pipe._w, bytes([signal.SIGTERM]))
    swarm.supervise()  # returns: the TERM was read at the first tick, every child drained
    assert swarm.stopping and swarm.children == {}
    assert not _alive(forked[1])


def test_ent_707_usr2_is_relayed_to_every_child_and_int_drains_like_term(redis_db, sleepers, monkeypatch):
    """ENT-707: USR2 reopens the parent's logs and is relayed to each child; INT is a
    shutdown, as TERM is (TSTP and USR1 are checked on real workers in test_swarm.py)."""
    pipe = SignalPipe()
    swarm = _swarm(2, pipe=pipe)
    swarm.owner_pid = os.getpid()
    reopened = []
    monkeypatch.setattr(supervisor_mod, "reopen_logs", lambda: reopened.append(True))
    listening = ("import signal, sys, time\n"
                 "signal.signal(signal.SIGUSR2, lambda *a: print('usr2', flush=True))\n"
                 "print('ready', flush=True)\n"
                 "while True:\n    time.sleep(0.05)\n")
    children = [sleepers(code=listening) for _ in range(2)]
    for index, proc in enumerate(children):
        assert proc.stdout.readline().strip() == "ready"
        _adopt(swarm, index, proc)
    os.write(pipe._w, bytes([signal.SIGUSR2]))
    swarm._tick()
    assert reopened == [True]
    assert [proc.stdout.readline().strip() for proc in children] == ["usr2", "usr2"]
    assert [proc.poll() for proc in children] == [None, None]  # the tick sent nothing else
    os.write(pipe._w, bytes([signal.SIGINT]))
    swarm.supervise()
    assert swarm.stopping and swarm.children == {}


def test_a_booting_child_records_usr2_and_tstp_and_is_killed_by_neither(tmp_path):
    """RUN-303, ENT-707: between its fork and its own handlers a child records a relayed
    USR2 (to reopen its logs once its handlers are in place) and a TSTP (to boot quiet)
    and ignores USR1; none of them takes its default action, which for USR1 and USR2
    would kill it. Checked in a child interpreter, whose dispositions it may change."""
    body = ("import os, signal\n"
            "from wurk_django.server.child import _BootSignals\n"
            "boot = _BootSignals()\n"
            "boot.install()\n"
            "print(boot.reopen_requested, boot.quiet_requested, flush=True)\n"
            "for sig in (signal.SIGUSR2, signal.SIGTSTP, signal.SIGUSR1):\n"
            "    os.kill(os.getpid(), sig)\n"
            "print(boot.reopen_requested, boot.quiet_requested, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert (done.returncode, done.stdout.split("\n")) == (0, ["False False", "True True", ""]), done.stderr


def test_run_402_boot_refuses_an_empty_topology_and_a_second_boot_and_forks_in_order(monkeypatch):
    """RUN-402: no swarm without slots; ``boot()`` records the owner pid, forks every
    slot in order, and refuses to run twice."""
    from wurk_django.server.swarm import SwarmError

    with pytest.raises(SwarmError, match="empty"):
        Swarm(Config(), [])
    swarm = _swarm(3)
    order: list[int] = []

    def fork(index: int) -> int:
        order.append(index)
        swarm.children[100 + index] = Child(100 + index, index, time.monotonic())
        return 100 + index

    monkeypatch.setattr(swarm, "_fork", fork)
    swarm.boot()
    assert swarm.owner_pid == os.getpid() and order == [0, 1, 2]
    assert [swarm.state[i].pid for i in range(3)] == [100, 101, 102]
    with pytest.raises(SwarmError, match="already booted"):
        swarm.boot()
    assert order == [0, 1, 2]
