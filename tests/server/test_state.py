"""Thread ids in log lines and the busy hash (CORE-075)."""

from __future__ import annotations

import os
import re
import socket
import threading

import pytest

from wurk_django.server.state import identity, thread_id


def test_thread_id_is_stable_per_thread_and_unique_across_live_threads():
    mine = thread_id()
    assert mine == thread_id() and mine.isalnum()
    others: list[str] = []
    alive = threading.Barrier(4)  # idents of exited threads are reused: keep all four alive at once

    def record() -> None:
        others.append(thread_id())
        alive.wait(timeout=10)

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(others) | {mine}) == 5


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_gets_its_own_id_for_the_same_thread():
    parent = thread_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, thread_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != parent


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_the_identity_is_host_pid_nonce_and_a_fork_keeps_the_nonce(monkeypatch):
    """ENT-003: ``<hostname>:<pid>:<nonce>``, the host from ``$DYNO`` when set, the nonce 12
    lowercase hex characters made once and inherited by a forked child (whose pid differs).
    The heartbeat lists this same identity in ``processes`` (tests/server/test_heartbeat_keys.py)."""
    monkeypatch.setenv("DYNO", "web.1")
    host, pid, nonce = identity().split(":")
    assert (host, pid) == ("web.1", str(os.getpid())) and re.fullmatch(r"[0-9a-f]{12}", nonce)
    monkeypatch.delenv("DYNO")
    assert identity().split(":")[0] == socket.gethostname()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.write(write, identity().encode())
        finally:
            os._exit(0)
    os.close(write)
    theirs = os.read(read, 256).decode()
    os.close(read)
    os.waitpid(child, 0)
    assert theirs == f"{socket.gethostname()}:{child}:{nonce}"


def test_run_801_shared_counters_and_the_busy_map_stay_exact_under_many_threads():
    """RUN-801: processors are threads; what they share (the processed/failed counters,
    the busy map, the metrics accumulator) is updated under locks, so many threads
    counting at once lose nothing (and a free-threaded build needs no change)."""
    import threading

    from wurk_django.metrics.tracker import MetricsTracker
    from wurk_django.server.state import WorkerState

    state, metrics = WorkerState(), MetricsTracker()
    threads, rounds = 8, 2000
    start = threading.Barrier(threads)

    def work(n: int) -> None:
        start.wait()
        for i in range(rounds):
            tid = f"t{n}"
            state.begin(tid, "default", b"{}")
            state.end(tid, failed=i % 2 == 0)
            metrics.record("A", 1.0, failed=False)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    assert (state.processed, state.failed) == (threads * rounds, threads * rounds // 2)
    assert state.work_snapshot() == {}
    assert sum(counts["A"].processed for counts in metrics._minutes.values()) == threads * rounds


def test_the_busy_count_is_what_job_code_s_redis_commands_read_to_let_other_threads_run():
    """Issue 48 item 2: wurk_django.redis.wire yields the GIL before reading a reply only
    while more than one thread of the process is running a job."""
    from wurk_django.redis import wire
    from wurk_django.server.state import WorkerState

    state = WorkerState()
    state.begin("a", "default", b"{}")
    assert wire.busy_threads == 1
    state.begin("b", "default", b"{}")
    assert wire.busy_threads == 2
    state.end("a", failed=False)
    state.end("b", failed=False)
    assert wire.busy_threads == 0
