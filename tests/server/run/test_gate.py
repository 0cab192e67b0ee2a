"""The run gate (wurk_django/server/run/gate.py): how many job threads run short jobs at once.

The unit tests drive the gate with real threads; the limit reviews run on a fake
clock (the module's ``time`` replaced), so what the gate decides does not depend
on the machine's load. The worker tests run ``manage.py wurk`` with the limit held
low (tests/server/gate_settings.py) so threads really wait for their turn.
"""

from __future__ import annotations

import json
import signal
import threading
import types

import pytest

from tests.jobsapp.jobs import QueryJob, RecordJob, SlowJob
from tests.support import wait_for
from wurk_django.server.run import gate as run_gate
from wurk_django.server.run.gate import FLOOR, RunGate, next_limit


@pytest.fixture
def no_reviews(monkeypatch):
    """The limit stays where a test puts it."""
    monkeypatch.setattr(run_gate, "REVIEW_EVERY", float("inf"))


@pytest.fixture
def long_job(monkeypatch):
    """Sets how long a job runs before it stops counting against the limit."""
    return lambda seconds: monkeypatch.setattr(run_gate, "LONG_JOB", seconds)


class FakeClock:
    """The process's clocks and its count of threads gone to sleep, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.cpu = 10.0
        self.slept = 0

    def monotonic(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.cpu

    def sleeps(self) -> int:
        return self.slept

    def window(self, cpu_share: float, sleeps: int = 0) -> None:
        self.now += run_gate.REVIEW_EVERY
        self.cpu += run_gate.REVIEW_EVERY * cpu_share
        self.slept += sleeps


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(run_gate, "time", types.SimpleNamespace(monotonic=fake.monotonic,
                                                                 process_time=fake.process_time))
    monkeypatch.setattr(run_gate, "_sleeps", fake.sleeps)
    return fake


def _in_thread(target) -> tuple[threading.Thread, threading.Event]:
    """Runs ``target`` in a daemon thread; the event is set once it returned."""
    returned = threading.Event()

    def run():
        target()
        returned.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, returned


def _gate(threads: int, limit: int) -> RunGate:
    """A gate for ``threads`` threads with its limit put at ``limit``."""
    gate = RunGate(threads)
    gate.limit = limit
    return gate


def _holder(gate: RunGate) -> tuple[threading.Event, threading.Thread]:
    """A thread that takes a pass and keeps it (as its job runs) until ``release`` is set."""
    entered, release = threading.Event(), threading.Event()

    def run():
        gate.enter()
        entered.set()
        release.wait(30)
        gate.leave()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert entered.wait(5), "the holder never got a pass"
    return release, thread


# -- the rules -----------------------------------------------------------------


SLEEPY = run_gate.SLEEPY_JOB  # the least sleeps a job that are worth saving (a plain redis-py call: 9-10)


def test_limit_shrinks_while_the_interpreter_is_saturated_by_short_jobs_that_sleep_often():
    assert next_limit(10, 10, cpu_share=0.97, waits=0, starts=300, sleeps_per_job=SLEEPY) == 9
    assert next_limit(3, 10, cpu_share=1.1, waits=5, starts=300, sleeps_per_job=SLEEPY * 2) == 2
    assert next_limit(FLOOR, 10, cpu_share=0.99, waits=5, starts=300, sleeps_per_job=SLEEPY) == FLOOR


def test_limit_holds_for_few_jobs_jobs_that_seldom_sleep_or_a_cpu_in_between():
    assert next_limit(10, 10, cpu_share=0.97, waits=0, starts=5, sleeps_per_job=SLEEPY) == 10  # long jobs
    # A fast client's round trip or pure Python: few hand-overs to save, none saved.
    assert next_limit(10, 10, cpu_share=0.97, waits=0, starts=300, sleeps_per_job=SLEEPY / 2) == 10
    assert next_limit(5, 10, cpu_share=0.8, waits=5, starts=300, sleeps_per_job=SLEEPY) == 5  # between idle and busy
    assert next_limit(5, 10, cpu_share=0.3, waits=0, starts=300, sleeps_per_job=SLEEPY) == 5  # nobody waited


def test_limit_grows_when_jobs_wait_on_io_or_run_outside_the_lock():
    assert next_limit(2, 10, cpu_share=0.3, waits=4, starts=300, sleeps_per_job=SLEEPY) == 3
    assert next_limit(6, 10, cpu_share=0.3, waits=4, starts=300, sleeps_per_job=SLEEPY) == 9
    assert next_limit(9, 10, cpu_share=0.3, waits=4, starts=300, sleeps_per_job=SLEEPY) == 10  # never past the thread count
    assert next_limit(2, 10, cpu_share=1.9, waits=0, starts=300, sleeps_per_job=SLEEPY) == 3  # C code in parallel


# -- passes --------------------------------------------------------------------


def test_no_more_short_jobs_run_at_once_than_the_limit(no_reviews, long_job):
    long_job(60)
    gate = _gate(6, 2)
    lock = threading.Lock()
    running, most, finished = [0], [0], []

    def job():
        gate.enter()
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.02)
        with lock:
            running[0] -= 1
        gate.leave()
        finished.append(1)

    threads = [threading.Thread(target=job) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(finished) == 6
    assert most[0] == 2


def test_a_pass_given_back_lets_a_waiting_thread_in(no_reviews, long_job):
    long_job(60)
    gate = _gate(4, 1)
    release, holder = _holder(gate)
    _, entered = _in_thread(gate.enter)
    assert not entered.wait(0.2)  # waits for its turn
    release.set()
    holder.join(5)
    assert entered.wait(5)


def test_a_long_job_stops_counting_so_the_next_one_runs_beside_it(no_reviews, long_job):
    long_job(0.05)
    gate = _gate(4, 1)
    release, holder = _holder(gate)
    _, entered = _in_thread(gate.enter)
    assert entered.wait(5), "the second job waited for the long one to end"
    assert not release.is_set() and holder.is_alive()  # the long job is still running
    assert gate.running() == 1  # only the newcomer counts
    release.set()
    holder.join(5)


def test_a_thread_keeps_its_pass_from_one_job_in_hand_to_the_next(no_reviews, long_job):
    long_job(60)
    gate = _gate(4, 1)
    gate.enter()
    gate.enter()  # its next job: no second pass, no wait on itself
    assert gate.running() == 1
    gate.leave()
    assert gate.running() == 0


def test_quieting_lets_every_waiting_thread_through(no_reviews, long_job):
    long_job(60)
    gate = _gate(5, 1)
    release, holder = _holder(gate)
    waiters = [_in_thread(gate.enter)[1] for _ in range(3)]
    assert not any(entered.wait(0.1) for entered in waiters)
    gate.open()
    assert all(entered.wait(5) for entered in waiters)
    release.set()
    holder.join(5)


def test_a_small_or_disabled_gate_never_makes_a_thread_wait():
    for gate in (RunGate(FLOOR), RunGate(10, enabled=False)):
        gate.limit = 1
        done = [_in_thread(gate.enter)[1] for _ in range(5)]
        assert all(entered.wait(5) for entered in done)
        assert gate.running() == 0


def test_at_the_full_limit_no_pass_is_taken_and_a_job_counts_from_its_next_start(no_reviews, long_job):
    long_job(60)
    gate = RunGate(4)
    gate.enter()  # nobody can wait while every thread may run: no pass, no lock
    assert gate.running() == 0
    gate.limit = 1
    release, holder = _holder(gate)
    assert gate.running() == 1
    _, entered = _in_thread(gate.enter)
    assert not entered.wait(0.2)  # counted now: it waits for the holder's pass
    release.set()
    holder.join(5)
    assert entered.wait(5)


def test_the_gate_is_wide_open_only_at_the_full_limit_with_no_pass_out(no_reviews, long_job):
    """The worker runs a job without a pass (and without take()) only while wide_open()."""
    long_job(60)
    gate = RunGate(4)
    assert gate.wide_open()
    gate.limit = 1
    assert not gate.wide_open()  # limited: the job goes through take()
    release, holder = _holder(gate)
    gate.limit = 4
    assert not gate.wide_open()  # back at the full limit, but a pass is out until its holder leaves
    release.set()
    holder.join(5)
    assert gate.wide_open()
    assert gate._starts == 5  # every ask counted a start for the next review (the holder's enter too)


@pytest.mark.django_db(transaction=True)
def test_a_job_that_opens_a_database_connection_gives_its_pass_to_a_waiting_thread(no_reviews, long_job):
    """Its time is now the database's: other jobs run while it waits on its queries."""
    from django.db import connections

    from wurk_django.server.run import database

    long_job(60)
    gate = _gate(4, 1)
    opened, release = threading.Event(), threading.Event()
    seen = {}

    def orm_job():
        gate.enter()
        seen["before"] = gate.running()
        connections["default"].ensure_connection()
        seen["holds"] = database.holds_connection()
        opened.set()
        release.wait(30)
        connections.close_all()

    orm = threading.Thread(target=orm_job, daemon=True)
    orm.start()
    assert opened.wait(10), "the job never opened its connection"
    assert seen == {"before": 1, "holds": True}
    assert gate.running() == 0
    _, entered = _in_thread(gate.enter)
    assert entered.wait(5), "the next job waited for the one waiting on the database"
    release.set()
    orm.join(5)


# -- reviews -------------------------------------------------------------------


def _stream(gate: RunGate, clock: FakeClock, windows: int, cpu_share: float, sleeps_per_job: float) -> None:
    """``windows`` review windows of short jobs on one thread, a job after another."""
    jobs = run_gate.BUSY_JOBS + 5
    for _ in range(windows):
        for _ in range(jobs):
            gate.enter()
        clock.window(cpu_share, sleeps=int(jobs * sleeps_per_job))
    gate.enter()


def test_reviews_lower_the_limit_to_the_floor_under_a_cpu_bound_stream_of_sleepy_short_jobs(clock):
    gate = RunGate(10)
    _stream(gate, clock, 12, cpu_share=0.97, sleeps_per_job=run_gate.SLEEPY_JOB * 2)
    assert gate.limit == FLOOR


def test_reviews_leave_the_limit_alone_for_jobs_that_wait_on_io_or_seldom_sleep(clock):
    gate = RunGate(10)
    _stream(gate, clock, 12, cpu_share=0.2, sleeps_per_job=run_gate.SLEEPY_JOB * 2)
    assert gate.limit == 10
    _stream(gate, clock, 12, cpu_share=0.97, sleeps_per_job=run_gate.SLEEPY_JOB / 4)
    assert gate.limit == 10


def test_one_sleepy_window_the_start_of_a_drain_lowers_nothing(clock):
    """The threads starting to fetch sleep far more than their jobs do: a shrink needs
    two windows in a row whose jobs sleep often."""
    gate = RunGate(10)
    _stream(gate, clock, 1, cpu_share=0.97, sleeps_per_job=run_gate.SLEEPY_JOB * 3)
    _stream(gate, clock, 6, cpu_share=0.97, sleeps_per_job=run_gate.SLEEPY_JOB / 4)
    assert gate.limit == 10
    _stream(gate, clock, 2, cpu_share=0.97, sleeps_per_job=run_gate.SLEEPY_JOB * 3)
    assert gate.limit == 9


def test_a_review_that_raises_the_limit_lets_waiting_threads_in(clock, long_job):
    long_job(60)
    gate = RunGate(6)
    gate.limit = FLOOR
    gate.enter()  # this thread runs jobs (its pass)
    release, holder = _holder(gate)
    _, entered = _in_thread(gate.enter)
    wait_for(lambda: gate._waiting == 1, timeout=5, message="a thread waiting for its turn")
    clock.window(cpu_share=0.2)  # CPU to spare while a thread waited: I/O-bound jobs
    gate.enter()  # this thread's next job: the review runs
    assert gate.limit == FLOOR + 1
    assert entered.wait(5)
    release.set()
    holder.join(5)


# -- in a worker -----------------------------------------------------------------


@pytest.mark.slow
def test_worker_runs_short_jobs_beside_a_long_one_with_the_limit_at_one(redis_db, worker_factory):
    worker = worker_factory("-c", "3", settings="tests.server.gate_settings", env={"TEST_GATE_LIMIT": "1"})
    SlowJob.perform_async(6)
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"slow"], message="the long job to start")
    for i in range(10):
        RecordJob.perform_async(i)
    wait_for(lambda: redis_db.llen("test:ran") == 10, message="10 short jobs")
    assert redis_db.lrange("test:finished", 0, -1) == []  # the long job holds no one back
    assert worker.stop() == 0
    assert redis_db.lrange("test:finished", 0, -1) == [b"slow"]


@pytest.mark.slow
def test_worker_thread_holding_a_database_connection_runs_its_next_job_without_a_pass(redis_db, worker_factory):
    """With ``CONN_MAX_AGE`` above 0 a thread keeps its connection between jobs; its next
    job waits on the database as much as its last did, so it takes no pass: with the limit
    at one and no job counted long, short jobs on the other threads run beside it."""
    worker = worker_factory("-c", "2", "--capsule", "db:1", "db", settings="tests.server.gate_settings",
                            env={"TEST_GATE_LIMIT": "1", "TEST_GATE_LONG_JOB": "60", "TEST_GATE_CONN_MAX_AGE": "60"})
    QueryJob.set(queue="db").perform_async("opened")  # the db capsule's one thread connects, and keeps it
    wait_for(lambda: redis_db.lrange("test:db", 0, -1) == [b"opened"], message="the query job")
    SlowJob.set(queue="db").perform_async(6)  # the same thread, holding its connection
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"slow"], message="the long job to start")
    for i in range(10):
        RecordJob.perform_async(i)
    wait_for(lambda: redis_db.llen("test:ran") == 10, message="10 short jobs")
    assert redis_db.lrange("test:finished", 0, -1) == []  # they did not wait for the long job's pass
    assert worker.stop() == 0
    assert redis_db.lrange("test:finished", 0, -1) == [b"slow"]


@pytest.mark.slow
def test_worker_hands_back_the_jobs_of_threads_waiting_for_their_turn_at_quiet(redis_db, worker_factory):
    worker = worker_factory("-c", "3", settings="tests.server.gate_settings",
                            env={"TEST_GATE_LIMIT": "1", "TEST_GATE_LONG_JOB": "60"})
    SlowJob.perform_async(3)
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"slow"], message="the long job to start")
    RecordJob.perform_async("a")
    RecordJob.perform_async("b")
    # Both fetched by the idle threads, which now wait for the long job's pass.
    wait_for(lambda: redis_db.llen("queue:default") == 0, message="the short jobs fetched")
    assert redis_db.llen("test:ran") == 0
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis_db.lrange("test:finished", 0, -1) == [b"slow"]
    assert redis_db.lrange("test:ran", 0, -1) == []  # not run...
    queued = [json.loads(raw)["args"][0] for raw in redis_db.lrange("queue:default", 0, -1)]
    assert sorted(queued) == ["a", "b"]  # ...and back in their queue


def test_the_gate_is_on_in_a_worker_process_off_embedded_and_one_per_process_shared_by_its_capsules(redis_db):
    from wurk_django.conf import Config
    from wurk_django.server.launcher import Launcher

    assert Config().gil_gate is None  # the default: decided by the kind of process
    assert Launcher(Config(CONCURRENCY=10)).gate.enabled  # manage.py wurk, a swarm child
    assert not Launcher(Config(CONCURRENCY=10), embedded=True).gate.enabled  # web threads share the process
    assert Launcher(Config(CONCURRENCY=10, GIL_GATE=True), embedded=True).gate.enabled
    assert not Launcher(Config(CONCURRENCY=10, GIL_GATE=False)).gate.enabled
    gated = Launcher(Config(CONCURRENCY=3, GIL_GATE=True, CAPSULES={"single": {"concurrency": 1, "queues": ["single"]}}),
                     embedded=True)
    assert gated.gate.enabled and gated.gate.limit == 4  # the threads of every capsule
    assert all(manager.gate is gated.gate for manager in gated.managers)


@pytest.mark.slow
def test_a_thread_waiting_for_its_turn_shows_its_job_and_hands_it_back_at_the_stop(redis_db, monkeypatch):
    """Its fetched job shows on the processor while it waits (``unit``), as a running job
    does: ``--burst`` must not call the queues drained under it, and a hard stop must
    count it. At quiet it goes back to its queue unrun."""
    from wurk_django.conf import Config
    from wurk_django.server.launcher import Launcher

    monkeypatch.setattr(run_gate, "LONG_JOB", 60)
    monkeypatch.setattr(run_gate, "REVIEW_EVERY", 0.0)
    monkeypatch.setattr(run_gate, "next_limit", lambda limit, ceiling, cpu_share, waits, starts, sleeps_per_job: 1)
    launcher = Launcher(Config(CONCURRENCY=3, GIL_GATE=True), embedded=True)
    launcher.run()
    try:
        SlowJob.perform_async(1.5)
        wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"slow"], message="the long job to start")
        RecordJob.perform_async("a")
        RecordJob.perform_async("b")
        wait_for(lambda: redis_db.llen("queue:default") == 0, message="the short jobs fetched")
        wait_for(lambda: launcher.gate._waiting == 2, timeout=5, message="two threads waiting for their turn")
        holding = [p for p in launcher.manager.alive_processors() if p.unit is not None]
        assert len(holding) == 3  # the long job's thread and the two waiting ones
    finally:
        launcher.stop(timeout=10)
    assert redis_db.lrange("test:finished", 0, -1) == [b"slow"]
    assert redis_db.llen("test:ran") == 0 and redis_db.llen("queue:default") == 2
