"""The write path (issue 11, item 1; issue 24 item 3): typed write operations, the write
hooks that transform them, the one serializer, NOSCRIPT resend, READONLY redial, for the
blocking Writer and its async twin. Round trips are counted at the writer's one send
function, so every command of a round trip is visible."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
import redis as redis_lib
from django.conf import settings

from tests.local_redis import LocalRedis, free_port
from wurk_django import payload
from wurk_django.client import operations, reliable_push
from wurk_django.client import writer as writer_module
from wurk_django.client.operations import Enqueue, Extra, Schedule
from wurk_django.client.writer import AsyncWriter, Writer, register_hook, unregister_hook
from wurk_django.conf import Config
from wurk_django.redis import scripts
from wurk_django.redis.errors import PrimaryRefused

# Pushes the job itself and marks it, atomically: what a feature's script would do instead of LPUSH.
PUSH_AND_MARK = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
"""


def _known_script(text: str) -> str:
    """Register ``text`` with this process the way ``scripts.lua()`` does; returns its SHA."""
    sha = hashlib.sha1(text.encode()).hexdigest()
    scripts._remember(sha, text)
    return sha


def _config(url: str | None = None, **extra) -> Config:
    return Config(raw={"REDIS_URL": url or settings.WURK_TEST_REDIS_URL, "TAG": "t", **extra})


def _job(queue: str = "default", **extra) -> dict:
    return {"class": "X", "args": [], "queue": queue, "jid": payload.new_jid(), "retry": True,
            "created_at": payload.now_ms(), **extra}


class RoundTrips:
    """Every round trip the writers make: a list of command lists."""

    def __init__(self, monkeypatch) -> None:
        self.trips: list[list[tuple]] = []
        real_sync, real_async = writer_module.send_commands, writer_module._async_round_trip

        def sync(client, commands, **kwargs):
            self.trips.append(list(commands))
            return real_sync(client, commands, **kwargs)

        async def async_(client, commands):
            self.trips.append(list(commands))
            return await real_async(client, commands)

        monkeypatch.setattr(writer_module, "send_commands", sync)
        monkeypatch.setattr(writer_module, "_async_round_trip", async_)


@pytest.fixture
def hooks():
    names: list[str] = []

    def add(name, hook, position=0):
        names.append(name)
        register_hook(name, hook, position=position)

    yield add
    for name in names:
        unregister_hook(name)


@pytest.fixture
def trips(monkeypatch):
    return RoundTrips(monkeypatch)


# --- write hooks ----------------------------------------------------------------------------------


def test_a_hook_sees_the_operations_and_adds_commands_to_the_same_round_trip(redis_db, hooks, trips, wake_tokens_wanted):
    seen: list[list[tuple[str, str]]] = []

    def register_jids(ops):
        seen.append([(type(op).__name__, op.job["jid"]) for op in ops])
        return [*ops, Extra(("SADD", "hooked", *[job["jid"] for job in operations.jobs(ops)]))]

    hooks("test-register", register_jids)
    jobs = [_job(), _job(), _job("low", at=9_999_999_999)]
    Writer(_config()).push(jobs)
    assert seen == [[("Enqueue", jobs[0]["jid"]), ("Enqueue", jobs[1]["jid"]), ("Schedule", jobs[2]["jid"])]]
    assert len(trips.trips) == 1
    # The pushes, the hook's command, then the wake-up signals (always last: the pushes land first).
    names = [c[0] for c in trips.trips[0]]
    assert names == ["ZADD", "SADD", "LPUSH", "SADD", "LPUSH", "LTRIM", "EXPIRE", "PUBLISH"]
    assert trips.trips[0][3][1] == "hooked"
    assert redis_db.smembers("hooked") == {job["jid"].encode() for job in jobs}
    assert redis_db.llen("queue:default") == 2 and redis_db.zcard("schedule") == 1


def test_a_hook_transforms_operations_rerouting_and_rewriting_a_job(redis_db, hooks, trips, wake_tokens_wanted):
    """A hook returns other operations than it was given: here the jobs of queue "old" are
    rewritten (a new payload, a new queue) and go where the serializer puts any push, wake-up
    token included; the scheduled one is moved to a later time."""

    def reroute(ops):
        out = []
        for op in ops:
            if type(op) is Enqueue and op.queue == "old":
                out.append(operations.enqueue({**op.job, "queue": "new", "rerouted": True}))
            elif type(op) is Schedule:
                out.append(Schedule(op.at + 60, op.raw, op.job))
            else:
                out.append(op)
        return out

    hooks("test-reroute", reroute)
    moved, kept, later = _job("old"), _job(), _job(at=2_000_000_000)
    Writer(_config()).push([moved, kept, later])
    assert redis_db.llen("queue:old") == 0 and not redis_db.exists("wake:old")
    [raw] = redis_db.lrange("queue:new", 0, -1)
    assert payload.loads(raw)["jid"] == moved["jid"] and payload.loads(raw)["rerouted"] is True
    assert redis_db.lrange("wake:new", 0, -1) == [b"1"] and redis_db.smembers("queues") == {b"new", b"default"}
    assert redis_db.zscore("schedule", redis_db.zrange("schedule", 0, 0)[0]) == 2_000_000_060
    assert trips.trips[0][-1] == ("PUBLISH", "wake-schedule:" + str(redis_db.connection_pool.connection_kwargs["db"]),
                                  "2000000060.0")


def test_a_hook_can_push_a_job_via_a_script_in_the_same_round_trip(redis_db, hooks, trips, wake_tokens_wanted):
    sha = _known_script(PUSH_AND_MARK)
    redis_db.script_load(PUSH_AND_MARK)

    def through_script(ops):
        # The job of queue "marked" is pushed (and marked) by the script instead of LPUSH.
        return [operations.Enqueue(op.queue, op.raw, op.job,
                                   via=("EVALSHA", sha, 2, "queue:marked", "marks", op.raw, op.job["jid"]))
                if type(op) is Enqueue and op.queue == "marked" else op for op in ops]

    hooks("test-script", through_script)
    marked, plain = _job("marked"), _job()
    Writer(_config()).push([marked, plain])
    assert len(trips.trips) == 1
    # The plain push, then the script; the script wakes for its own push (this one: none).
    assert [c[0] for c in trips.trips[0]] == ["SADD", "LPUSH", "EVALSHA", "LPUSH", "LTRIM", "EXPIRE"]
    assert trips.trips[0][1][1] == "queue:default" and trips.trips[0][3][1] == "wake:default"
    assert redis_db.smembers("marks") == {marked["jid"].encode()}
    assert payload.loads(redis_db.lindex("queue:marked", 0))["jid"] == marked["jid"]
    assert payload.loads(redis_db.lindex("queue:default", 0))["jid"] == plain["jid"]


def test_hooks_run_in_position_order_each_seeing_the_previous_operations(redis_db, hooks):
    order: list[str] = []

    def hook(name):
        def run(ops):
            order.append(name)
            assert len(ops) == len(order)  # the job, plus one Extra per earlier hook
            return [*ops, Extra(("RPUSH", "order", name))]
        return run

    hooks("test-late", hook("late"), position=20)
    hooks("test-early", hook("early"), position=-10)
    hooks("test-middle", hook("middle"), position=0)
    Writer(_config()).push([_job()])
    assert order == ["early", "middle", "late"]
    assert redis_db.lrange("order", 0, -1) == [b"early", b"middle", b"late"]


def test_add_to_set_runs_the_hooks_over_its_operations(redis_db, hooks, trips):
    seen: list[Schedule] = []
    hooks("test-set", lambda ops: seen.extend(ops) or ops)
    job = _job()
    Writer(_config()).add_to_set("retry", [(job, 123.0), (b'{"raw":"bytes"}', 124.0)])
    # Stored bytes are passed on as they are, not parsed.
    assert [(op.into, op.at, op.job is job) for op in seen] == [("retry", 123.0, True), ("retry", 124.0, False)]
    assert seen[1].raw == b'{"raw":"bytes"}'
    assert len(trips.trips) == 1 and redis_db.zcard("retry") == 2


def test_the_async_writer_runs_the_same_hooks_in_one_round_trip(redis_db, hooks, trips):
    hooks("test-async", lambda ops: [*ops, Extra(("SADD", "hooked", *[j["jid"] for j in operations.jobs(ops)]))])
    job, high = _job(), _job()

    async def go():
        writer = AsyncWriter(_config())
        await writer.push([job])
        await writer.push([high], extra=[("SET", "extra", "1")], front=True)

    asyncio.run(go())
    assert len(trips.trips) == 2
    assert trips.trips[1][0] == ("SET", "extra", "1") and trips.trips[1][2][0] == "RPUSH"
    assert redis_db.smembers("hooked") == {job["jid"].encode(), high["jid"].encode()}
    # RPUSH puts the second one at the end workers take from next.
    assert [payload.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)] == [job["jid"], high["jid"]]


# --- NOSCRIPT -------------------------------------------------------------------------------------


def _flush_scripts(redis_db) -> None:
    # Server-wide, but harmless: every writer falls back on NOSCRIPT.
    redis_db.script_flush()


def test_noscript_resends_only_the_unknown_script_as_eval(redis_db, trips):
    """RUN-833: nOSCRIPT in a pipeline: reload and replay."""
    text = "redis.call('INCR', KEYS[1]) return 'ran'"
    sha = _known_script(text)
    _flush_scripts(redis_db)
    replies = Writer(_config()).send([("LPUSH", "before", "x"), ("EVALSHA", sha, 1, "ran"), ("INCR", "after")])
    assert replies == [1, b"ran", 1]
    assert len(trips.trips) == 2
    assert trips.trips[1] == [("EVAL", text, 1, "ran")]  # only the script, with its text
    # Everything ran exactly once.
    assert redis_db.llen("before") == 1 and redis_db.get("ran") == b"1" and redis_db.get("after") == b"1"


def test_noscript_in_the_async_writer(redis_db, trips):
    text = "redis.call('INCR', KEYS[1]) return 'async'"
    sha = _known_script(text)
    _flush_scripts(redis_db)
    replies = asyncio.run(AsyncWriter(_config()).send([("EVALSHA", sha, 1, "ran"), ("INCR", "after")]))
    assert replies == [b"async", 1]
    assert trips.trips[1] == [("EVAL", text, 1, "ran")]
    assert redis_db.get("ran") == b"1" and redis_db.get("after") == b"1"


def test_a_loaded_script_costs_one_round_trip(redis_db, trips):
    text = "return 'loaded'"
    sha = _known_script(text)
    redis_db.script_load(text)
    assert Writer(_config()).send([("EVALSHA", sha, 0)]) == [b"loaded"]
    assert len(trips.trips) == 1


def test_noscript_for_a_script_this_process_never_saw_is_raised(redis_db, trips):
    _flush_scripts(redis_db)
    with pytest.raises(redis_lib.exceptions.NoScriptError):
        Writer(_config()).send([("EVALSHA", "0" * 40, 0), ("SET", "k", "v")])
    assert len(trips.trips) == 1 and redis_db.get("k") == b"v"


# --- READONLY after a failover (CORE-085) -----------------------------------------------------------


@pytest.fixture
def replica():
    """A read-only replica whose primary is unreachable: every write is answered READONLY,
    as the old primary answers after a failover."""
    port = free_port()
    server = LocalRedis("--port", str(port), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1", str(free_port()))
    client = redis_lib.Redis(port=port)
    server.start(client.ping)
    yield f"redis://127.0.0.1:{port}/0", client
    client.close()
    server.stop()


def _promote_on_redial(pool, client, promoted: list[bool]) -> None:
    """Make the writer's redial meet a promoted server (the failover finished meanwhile)."""
    disconnect = pool.disconnect

    def redial(*args, **kwargs):
        client.execute_command("REPLICAOF", "NO", "ONE")
        promoted.append(True)
        return disconnect(*args, **kwargs)

    pool.disconnect = redial


def test_readonly_redials_and_sends_once_more(replica, trips):
    url, client = replica
    writer = Writer(_config(url))
    promoted: list[bool] = []
    _promote_on_redial(writer.redis.connection_pool, client, promoted)
    job = _job()
    writer.push([job])
    assert promoted == [True] and len(trips.trips) == 2
    assert [payload.loads(raw)["jid"] for raw in client.lrange("queue:default", 0, -1)] == [job["jid"]]


def test_readonly_twice_is_raised_and_nothing_is_written(replica, trips):
    url, client = replica
    with pytest.raises(PrimaryRefused, match="read only replica"):
        Writer(_config(url, RELIABLE_PUSH=False)).push([_job()])
    assert len(trips.trips) == 2
    assert client.llen("queue:default") == 0


def test_readonly_twice_waits_in_the_push_buffer(replica, trips):
    """Issue 25 item 1: with RELIABLE_PUSH (the default) a demoted primary's refusal is
    buffered like an outage, not raised; the job is written once a primary answers."""
    url, client = replica
    writer = Writer(_config(url))
    job = _job()
    writer.push([job])
    assert len(trips.trips) == 2 and client.llen("queue:default") == 0
    assert reliable_push.buffered() == 1
    client.execute_command("REPLICAOF", "NO", "ONE")  # the failover ends: it is the primary now
    writer.push([_job()])
    assert reliable_push.buffered() == 0
    assert payload.loads(client.lrange("queue:default", -1, -1)[0])["jid"] == job["jid"]


def test_the_async_writer_redials_on_readonly(replica, trips):
    url, client = replica
    promoted: list[bool] = []
    job = _job()

    async def go():
        writer = AsyncWriter(_config(url))
        pool = writer.redis.connection_pool
        disconnect = pool.disconnect

        async def redial(*args, **kwargs):
            client.execute_command("REPLICAOF", "NO", "ONE")
            promoted.append(True)
            return await disconnect(*args, **kwargs)

        pool.disconnect = redial
        await writer.push([job])

    asyncio.run(go())
    assert promoted == [True] and len(trips.trips) == 2
    assert payload.loads(client.lindex("queue:default", 0))["jid"] == job["jid"]


# --- the reliable-push buffer (PRO-320) -------------------------------------------------------------


def test_async_pushes_are_buffered_through_an_outage_and_delivered_in_order(monkeypatch):
    from tests.support import wait_for
    from wurk_django.client import reliable_push

    monkeypatch.setattr(reliable_push, "FLUSH_INTERVAL", 0.2)
    monkeypatch.setattr(reliable_push, "_buffers", {})
    port = free_port()
    config = _config(f"redis://127.0.0.1:{port}/0", RELIABLE_PUSH=True)
    first, second = _job(), _job()

    async def go():
        writer = AsyncWriter(config)
        await writer.push([first])  # nothing listens: kept in the buffer, not raised
        assert reliable_push.buffered() == 1
        await writer.push([second])  # queued behind the first, even once Redis answers
        assert reliable_push.buffered() == 2

    asyncio.run(go())
    server = LocalRedis("--port", str(port), "--bind", "127.0.0.1")
    client = redis_lib.Redis(port=port)
    try:
        server.start(client.ping)
        wait_for(lambda: reliable_push.buffered() == 0, timeout=15, message="the buffer to drain")
        assert [payload.loads(raw)["jid"] for raw in reversed(client.lrange("queue:default", 0, -1))] == [
            first["jid"], second["jid"]]
    finally:
        client.close()
        server.stop()


# --- one write path: every enqueue reaches the hooks -------------------------------------------------


def test_every_enqueue_path_reaches_the_write_hooks(redis_db, hooks, settings):
    import time

    from tests.jobsapp.jobs import RecordJob
    from wurk_django.api import RetrySet, ScheduledSet
    from wurk_django.outcome import Outcome
    from wurk_django.server.retry import Retrier
    from wurk_django.server.scheduler import Scheduler

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    seen: list[str] = []
    hooks("test-every", lambda ops: seen.extend(j["jid"] for j in operations.jobs(ops)) or ops)

    def reached(jid) -> bool:
        found = jid in seen
        seen.clear()
        return found

    config = Config()
    assert reached(RecordJob.perform_async(1))
    assert reached(RecordJob.perform_in(3600, 2))
    [bulk] = RecordJob.perform_bulk([[3]])
    assert reached(bulk)
    from wurk_django.tasks.compat import AVAILABLE as TASKS_AVAILABLE

    if TASKS_AVAILABLE:  # Django 6.0+, or 5.2 with the django-tasks backport
        from tests.tasks import sample

        assert reached(sample.add.enqueue(1, 2).id)  # django.tasks, blocking
        assert reached(asyncio.run(sample.add.aenqueue(3, 4)).id)  # django.tasks, async
    # Scheduled promotion is not a write of the client's: one script takes the job out of
    # the set and pushes it (PRO-330), so the hooks saw it when it was scheduled, not now.
    redis_db.delete("queue:default")
    [promoted] = [payload.loads(m)["jid"] for m in redis_db.zrange("schedule", 0, -1)]
    assert Scheduler(config).enqueue_due(now=time.time() + 7200) == 1 and not seen
    # Retry booking.
    raw = redis_db.rpop("queue:default")
    assert Retrier(config).book(None, raw, "default", RuntimeError("boom")) is Outcome.RETRIED
    assert reached(promoted) and RetrySet().size == 1
    # The data API's moves out of a sorted set, and adding to one.
    [entry] = list(RetrySet())
    assert entry.retry() and reached(promoted)
    ScheduledSet().schedule(time.time() + 60, payload.loads(redis_db.rpop("queue:default")))
    assert reached(promoted)
    [scheduled] = list(ScheduledSet())
    assert scheduled.add_to_queue() and reached(promoted)


# -- a push polls for its reply (PUSH_SPIN_US), a worker process never does -------------------

@pytest.fixture
def spins(monkeypatch):
    """The ``spin`` each exchange of the fast path was given."""
    from wurk_django.redis import wire

    seen: list[float] = []
    real = wire.exchange

    def recorded(conn, commands, hold_gil=False, spin=0.0):
        seen.append(spin)
        return real(conn, commands, hold_gil, spin)

    monkeypatch.setattr(wire, "exchange", recorded)
    return seen


@pytest.mark.parametrize(("setting", "expected"), [(None, 100e-6), (0, 0.0), (250, 250e-6)])
def test_a_push_polls_for_its_reply_as_long_as_push_spin_us_says(redis_db, spins, setting, expected):
    from django.test import override_settings

    from wurk_django.client.push import Client
    from wurk_django.redis import wire

    if not wire.enabled():
        pytest.skip("the fast path is off (WURK_FAST_PATH=0): redis-py's own calls never poll")

    extra = {} if setting is None else {"PUSH_SPIN_US": setting}
    with override_settings(WURK={**settings.WURK, **extra}):
        Client().push({"class": "SomeJob", "args": [1], "queue": "spin"})
    assert spins and spins[-1] == pytest.approx(expected)
    assert redis_db.llen("queue:spin") == 1


def test_push_spin_us_refuses_what_is_not_microseconds():
    from wurk_django.conf import Config
    from wurk_django.errors import ConfigurationError

    for bad in (-1, 10_001, 1.5, "100", True):
        with pytest.raises(ConfigurationError, match="PUSH_SPIN_US"):
            Config({"PUSH_SPIN_US": bad})


def test_a_worker_process_never_polls(redis_db, monkeypatch):
    from wurk_django.conf import Config
    from wurk_django.redis import wire
    from wurk_django.server.burst import run_burst

    monkeypatch.setattr(wire, "_spin_allowed", True)
    assert run_burst(Config({**settings.WURK, "QUEUES": ["spin-none"], "CONCURRENCY": 1}), timeout=10)
    assert not wire.spin_allowed()
