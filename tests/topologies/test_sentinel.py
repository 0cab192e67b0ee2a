"""Redis Sentinel (issue 18 item 2, RUN-606): the ``SENTINELS``/``SERVICE`` settings and
django-redis's Sentinel form; sync, async and probe clients through the sentinels;
and a failover with a real primary, a replica and three sentinels while a worker
process drains jobs and a client pushes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from redis.sentinel import SentinelManagedConnection

from tests.redis_servers import SentinelGroup, replicating
from tests.support import ROOT, WorkerProcess, stop_process, wait_for
from wurk_django import payload
from wurk_django.client.writer import AsyncWriter, Writer
from wurk_django.conf import Config, problems
from wurk_django.errors import ConfigurationError
from wurk_django.redis import connection, wire
from wurk_django.redis import sentinel as sentinel_module
from wurk_django.redis.connection import async_redis, get_redis, probe_redis


def _sentinel_config(group: SentinelGroup, **extra) -> Config:
    return Config(raw={"REDIS": {"SENTINELS": group.addresses, "SERVICE": group.service, "OPTIONS": {"db": 1}},
                       "TAG": "t", **extra})


def _job(klass: str = "X", *args) -> dict:
    return {"class": klass, "args": list(args), "queue": "default", "jid": payload.new_jid(),
            "created_at": payload.now_ms()}


def test_the_sentinel_settings_are_checked():
    assert problems({"REDIS": {"SENTINELS": [("127.0.0.1", 26379)], "SERVICE": "mymaster"}}) == []
    messages = [p.message for p in problems({"REDIS": {"SENTINELS": [("127.0.0.1", "x")], "SERVICE": ""}})]
    assert any("not a list of (host, port) pairs" in m for m in messages)
    assert any("SENTINELS and SERVICE go together" in m for m in messages)
    [both] = problems({"REDIS": {"URL": "redis://h/0", "SENTINELS": [("h", 1)], "SERVICE": "m"}})
    assert "give one of URL, CACHE or SENTINELS" in both.message
    [unknown] = problems({"REDIS": {"SENTINELS": [("h", 1)], "SERVICE": "m", "SENTINEL": 1}})
    assert "unknown key 'SENTINEL'" in unknown.message


def test_the_django_redis_sentinel_form_is_honoured(settings):
    settings.CACHES = {**settings.CACHES, "ha": {
        "BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://:s3cret@mymaster/3",
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.SentinelClient",
                    "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
                    "SENTINELS": [("10.0.0.1", 26379), ("10.0.0.2", 26379)],
                    "SENTINEL_KWARGS": {"password": "sentinel-pw"}, "SOCKET_TIMEOUT": 2}}}
    target = Config(raw={"REDIS": {"CACHE": "ha"}}).redis_target
    assert target.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379)) and target.service == "mymaster"
    assert target.options == {"db": 3, "password": "s3cret", "socket_timeout": 2}
    assert target.sentinel_options == {"password": "sentinel-pw"}
    settings.CACHES["ha"]["LOCATION"] = "redis://mymaster/x"
    with pytest.raises(ConfigurationError, match="no database number"):
        Config(raw={"REDIS": {"CACHE": "ha"}})


@pytest.fixture(scope="module")
def group():
    started = SentinelGroup().start()
    yield started
    started.stop()


def test_sync_async_and_probe_clients_reach_the_primary_through_the_sentinels(group):
    config = _sentinel_config(group)
    primary = redis_lib.Redis(port=group.master_port(), db=1)
    try:
        primary.delete("queue:default")
        job = _job()
        Writer(config).push([job])
        assert payload.loads(primary.lpop("queue:default"))["jid"] == job["jid"]
        conn = get_redis(config=config).connection_pool.get_connection()
        try:
            assert isinstance(conn, SentinelManagedConnection) and type(conn).__name__ == "RoleCheckedConnection"
            assert wire.usable(conn) is wire.enabled()  # off in the WURK_FAST_PATH=0 suite
            assert conn.port == group.master_port()
        finally:
            get_redis(config=config).connection_pool.release(conn)
        probe = probe_redis(config)
        assert probe.ping() and probe.info("replication")["role"] == "master"
        probe.connection_pool.disconnect()

        async def push_async():
            await AsyncWriter(config).push([_job()])
            await async_redis(config).aclose()

        asyncio.run(push_async())
        assert primary.llen("queue:default") == 1
    finally:
        primary.delete("queue:default")
        primary.close()
        connection.reset()


def test_job_code_s_client_takes_the_full_path_and_follows_a_failover(monkeypatch):
    """Issue 48 item 2: redis_client()'s one-call shortcut skips the check that points a
    connection at the current primary, so a Sentinel pool never takes it; its commands
    reach the promoted primary after a failover. A group of its own: the module's
    group keeps its primary for the other tests."""
    from wurk_django import redis_client

    group = SentinelGroup().start()
    shortcuts: list[tuple] = []
    real = wire.round_trip
    monkeypatch.setattr(wire, "round_trip", lambda conn, command, fresh: shortcuts.append(command)
                        or real(conn, command, fresh))
    monkeypatch.setattr(wire, "busy_threads", 2)
    try:
        app = redis_client(config=_sentinel_config(group))
        assert [app.incr("n") for _ in range(5)] == [1, 2, 3, 4, 5]
        old = group.master_port()
        group.failover()
        wait_for(lambda: group.master_port() != old, timeout=30, message="the promotion")

        def incremented() -> int | None:
            try:
                return app.incr("n")
            except redis_lib.ConnectionError:  # the demoted primary's refusal, or a dial during the switch
                return None

        assert wait_for(incremented, timeout=30, message="a command on the promoted primary") == 6
        promoted = redis_lib.Redis(port=group.master_port(), db=1)
        try:
            assert promoted.get("n") == b"6"
        finally:
            promoted.close()
        assert shortcuts == []
    finally:
        connection.reset()
        group.stop()


def _waiting_for_announcements(thread: threading.Thread) -> bool:
    """``thread`` (a watcher) is blocked in its pub/sub read."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "get_message":
            return True
        frame = frame.f_back
    return False


def test_stopped_watchers_end_without_an_error(group, monkeypatch):
    """A swarm supervisor stops this process's watchers before each fork, closing the
    socket under each one's blocked read: each ends quietly (redis-py 8's hiredis
    parser meets that socket as None, a TypeError, and each thread died of it with a
    traceback on stderr) and forgets it was stopped."""
    failures: list = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    config = _sentinel_config(group)
    try:
        get_redis(config=config).ping()  # its pool starts one watcher per sentinel
        key = (os.getpid(), config.redis_target.identity)
        watchers = sentinel_module._watchers[key]
        assert len(watchers) == len(group.sentinel_ports)
        wait_for(lambda: all(_waiting_for_announcements(w) for w in watchers), timeout=15,
                 message="every watcher to wait for an announcement")
        sentinel_module.stop_watchers()
        assert not [w for w in watchers if w.is_alive()]
        assert [f"{f.thread.name}: {f.exc_type.__name__}: {f.exc_value}" for f in failures] == []
        assert not set(watchers) & sentinel_module._stopped
    finally:
        connection.reset()


def _our_clients(server: redis_lib.Redis) -> list[dict]:
    """Connections to ``server`` other than sentinels, replicas and this one."""
    me = server.client_id()
    return [c for c in server.client_list() if int(c["id"]) != me
            and not c.get("name", "").startswith(("sentinel", "test-"))
            and "S" not in c.get("flags", "") and c.get("cmd") not in ("replconf", "psync", "sync")]


def test_a_failover_mid_drain_loses_no_job(tmp_path):
    """A worker drains jobs a client keeps pushing; SENTINEL FAILOVER promotes the
    replica mid-way. Both follow the new primary; every pushed job runs; the
    figures (runs twice, seconds without a finished job) are printed."""
    group = SentinelGroup().start()
    record = tmp_path / "runs.txt"
    record.touch()
    redis_setting = {"SENTINELS": group.addresses, "SERVICE": group.service, "OPTIONS": {"db": 1}}
    config = Config(raw={"REDIS": redis_setting, "TAG": "t"})
    worker = WorkerProcess("-c", "5", env={
        "WURK_TEST_RECORD_FILE": str(record),
        "WURK_TEST_EXTRA": json.dumps({"REDIS": redis_setting, "FETCH_POLL_INTERVAL": 0.5}),
    })
    total = 800
    pushed: list[str] = []
    push_errors: list[str] = []
    done = threading.Event()

    def pusher() -> None:
        writer = Writer(config)
        for i in range(total):
            value = f"job-{i}"
            try:
                writer.push([_job("tests.jobsapp.jobs.FileRecordJob", value)])
            except redis_lib.RedisError as exc:  # never expected: the buffer takes outages
                push_errors.append(f"{value}: {exc}")
            pushed.append(value)
            time.sleep(0.01)
        done.set()

    try:
        thread = threading.Thread(target=pusher)
        thread.start()
        wait_for(lambda: len(record.read_text().splitlines()) >= 150, timeout=60, message="150 jobs run")
        old_port = group.master_port()
        started = time.time()
        group.failover()
        wait_for(lambda: group.master_port() != old_port, timeout=30, message="the sentinels to switch")
        switched = time.time()
        # Within seconds, and long before the sentinels demote the old primary (which
        # would close its clients anyway), nothing of ours talks to it any more.
        old = redis_lib.Redis(port=old_port)
        try:
            # Measured 0.6-0.7 s on a quiet machine; the bound leaves room for CI, where two
            # suites share the 2 cores (a bound, not a speed claim: docs/redis.md has the figures).
            wait_for(lambda: not _our_clients(old), timeout=10, message="the worker and the client to leave the old primary")
            followed = time.time() - switched
        finally:
            old.close()
        assert not done.is_set()
        thread.join(timeout=120)
        assert done.is_set()

        def runs() -> Counter:
            return Counter(line.split()[0] for line in record.read_text().splitlines())

        wait_for(lambda: set(runs()) >= set(pushed), timeout=60, message="every pushed job to run")
        counts = runs()
        lost = sorted(set(pushed) - set(counts))
        twice = sorted(v for v, n in counts.items() if n > 1)
        times = sorted(float(line.split()[1]) for line in record.read_text().splitlines())
        gap = max(b - a for a, b in zip(times, times[1:], strict=False) if b >= started - 1)
        new_primary = redis_lib.Redis(port=group.master_port(), db=1)
        assert new_primary.info("replication")["role"] == "master"
        new_primary.close()
        print(f"\nFAILOVER FIGURES: pushed={total} ran={len(counts)} lost={len(lost)} ran_twice={len(twice)} "
              f"switch_seconds={switched - started:.2f} longest_gap_without_a_finished_job={gap:.2f}s "
              f"left_old_primary_after_switch={followed:.2f}s push_errors={len(push_errors)}")
        assert lost == [] and push_errors == []
        assert len(counts) == total
        assert gap < 15, f"jobs stood still for {gap:.1f} s"
        assert worker.alive(), worker.output()
    finally:
        done.set()
        worker.stop()
        group.stop()
        connection.reset()
    assert "Traceback" not in worker.output() or "Redis" in worker.output()


#: What docs/redis.md recommends for a Sentinel group, on every data server (a replica
#: may become the primary): a primary cut off from every replica refuses writes
#: (NOREPLICAS) instead of taking writes its replacement will never see, and a replica
#: that must resync from the new primary is served at once.
RECOMMENDED = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10", "--repl-diskless-sync-delay", "0")


def _runs(record) -> Counter:
    return Counter(line.split()[0] for line in record.read_text().splitlines())


def _run_times(record) -> list[float]:
    return sorted(float(line.split()[1]) for line in record.read_text().splitlines())


def _longest_stall(times: list[float], start: float, end: float) -> float:
    """The longest stretch from ``start`` (a failover command, with jobs queued) to
    ``end`` without a job finishing."""
    seen = [start, *(t for t in times if start < t < end)]
    return max(b - a for a, b in zip(seen, seen[1:] + [min(end, times[-1])], strict=True))


@contextlib.contextmanager
def cpu_hog(processes: int | None = None) -> Iterator[None]:
    """``processes`` (default one per core) spinning ``while True: pass`` for the length
    of the block: a loaded machine, where the worker's threads, the sentinels and the
    servers all wait for a core. Stopped by pid, whatever the block raised."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(processes or os.cpu_count() or 1)]
    try:
        yield
    finally:
        for hog in hogs:
            stop_process(hog, signal.SIGKILL, 5)


def _where(group: SentinelGroup, values: list[str]) -> dict[str, list[str]]:
    """Where the jobs recording ``values`` are on the current primary (DB 1): each key
    holding one, by value; a value in no key is in none."""
    primary = redis_lib.Redis(port=group.master_port(), db=1)
    try:
        found: dict[str, list[str]] = {value: [] for value in values}
        for key in primary.scan_iter(count=1000):
            kind = primary.type(key)
            members = (primary.lrange(key, 0, -1) if kind == b"list"
                       else primary.zrange(key, 0, -1) if kind == b"zset" else [])
            for member in members:
                for value in values:
                    if f'"{value}"'.encode() in member:
                        found[value].append(key.decode())
        return found
    finally:
        primary.close()


def _thread_dump(worker: WorkerProcess) -> str:
    """What the worker's threads wait on, from its log (TTIN dumps every stack)."""
    before = len(worker.output())
    worker.signal(signal.SIGTTIN)
    time.sleep(1.5)
    return worker.output()[before:]


def failovers(tmp_path: Path, *, rounds: int = 5, replicas: int = 2, server_args: tuple[str, ...] = RECOMMENDED,
              strict: bool = True, crash: bool = False, pushing: bool = True, burst_size: int = 100,
              settle: float | None = None, poll_interval: float = 0.5) -> dict:
    """Run ``rounds`` failovers mid-drain (see the test below) and return the figures:
    ``lost``, ``ran_twice``, ``push_errors`` and per failover ``switch_s`` (command to
    the sentinels' switch), ``left_old_s`` (switch to none of ours using the old primary,
    to the second)
    ``stall_s`` (the longest stretch without a finished job from the command on) and
    ``drained_s`` (the command to the last job of that failover's burst finishing).
    ``pushing=False``: no other process pushes, so after each switch the worker's idle
    threads must find the burst on the new primary by themselves; ``burst_size`` jobs
    of 20 ms are queued before each failover; ``settle``: how long a burst may take
    to run before the test fails (with the worker's thread dump);
    ``poll_interval``: the worker's ``FETCH_POLL_INTERVAL``.
    ``strict=False`` measures a setup that may lose jobs (docs/redis.md's figures
    without the recommended settings) instead of failing on it; ``crash=True`` kills
    the primary (SIGKILL) instead of asking the sentinels for a failover, and starts
    it again as a replica once the sentinels switched."""
    group = SentinelGroup(replicas=replicas, server_args=server_args).start()
    record, pushed_file, stop = tmp_path / "runs.txt", tmp_path / "pushed.txt", tmp_path / "stop"
    record.touch()
    pushed_file.touch()
    redis_setting = {"SENTINELS": group.addresses, "SERVICE": group.service, "OPTIONS": {"db": 1}}
    extra = json.dumps({"REDIS": redis_setting, "FETCH_POLL_INTERVAL": poll_interval})
    env = {"WURK_TEST_RECORD_FILE": str(record), "WURK_TEST_EXTRA": extra}
    worker = WorkerProcess("-c", "5", env=env)
    pusher = None if not pushing else subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("failover_pusher.py")), str(pushed_file), str(stop), "0.02", "40"],
        cwd=str(ROOT), env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    # Named, so the check below can tell it: between two bursts its two parked connections
    # stay idle on the old primary (closed before they send anything, at the next burst).
    burst_options = {**redis_setting, "OPTIONS": {"db": 1, "client_name": "test-bursts"}}
    writer = Writer(Config(raw={"REDIS": burst_options, "TAG": "t"}))
    bursts: list[str] = []
    rows: list[dict] = []
    settle = settle or (60 if strict else 20)
    try:
        if not pushing:
            bursts += [f"w-{k}" for k in range(40)]
            writer.push([_job("tests.jobsapp.jobs.FileRecordJob", value) for value in bursts])
        wait_for(lambda: len(_runs(record)) >= 40, timeout=60, message="the worker to run the first pushes")
        for round_ in range(rounds):
            burst = [f"b{round_}-{k}" for k in range(burst_size)]
            writer.push([_job("tests.jobsapp.jobs.FileRecordJob", value, 0.02) for value in burst])
            bursts += burst
            old_port = group.master_port()
            if crash:
                group.crash(old_port)
            else:
                group.failover()
            commanded = time.time()  # accepted: the sentinel promotes a replica within ~0.2 s
            wait_for(lambda: group.master_port() != old_port, timeout=30, message="the sentinels to switch")
            switched = time.time()
            new_port = group.master_port()
            if crash:
                group.restart_as_replica(old_port, new_port)
            old = redis_lib.Redis(port=old_port)
            try:
                # Connections kept idle (a pool's, a fetch slot's) close before they send
                # anything more; what matters is that none is still used there.
                try:
                    wait_for(lambda: not [c for c in _our_clients(old) if int(c["idle"]) < 1], timeout=10,
                             message="the worker and the pushers to stop using the old primary")
                except AssertionError as exc:
                    raise AssertionError(f"{exc}: {_our_clients(old)}") from None
                left = time.time() - switched
                old.execute_command("REPLICAOF", "127.0.0.1", str(new_port))  # what the sentinels do ~10 s later
            finally:
                old.close()
            wait_for(lambda: all(replicating(s.port, new_port) for s in group.servers if s.port != new_port),
                     timeout=30, message="every replica to follow the new primary")
            # Two failovers in a row must not promote a server the sentinels still believe a
            # primary (they read a replica's role every 10 s): a stale copy would win.
            wait_for(group.settled, timeout=30, interval=0.2, message="the sentinels to see every replica")
            try:
                wait_for(lambda: set(_runs(record)) >= set(burst), timeout=settle, message=f"burst {round_} to run")
            except AssertionError as exc:
                if strict:
                    ran = len(set(_runs(record)) & set(burst))
                    raise AssertionError(f"{exc}: {ran} of {len(burst)} ran {time.time() - switched:.1f} s after "
                                         f"the switch; the worker's threads:\n{_thread_dump(worker)}") from None
            last = {value: t for value, t in ((line.split()[0], float(line.split()[1]))
                                              for line in record.read_text().splitlines())}
            done_at = max((last[value] for value in burst if value in last), default=float("nan"))
            rows.append({"commanded": commanded, "switch_s": switched - commanded, "left_old_s": left,
                         "drained_s": done_at - commanded})
        stop.touch()
        out = pusher.communicate(timeout=60)[0] if pusher is not None else ""
        pushed = pushed_file.read_text().split()
        expected = set(pushed) | set(bursts)
        try:
            wait_for(lambda: set(_runs(record)) >= expected, timeout=settle, message="every pushed job to run")
        except AssertionError as exc:
            if strict:
                missing = sorted(expected - set(_runs(record)))
                raise AssertionError(
                    f"{exc}: {len(missing)} not run, {_where(group, missing[:20])}; the pusher exited with "
                    f"{pusher.returncode if pusher is not None else None}, saying {out[-2000:]!r}; "
                    f"the worker's threads:\n{_thread_dump(worker)}") from None
        counts = _runs(record)
        times = _run_times(record)
        ends = [row["commanded"] for row in rows[1:]] + [times[-1]]
        for row, end in zip(rows, ends, strict=True):
            row["stall_s"] = _longest_stall(times, row["commanded"], end)
        figures = {"pushed": len(expected), "ran": len(counts), "lost": sorted(expected - set(counts)),
                   "ran_twice": sorted(v for v, n in counts.items() if n > 1),
                   "pusher_status": pusher.returncode if pusher is not None else 0,
                   "pusher_output": out, "rounds": rows, "worker_alive": worker.alive()}
        print(f"\nFAILOVERS x{rounds} ({replicas} replicas, {' '.join(server_args) or 'no settings'}): "
              f"pushed={figures['pushed']} ran={figures['ran']} lost={len(figures['lost'])} "
              f"ran_twice={len(figures['ran_twice'])} "
              + " | ".join(f"switch {r['switch_s']:.2f}s left-old {r['left_old_s']:.2f}s stall {r['stall_s']:.2f}s "
                           f"drained {r['drained_s']:.2f}s"
                           for r in rows))
        if not figures["worker_alive"]:
            figures["worker_output"] = worker.output()
        return figures
    finally:
        stop.touch()
        if pusher is not None:
            stop_process(pusher, signal.SIGTERM, 10)
        worker.stop()
        group.stop()
        connection.reset()


def test_five_failovers_mid_drain_with_another_process_pushing_lose_nothing(tmp_path):
    """Issue 25 item 1. A primary, two replicas and three sentinels with the settings
    docs/redis.md recommends; a worker (5 threads) drains 20 ms jobs that another
    process keeps pushing (about 40 a second), and before each of 5 ``SENTINEL
    FAILOVER``s the test queues a burst of 100 more, so every failover lands mid-drain.

    Every pushed job runs (0 lost, no push raised); after each switch the worker is
    back to work within a generous bound, counted from the job-run times written
    outside Redis; nothing of ours goes on using the old primary. The figures
    (jobs run twice, the longest stall per failover) are printed for docs/redis.md.
    The sentinels make the old primary a replica of the new one about 10 s after the
    switch; the test does it itself as soon as our processes have left it, so that
    five failovers fit in well under a minute.
    """
    figures = failovers(tmp_path)
    assert figures["pusher_status"] == 0, figures["pusher_output"]
    assert figures["lost"] == [] and figures["ran"] == figures["pushed"]
    # Measured 0; a job can still run twice when its acknowledgement had not reached the
    # replica at the promotion. A worker that went on fetching from the old primary ran
    # 251 of 590 twice here (main before the fence): hundreds, not a handful.
    assert len(figures["ran_twice"]) <= 25, figures["ran_twice"]
    # A bound, not a speed claim (measured 1-2 s here; docs/redis.md has the figures):
    # the worker never stands still long after a switch, five times in a row.
    assert all(row["stall_s"] < 10 for row in figures["rounds"]), figures["rounds"]
    assert figures["worker_alive"], figures.get("worker_output")


def test_five_failovers_under_load_each_drain_within_seconds(tmp_path):
    """Issue 43 item 8. The same group, on a loaded machine: a spinning process runs for
    the whole test, so the worker, the servers and the sentinels wait for a core. One,
    not one per core: CI runs its two suites side by side on the same cores, and a hog
    per core would slow the other suite's timing-bound tests too; the other suite is
    load enough beside it (runs with a hog per core drained in 2.7-3.8 s as well,
    docs/redis.md). 400 jobs are queued before each of 5 ``SENTINEL FAILOVER``s and nothing is
    pushed after it, so the worker's idle threads must find the backlog on the new
    primary by themselves. Every job runs, and each burst has drained within 15 s of
    its failover command."""
    with cpu_hog(processes=1):
        # The default poll interval, as a deployment runs: an idle thread's wait for its
        # turn is 15 of them (server/fetch/one_blocker.py), the longest a stall could be.
        figures = failovers(tmp_path, pushing=False, burst_size=400, settle=15, poll_interval=2)
    assert figures["lost"] == [] and figures["ran"] == figures["pushed"]
    assert len(figures["ran_twice"]) <= 25, figures["ran_twice"]
    assert all(row["drained_s"] < 15 for row in figures["rounds"]), figures["rounds"]
    assert figures["worker_alive"], figures.get("worker_output")


class _ScriptedSentinels(sentinel_module.WatchedSentinel):
    """The sentinels' newest configuration as the test sets it, without a network."""

    answer: tuple[int, tuple[str, int]]

    def newest(self, service_name):
        return self.answer


def test_the_leaders_announcements_fence_the_old_primary_then_follow_the_promoted_one(monkeypatch):
    """Issue 25 item 1, without servers: what each announcement does to a pool and to
    the address a new connection dials."""
    target = Config(raw={"REDIS": {"SENTINELS": [("192.0.2.7", 26379)], "SERVICE": "svc"}}).redis_target
    old, new = ("192.0.2.1", 6379), ("192.0.2.2", 6379)
    scripted = _ScriptedSentinels(target)
    scripted.answer = (1, old)
    monkeypatch.setitem(sentinel_module._managers, (os.getpid(), target.identity), scripted)
    monkeypatch.setitem(sentinel_module._states, target.identity, sentinel_module.ServiceState())
    pool = sentinel_module.BlockingSentinelPool("svc", scripted, max_connections=2)
    monkeypatch.setitem(sentinel_module._pools, target.identity, weakref.WeakSet([pool]))
    pool.proxy.master_address = old
    assert scripted.discover_master("svc") == old

    # The leader is about to promote: nothing more goes to the old primary.
    sentinel_module.on_event(target, "+failover-state-send-slaveof-noone",
                             "slave 192.0.2.2:6379 192.0.2.2 6379 @ svc 192.0.2.1 6379")
    assert pool.proxy.master_address is None
    with pytest.raises(redis_lib.ConnectionError, match="failover is promoting"):
        scripted.discover_master("svc")
    # Promoted: the leader counts the new epoch but still names the old primary.
    scripted.answer = (2, old)
    sentinel_module.on_event(target, "+promoted-slave", "slave 192.0.2.2:6379 192.0.2.2 6379 @ svc 192.0.2.1 6379")
    assert pool.proxy.master_address == new and scripted.discover_master("svc") == new
    # A late announcement of an older failover changes nothing: the sentinels are asked.
    sentinel_module.on_event(target, "+switch-master", "svc 192.0.2.2 6379 192.0.2.1 6379")
    assert pool.proxy.master_address == new and scripted.discover_master("svc") == new
    # The sentinels announce the switch; a later failover back is followed.
    scripted.answer = (2, new)
    assert scripted.discover_master("svc") == new
    scripted.answer = (3, old)
    assert scripted.discover_master("svc") == old


class _AnsweringLate(_ScriptedSentinels):
    """Scripted sentinels whose answer reaches the asking thread after ``meanwhile`` ran:
    the leader's announcements acted on by another watcher in between."""

    meanwhile: list

    def discover_master(self, service_name):
        answer = super().discover_master(service_name)
        while self.meanwhile:
            self.meanwhile.pop(0)()
        return answer


@pytest.mark.parametrize("heard", ["fence", "promotion"])
def test_an_answer_older_than_an_announcement_does_not_undo_it(monkeypatch, heard):
    """Issue 43 item 8. A watcher asks the sentinels (its recheck, or another sentinel's
    ``+switch-master``) and reads the old primary; before it moves the pools, another
    watcher acts on the leader's fence (and promotion). On a loaded machine that window
    is tens of milliseconds wide. The late answer must not move the pools back to the
    old primary: that undid the fence (busy connections went on writing there) and
    kept every pool on the old primary until the next recheck."""
    target = Config(raw={"REDIS": {"SENTINELS": [("192.0.2.9", 26379)], "SERVICE": "svc"}}).redis_target
    old, new = ("192.0.2.1", 6379), ("192.0.2.2", 6379)
    scripted = _AnsweringLate(target)
    scripted.answer = (1, old)
    monkeypatch.setitem(sentinel_module._managers, (os.getpid(), target.identity), scripted)
    monkeypatch.setitem(sentinel_module._states, target.identity, sentinel_module.ServiceState())
    pool = sentinel_module.BlockingSentinelPool("svc", scripted, max_connections=2)
    monkeypatch.setitem(sentinel_module._pools, target.identity, weakref.WeakSet([pool]))
    pool.proxy.master_address = old
    events = [("+failover-state-send-slaveof-noone", "slave 192.0.2.2:6379 192.0.2.2 6379 @ svc 192.0.2.1 6379")]
    if heard == "promotion":
        events.append(("+promoted-slave", "slave 192.0.2.2:6379 192.0.2.2 6379 @ svc 192.0.2.1 6379"))
    scripted.meanwhile = [functools.partial(sentinel_module.on_event, target, channel, data) for channel, data in events]
    sentinel_module._ask(target)  # the recheck's question, answered before the announcements
    assert pool.proxy.master_address == (None if heard == "fence" else new)
    assert sentinel_module.state_for(target.identity).following == (None if heard == "fence" else new)
    # The next question, asked after them, is heard as usual.
    scripted.answer = (2, new)
    sentinel_module._ask(target)
    assert pool.proxy.master_address == new


def test_an_aborted_failover_lifts_the_fence(monkeypatch):
    target = Config(raw={"REDIS": {"SENTINELS": [("192.0.2.8", 26379)], "SERVICE": "svc"}}).redis_target
    old = ("192.0.2.1", 6379)
    scripted = _ScriptedSentinels(target)
    scripted.answer = (1, old)
    monkeypatch.setitem(sentinel_module._managers, (os.getpid(), target.identity), scripted)
    monkeypatch.setitem(sentinel_module._states, target.identity, sentinel_module.ServiceState())
    sentinel_module.on_event(target, "+failover-state-send-slaveof-noone",
                             "slave 192.0.2.2:6379 192.0.2.2 6379 @ svc 192.0.2.1 6379")
    with pytest.raises(redis_lib.ConnectionError):
        scripted.discover_master("svc")
    sentinel_module.on_event(target, "-failover-abort-slave-timeout", "master svc 192.0.2.1 6379")
    assert scripted.discover_master("svc") == old
