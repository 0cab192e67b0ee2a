"""Swarm mode: a supervisor forking real worker processes (ENT-701..713, RUN-401..411).

The process tests start ``manage.py wurk --processes N`` through
``worker_factory`` and judge the swarm by what it leaves in Redis and in
/proc. Each one checks at teardown that every child it saw is gone.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from tests.jobsapp.jobs import ForkStateJob, RecordJob, SlowJob, TraceJob
from tests.support import ROOT, children_of, wait_for
from wurk_django.conf import Config
from wurk_django.server import swarm as swarm_mod
from wurk_django.server.state import NONCE, hostname
from wurk_django.server.swarm import (
    Assignment,
    Child,
    Swarm,
    SwarmError,
    assignments,
    backoff_delay,
    child_identity,
    cohosted_refusal,
    memory_limit_kb,
    parse_count,
    rss_kb,
    start_cohosted,
)

# -- helpers ---------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    """Exited: no such pid, or a zombie nobody reaped yet (PID 1 here may not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def _identities(redis_db) -> dict[int, str]:
    """pid -> identity for every member of ``processes``."""
    out = {}
    for member in redis_db.smembers("processes"):
        identity = member.decode()
        out[int(identity.split(":")[-2])] = identity
    return out


def _private_lists(redis_db) -> dict[str, int]:
    return {k.decode(): redis_db.llen(k) for k in redis_db.scan_iter(match="queue:*|*", count=1000)}


def _pid_of_private(name: str) -> int:
    return int(name.split("|")[-3])


def _mask(*signals: int) -> int:
    return sum(1 << (sig - 1) for sig in signals)


def _caught(pid: int) -> int:
    """The signals ``pid`` has a handler for (``SigCgt`` of /proc/<pid>/status)."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigCgt:"))
    return int(line.split()[1], 16)


def _shared_fds(pid: int) -> set[str]:
    """The open pipes and sockets (``pipe:[inode]``, ``socket:[inode]``) ``pid`` holds."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(("pipe:", "socket:")):
            found.add(target)
    return found


class SwarmRun:
    """One ``manage.py wurk --processes`` run; remembers every child pid it saw."""

    def __init__(self, proc, redis_db) -> None:
        self.proc = proc
        self.redis = redis_db
        self.seen: set[int] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def children(self) -> set[int]:
        pids = children_of(self.proc.pid)
        self.seen |= pids
        return pids

    def identities(self) -> dict[int, str]:
        found = _identities(self.redis)
        self.seen |= set(found)
        return found

    def wait_identities(self, count: int, timeout: float = 20.0, exclude: set[int] = frozenset()) -> dict[int, str]:
        def ready():
            found = {p: i for p, i in self.identities().items() if p not in exclude}
            return found if len(found) >= count else None

        return wait_for(ready, timeout=timeout, message=f"{count} child heartbeats")  # type: ignore[return-value]


@pytest.fixture
def start_swarm(worker_factory, redis_db):
    """Start a swarm; at teardown stop it by pid and check that no child outlived it."""
    runs: list[SwarmRun] = []

    def start(*args: str, extra: dict | None = None, env: dict | None = None, **kwargs) -> SwarmRun:
        full_env = {"WURK_TEST_EXTRA": json.dumps(extra or {}), **(env or {})}
        run = SwarmRun(worker_factory(*args, env=full_env, **kwargs), redis_db)
        runs.append(run)
        return run

    yield start
    for run in runs:
        if run.proc.alive():
            run.children()
        run.proc.stop(timeout=25)
        if run.proc.alive():
            run.proc.kill()
    for run in runs:
        wait_for(lambda run=run: all(_gone(pid) for pid in run.seen), timeout=15,
                 message=f"children {sorted(run.seen)} to be gone")


# -- pure parts ------------------------------------------------------------------------


def test_parse_count_numbers_multipliers_and_env(monkeypatch):
    monkeypatch.delenv("WURK_COUNT", raising=False)
    monkeypatch.delenv("SIDEKIQ_COUNT", raising=False)
    cpus = swarm_mod.cpu_count()[0]
    assert parse_count("3") == 3
    assert parse_count(0) == 1  # floor 1
    assert parse_count("auto") == cpus
    assert parse_count("1.5") == max(1, -(-3 * cpus // 2))  # ceil(1.5 x cpus), ENT-702
    assert parse_count("garbage") == cpus  # unparseable: the CPU count, never a crash
    monkeypatch.setenv("SIDEKIQ_COUNT", "4")
    assert parse_count(None) == 4
    monkeypatch.setenv("WURK_COUNT", "2")  # WURK_ wins over SIDEKIQ_
    assert parse_count("auto") == 2


def test_topology_is_flattened_in_order():
    config = Config(QUEUES=["default", "low,2"], CONCURRENCY=7, SWARM=[
        {"count": 2, "queues": ["critical"], "concurrency": 3},
        {"count": 1, "queues": ["default", "low,2"], "concurrency": 10},
        {"count": 1},
    ])
    assert assignments(config) == [
        Assignment(0, ("critical",), 3),
        Assignment(1, ("critical",), 3),
        Assignment(2, ("default", "low,2"), 10),
        Assignment(3, ("default", "low,2"), 7),  # a slot without keys takes the process's own
    ]
    flat = Config(QUEUES=["a,3", "b"], CONCURRENCY=4)
    assert assignments(flat, 2) == [Assignment(0, ("a,3", "b"), 4), Assignment(1, ("a,3", "b"), 4)]


def test_bad_topologies_are_reported():
    from wurk_django.conf import problems

    for bad in ([], [{"count": 0}], [{"queues": []}], [{"queues": ["bad\nname"]}], [{"concurrency": "3"}],
                [{"count": 1, "threads": 2}], {"count": 1}):
        assert [p.key for p in problems({"SWARM": bad})] == ["SWARM"], bad
    assert problems({"SWARM": [{"count": 2, "queues": ["a", "b,2"], "concurrency": 1}]}) == []
    assert [p.key for p in problems({"MEMORY_LIMIT_MB": -1})] == ["MEMORY_LIMIT_MB"]
    assert [p.key for p in problems({"SWARM_HEARTBEAT_TIMEOUT": 5})] == ["SWARM_HEARTBEAT_TIMEOUT"]


def test_memory_limit_setting_beats_env_and_garbage_disables(monkeypatch):
    monkeypatch.setenv("SIDEKIQ_MAXMEM_MB", "300")
    assert memory_limit_kb(Config()) == 300 * 1024
    monkeypatch.setenv("WURK_MAXMEM_MB", "200")
    assert memory_limit_kb(Config()) == 200 * 1024
    assert memory_limit_kb(Config(MEMORY_LIMIT_MB=50)) == 50 * 1024
    assert memory_limit_kb(Config(MEMORY_LIMIT_MB=0)) is None
    monkeypatch.setenv("WURK_MAXMEM_MB", "lots")
    assert memory_limit_kb(Config()) is None  # never fails boot (RUN-407)


def test_rss_and_identity():
    assert rss_kb(os.getpid()) > 1000
    assert rss_kb(2 ** 22 + 12345) is None
    assert child_identity(1234) == f"{hostname()}:1234:{NONCE}"


def test_respawn_backoff_doubles_caps_and_resets(redis_db):
    """RUN-405: respawn with per-slot backoff."""
    assert [backoff_delay(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    swarm = Swarm(Config(), [Assignment(0, ("default",), 1)])
    swarm.owner_pid = os.getpid()
    slot = swarm.state[0]
    now = 1000.0
    delays = []
    for pid in (101, 102, 103):
        slot.pid = pid
        swarm._child_exited(Child(pid, 0, spawned_at=now - 2), 1, now)
        delays.append(slot.due_at - now)
        assert slot.pid is None
    assert delays == [1, 2, 4]
    slot.pid = 104  # this one lived past 60 s: the streak starts over (ENT-706)
    swarm._child_exited(Child(104, 0, spawned_at=now - 61), 1, now)
    assert slot.due_at - now == 1
    swarm.stopping = True
    slot.pid, slot.due_at = 105, None
    swarm._child_exited(Child(105, 0, spawned_at=now - 2), 0, now)
    assert slot.due_at is None  # no respawn while stopping


def test_restart_queue_is_deduplicated():
    swarm = Swarm(Config(), [Assignment(0, ("default",), 1), Assignment(1, ("default",), 1)])
    assert swarm.queue_restart(0, "rolling restart")
    assert not swarm.queue_restart(0, "memory recycle")
    assert swarm.queue_restart(1, "rolling restart")
    assert [i for i, _ in swarm._clock.pending] == [0, 1]


def test_fork_is_refused_while_another_thread_runs():
    """RUN-810: raw fork, no other thread alive at fork."""
    swarm = Swarm(Config(), [Assignment(0, ("default",), 1)])
    release = threading.Event()
    helper = threading.Thread(target=release.wait, name="stray-helper", daemon=True)
    helper.start()
    try:
        with pytest.raises(SwarmError, match="stray-helper"):
            swarm._check_fork_safe()
        with pytest.raises(SwarmError):
            swarm.boot()  # the first fork refuses, so boot does
        assert swarm.children == {}
    finally:
        release.set()
        helper.join()


def test_cohosted_swarm_is_refused_off_the_main_thread(caplog):
    """RUN-820: signals on the main thread only, via a pipe."""
    results = []
    thread = threading.Thread(target=lambda: results.append((cohosted_refusal(), start_cohosted())))
    with caplog.at_level(logging.ERROR, logger="wurk_django.swarm"):
        thread.start()
        thread.join()
    reason, started = results[0]
    assert started is None
    assert "main thread" in reason
    assert "manage.py wurk --processes N" in caplog.text


def test_prepare_fork_closes_the_database_and_redis_flushes_logs_and_freezes_the_heap(redis_db, monkeypatch):
    """RUN-811, DJ-043: before each fork the supervisor closes Django's database
    connections and every Redis pool, flushes the log handlers (else a child writes the
    parent's buffered lines again) and freezes the heap (``gc.freeze``). The test
    database is SQLite in memory, which Django never closes: the call is what is seen."""
    import gc

    from django.db import connections

    from wurk_django.redis import connection

    flushed = []

    class Buffered(logging.Handler):
        def emit(self, record):
            pass

        def flush(self):
            flushed.append(True)

    handler = Buffered()
    logging.getLogger("wurk_django.swarm").addHandler(handler)
    closed = []
    monkeypatch.setattr(connections, "close_all", lambda: closed.append(True))
    connection.get_redis().ping()
    swarm = Swarm(Config(), [Assignment(0, ("default",), 1)])
    try:
        swarm._prepare_fork()
        assert closed == [True]
        assert connection._clients == {}
        assert flushed
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        logging.getLogger("wurk_django.swarm").removeHandler(handler)


# -- real processes --------------------------------------------------------------------

slow = pytest.mark.slow


@slow
def test_term_drains_every_child_and_leaves_nothing(redis_db, start_swarm):
    """ENT-710: swarm shutdown."""
    for i in range(6):
        SlowJob.perform_async(2, f"m{i}")
    run = start_swarm("--processes", "2", "-c", "3")
    pids = set(run.wait_identities(2))
    assert pids == run.children()  # each heartbeat is one of the supervisor's children
    wait_for(lambda: redis_db.llen("test:started") == 6, message="six jobs started")
    busy = {_pid_of_private(k) for k, n in _private_lists(redis_db).items() if n}
    assert busy == pids  # both processes hold jobs: they really run side by side
    run.proc.signal(signal.SIGTERM)
    assert run.proc.wait(timeout=25) == 0
    assert sorted(v.decode() for v in redis_db.lrange("test:finished", 0, -1)) == [f"m{i}" for i in range(6)]
    assert redis_db.smembers("processes") == set()
    assert list(redis_db.scan_iter(match=f"{hostname()}:*")) == []
    assert {k: n for k, n in _private_lists(redis_db).items() if n} == {}
    assert redis_db.llen("queue:default") == 0
    assert all(_gone(pid) for pid in pids)


@slow
def test_sidekiq_preload_is_accepted_and_said_to_do_nothing(redis_db, start_swarm):
    # ENT-702: a Sidekiq Enterprise set-up's SIDEKIQ_PRELOAD(_APP) changes nothing; logged at INFO.
    run = start_swarm("--processes", "1", "-c", "1", env={"SIDEKIQ_PRELOAD": "", "SIDEKIQ_PRELOAD_APP": "1"})
    run.wait_identities(1)
    RecordJob.perform_async("preloaded")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"preloaded"], timeout=30, message="the job to run")
    output = run.proc.output()
    for name in ("SIDEKIQ_PRELOAD", "SIDEKIQ_PRELOAD_APP"):
        assert f"{name} is set: it changes nothing here" in output


@slow
def test_killed_child_is_respawned_and_its_jobs_recovered(redis_db, start_swarm):
    markers = [f"k{i}" for i in range(4)]
    for marker in markers:
        SlowJob.perform_async(2, marker)
    run = start_swarm("--processes", "2", "-c", "2", extra={"SUPER_FETCH_REAPER_INTERVAL": 1})
    first = run.wait_identities(2)
    wait_for(lambda: redis_db.llen("test:started") == 4, message="four jobs started")
    holding = {k: n for k, n in _private_lists(redis_db).items() if n}
    victim = _pid_of_private(next(iter(holding)))
    victim_list = next(k for k in holding if _pid_of_private(k) == victim)
    assert victim in first
    os.kill(victim, signal.SIGKILL)
    fresh = run.wait_identities(1, exclude=set(first), timeout=20)
    assert set(fresh).isdisjoint(first)
    assert (set(fresh) | set(first)) - {victim} <= run.children()
    wait_for(lambda: victim not in _identities(redis_db), message="the killed child's heartbeat removed")
    # Reliable fetch: the killed child's jobs come back and run to the end elsewhere.
    wait_for(lambda: set(v.decode() for v in redis_db.lrange("test:finished", 0, -1)) == set(markers),
             timeout=30, message="every job finished, the killed child's included")
    assert redis_db.llen(victim_list) == 0
    assert "died (signal SIGKILL)" in run.proc.output()
    assert _gone(victim)


@slow
def test_child_over_the_memory_limit_is_recycled_gracefully(redis_db, start_swarm):
    """ENT-709: memory recycle."""
    run = start_swarm("--processes", "1", "-c", "2", extra={"MEMORY_LIMIT_MB": 1})
    old = next(iter(run.wait_identities(1)))
    counts = []

    def replaced():
        found = run.identities()
        counts.append(len(found))
        return old not in found and found

    new = wait_for(replaced, timeout=30, interval=0.02, message="the child to be recycled")
    assert old not in new and len(new) == 1
    # The replacement beat before the old child left: the set never went empty.
    assert min(counts) >= 1
    # Drained, not killed, and reaped as the end of the recycle.
    wait_for(lambda: f"({old}) stopped for memory recycle (exit status 0)" in run.proc.output(),
             message="the recycle to finish")
    assert "over the memory limit of 1 MB" in run.proc.output()
    wait_for(lambda: _gone(old), message="the old child to exit")
    RecordJob.perform_async("after-recycle")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"after-recycle"], message="a job after the recycle")


@slow
def test_usr1_rolls_every_child_one_at_a_time_and_loses_no_job(redis_db, start_swarm):
    """RUN-406: rolling restart on USR1."""
    jids = [TraceJob.perform_async(0.01) for _ in range(100)]
    run = start_swarm("--processes", "2", "-c", "3")
    old = set(run.wait_identities(2))
    counts: list[int] = []
    done = threading.Event()

    def feed() -> None:
        while not done.is_set():
            jids.extend(TraceJob.perform_async(0.01) for _ in range(5))
            time.sleep(0.05)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        run.proc.signal(signal.SIGUSR1)

        def rolled():
            found = run.identities()
            counts.append(len(found))
            return found if len(found) == 2 and not (set(found) & old) else None

        new = wait_for(rolled, timeout=40, interval=0.02, message="both children replaced")
    finally:
        done.set()
        feeder.join()
    assert len(new) == 2 and set(new).isdisjoint(old)
    assert min(counts) >= 2  # each replacement beat before its predecessor stopped (ENT-708)
    assert max(counts) == 3  # ...and only one slot was doubled at a time
    wait_for(lambda: set(jids) <= {v.decode() for v in redis_db.lrange("test:runs", 0, -1)}, timeout=30,
             message=f"all {len(jids)} jobs to run")
    wait_for(lambda: run.proc.output().count("stopped for rolling restart (exit status 0)") == 2,
             message="both old children reaped as restarted")
    assert all(_gone(pid) for pid in old)


@slow
def test_tstp_quiets_every_child_and_later_forks_boot_quiet(redis_db, start_swarm):
    run = start_swarm("--processes", "2", "-c", "2")
    first = run.wait_identities(2)

    def quiet(identity: str) -> bool:
        return redis_db.hget(identity, "quiet") == b"true"

    run.proc.signal(signal.SIGTSTP)
    # Seen at the next beat (every 10 s).
    wait_for(lambda: all(quiet(i) for i in first.values()), timeout=30, message="both children quiet")
    victim = next(iter(first))
    os.kill(victim, signal.SIGKILL)
    fresh = run.wait_identities(1, exclude=set(first))
    identity = next(iter(fresh.values()))
    wait_for(lambda: quiet(identity), timeout=30, message="the respawned child to boot quiet")
    RecordJob.perform_async("must-wait")
    time.sleep(2.5)
    assert redis_db.lrange("test:ran", 0, -1) == []
    assert redis_db.llen("queue:default") == 1


@slow
def test_topology_from_settings_gives_each_child_its_queues(redis_db, start_swarm):
    topology = [{"count": 2, "queues": ["critical"], "concurrency": 2},
                {"count": 1, "queues": ["default", "low,2"], "concurrency": 3}]
    run = start_swarm(extra={"SWARM": topology})
    found = run.wait_identities(3)
    shapes = []
    for identity in found.values():
        info = orjson.loads(wait_for(lambda identity=identity: redis_db.hget(identity, "info")))
        shapes.append((tuple(info["queues"]), info["concurrency"]))
    assert sorted(shapes) == [(("critical",), 2), (("critical",), 2), (("default", "low"), 3)]
    assert set(found) == run.children()


@slow
def test_children_drain_when_the_supervisor_is_killed(redis_db, start_swarm):
    """RUN-409: orphan guard in children; ENT-712: orphan guard (PDEATHSIG and ppid watchdog)."""
    run = start_swarm("--processes", "2", "-c", "2")
    pids = set(run.wait_identities(2))
    run.proc.kill()  # SIGKILL: no drain from the supervisor
    wait_for(lambda: all(_gone(pid) for pid in pids), timeout=20, message="orphaned children to exit")
    # They left through the ordinary drain: deregistered, nothing held.
    assert redis_db.smembers("processes") == set()
    assert {k: n for k, n in _private_lists(redis_db).items() if n} == {}


@slow
def test_child_with_a_stalled_heartbeat_is_replaced(redis_db, start_swarm):
    """RUN-408: child heartbeat liveness."""
    # Checks RUN-207: swarm shutdown grace timeout + 5 s.
    run = start_swarm("--processes", "1", "-c", "1", extra={"SWARM_HEARTBEAT_TIMEOUT": 20, "TIMEOUT": 1})
    old = next(iter(run.wait_identities(1)))
    os.kill(old, signal.SIGSTOP)  # alive, but its heartbeat stands still
    try:
        run.wait_identities(1, exclude={old}, timeout=50)
        wait_for(lambda: _gone(old), timeout=15, message="the stalled child to be killed")
    finally:
        if not _gone(old):
            os.kill(old, signal.SIGCONT)
    out = run.proc.output()
    assert "has not beaten for" in out
    assert "ignored TERM" in out  # a stopped process cannot drain: KILL after timeout + 5 s


@slow
def test_cohosted_swarm_is_drained_when_its_host_exits(redis_db):
    """RUN-411: co-hosted swarm with exit hook; ENT-711: opt-in cohosted swarm, atexit drain."""
    script = (
        "import django, os, sys, time\n"
        "django.setup()\n"
        "import redis\n"
        "from django.conf import settings\n"
        "from wurk_django.server.swarm import start_cohosted\n"
        "swarm = start_cohosted()\n"
        "assert swarm is not None\n"
        "client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL)\n"
        "deadline = time.monotonic() + 20\n"
        "while client.scard('processes') < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print(' '.join(str(p) for p in swarm.children), flush=True)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_COUNT": "2", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    wait_for(lambda: all(_gone(pid) for pid in pids), timeout=10, message="co-hosted children gone")
    assert redis_db.smembers("processes") == set()  # drained by the host's exit hook, deregistered


@slow
def test_children_are_forked_with_no_socket_or_pipe_of_the_parent_and_armed(redis_db, start_swarm):
    """What a child holds right after its fork, initial and respawned.

    RUN-302, ENT-703 step 2: the supervisor's traps are in place when its first child
    exists. RUN-811, RUN-402, DJ-043, ENT-703 step 3: it closed its sockets (Redis, its
    probe client) before each fork, so a child shares none with it and opens its own;
    the heap was frozen (``gc.freeze``) for the fork. RUN-303, ENT-704: the child closed
    the inherited signal pipe (no pipe shared), ignores USR1 and handles TERM, INT, TSTP
    and USR2 itself; its parent is the supervisor (ENT-703 step 4). Checked on the
    first child and on the one respawned after it was killed.
    """
    trapped = _mask(signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGUSR1, signal.SIGUSR2)
    run = start_swarm("--processes", "1", "-c", "1")
    wait_for(run.children, timeout=30, interval=0.01, message="the first fork")
    assert _caught(run.pid) & trapped == trapped

    def state_of(pid: int) -> dict:
        ForkStateJob.perform_async()

        def reported():
            states = [json.loads(raw) for raw in redis_db.lrange("test:fork-state", 0, -1)]
            return next((state for state in states if state["pid"] == pid), None)

        state = wait_for(reported, timeout=30, message=f"child {pid} to run the job")
        assert state["ppid"] == run.pid
        assert state["frozen"] > 0
        assert state["usr1"] == str(signal.SIG_IGN) and state["ignored"] & _mask(signal.SIGUSR1)
        handled = _mask(signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGUSR2)
        assert state["caught"] & handled == handled
        shared = _shared_fds(pid) & _shared_fds(run.pid)
        assert not shared, f"child {pid} shares {shared} with its supervisor"
        return state

    first = next(iter(run.wait_identities(1)))
    state_of(first)
    os.kill(first, signal.SIGKILL)  # the supervisor opens its probe to forget it, then respawns
    second = next(iter(run.wait_identities(1, exclude={first}, timeout=30)))
    state_of(second)


@slow
def test_ent_704_each_child_fires_the_fork_hooks_with_its_slot_before_it_runs(redis_db, start_swarm):
    """ENT-704 step 5: every child, the first ones and a respawned one, sends
    ``child_forked`` (Ent ``on(:fork)``) with its slot's config and index (the receiver
    writes to Redis from the child). Steps 1, 3 and 7 are checked above, steps 2, 4, 6
    and 8 by the orphan, topology, TSTP and TERM tests."""
    topology = [{"count": 1, "queues": ["critical"], "concurrency": 1},
                {"count": 1, "queues": ["default"], "concurrency": 1}]
    run = start_swarm(extra={"SWARM": topology}, settings="tests.server.settings_ops",
                      env={"WURK_TEST_PROBE_MODULE": "tests.server.fork_hooks"})
    found = run.wait_identities(2)

    def forked() -> dict[int, str]:
        entries = [raw.decode().split(":") for raw in redis_db.lrange("test:forked", 0, -1)]
        return {int(pid): f"{index}:{queues}" for index, pid, queues in entries}

    wait_for(lambda: len(forked()) == 2, message="both children's hooks")
    by_pid = forked()
    assert set(by_pid) == set(found)
    assert sorted(by_pid.values()) == ["0:critical", "1:default"]
    victim = next(pid for pid, slot in by_pid.items() if slot == "1:default")
    os.kill(victim, signal.SIGKILL)
    fresh = next(iter(run.wait_identities(1, exclude=set(found), timeout=30)))
    wait_for(lambda: fresh in forked(), message="the respawned child's hook")
    assert forked()[fresh] == "1:default"
