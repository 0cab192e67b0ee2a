"""Capsules: named thread pools beside the default one in one worker process (issue 31
item 1: CORE-100, CORE-240, CORE-076, CORE-157, PRO-110, PRO-138)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading

import pytest
from django.core.management import call_command

from tests.support import wait_for
from wurk_django.conf import Config, problems
from wurk_django.conf.capsules import Capsule, describe, parse_cli
from wurk_django.errors import ConfigurationError
from wurk_django.server.capsules import capsule_config, plan

SINGLE = {"single": {"concurrency": 1, "queues": ["single"]}}


@pytest.fixture
def admin_client(client, db):
    from tests.admin.conftest import make_user

    client.force_login(make_user("admin", superuser=True))
    return client


# -- settings and command line ----------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    ({"single": {"concurrency": 0, "queues": ["single"]}}, "concurrency 0 is not an integer >= 1"),
    ({"single": {"concurrency": True, "queues": ["single"]}}, "concurrency True is not an integer >= 1"),
    ({"single": {"concurrency": 1, "queues": ["single"], "threads": 2}}, "unknown key(s) 'threads'"),
    ({"single": {"queues": ["single"]}}, "'concurrency' missing"),
    ({"single": {"concurrency": 1, "queues": []}}, "queues [] is not a non-empty list"),
    ({"single": {"concurrency": 1, "queues": ["single,x"]}}, "must be an integer"),
    ({"default": {"concurrency": 1, "queues": ["single"]}}, "set by CONCURRENCY and QUEUES"),
    ({"a b": {"concurrency": 1, "queues": ["single"]}}, "a capsule name is a non-empty string"),
    ({"single": ["single"]}, "is not a dict with 'concurrency' and 'queues'"),
    (["single"], "is not a dict of name"),
    ({"a": {"concurrency": 1, "queues": ["x"]}, "b": {"concurrency": 2, "queues": ["y", "x,2"]}},
     "queue 'x' is in capsules 'a' and 'b'; a queue belongs to one capsule"),
    ({"single": {"concurrency": 1, "queues": ["default"]}}, "queue 'default' is in capsules 'default' and 'single'"),
])
def test_core_240_bad_capsules_settings_are_named(value, message):
    found = [p for p in problems({"CAPSULES": value}) if p.key == "CAPSULES"]
    assert found and message in found[0].message, found


def test_core_240_capsules_setting_parses_in_order_with_weights():
    config = Config({"CAPSULES": {"single": {"concurrency": 1, "queues": ["single"]},
                                  "bulk": {"concurrency": 3, "queues": ["imports,3", ["exports", 1]]}}})
    assert config.capsules == (Capsule("single", 1, (("single", 0),)),
                               Capsule("bulk", 3, (("imports", 3), ("exports", 1))))
    assert [c.name for c in plan(config)] == ["default", "single", "bulk"]
    assert Config().capsules == ()
    assert problems({"CAPSULES": SINGLE}) == []


def test_core_240_a_bad_override_raises_naming_it():
    with pytest.raises(ConfigurationError, match="capsule 'x': concurrency 0"):
        Config(CAPSULES={"x": {"concurrency": 0, "queues": ["x"]}})
    with pytest.raises(ConfigurationError, match="queue 'single' is in capsules 'default' and 'single'"):
        plan(Config(QUEUES=["default", "single"], CAPSULES=SINGLE))


def test_cli_capsule_syntax():
    assert parse_cli(None) is None
    assert parse_cli([["single:1", "single"], ["bulk:4", "imports,3", "exports,1"]]) == {
        "single": {"concurrency": 1, "queues": ["single"]},
        "bulk": {"concurrency": 4, "queues": ["imports,3", "exports,1"]}}
    for words, message in [(["single", "single"], "start with NAME:THREADS"),
                           (["single:x", "single"], "THREADS 'x' is not a whole number"),
                           (["single:1"], "name the capsule's queues"),
                           (["single:0", "single"], "concurrency 0 is not an integer >= 1"),
                           (["default:2", "q"], "set by CONCURRENCY and QUEUES")]:
        with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
            parse_cli([words])
    with pytest.raises(ConfigurationError, match="given twice"):
        parse_cli([["a:1", "x"], ["a:2", "y"]])


@pytest.mark.parametrize(("argv", "message"), [
    (["--capsule", "single:0", "single"], "concurrency 0 is not an integer >= 1"),
    (["-q", "single", "--capsule", "single:1", "single"], "queue 'single' is in capsules 'default' and 'single'"),
])
def test_cli_capsule_errors_exit_1_with_one_line(argv, message):
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("wurk", *argv, "--no-reload", stderr=err)
    assert exited.value.code == 1
    assert message in err.getvalue()


# -- one process, several capsules (no threads started) ---------------------------------


def _launcher(**overrides):
    from wurk_django.server.launcher import Launcher

    return Launcher(Config(**overrides), embedded=True)


def test_core_100_one_manager_per_capsule_with_its_own_fetcher_and_chain():
    launcher = _launcher(CONCURRENCY=3, QUEUES=["default", "low"], CAPSULES=SINGLE)
    default, single = launcher.managers
    assert launcher.manager is default
    assert (default.name, default.config.concurrency, default.fetcher.order.names) == ("default", 3,
                                                                                      ["default", "low"])
    assert (single.name, single.config.concurrency, single.fetcher.order.names) == ("single", 1, ["single"])
    assert default.fetcher is not single.fetcher and default.server_chain is not single.server_chain
    assert launcher.concurrency == 4 and launcher.queue_names == ["default", "low", "single"]
    assert launcher.reaper.queue_names == ["default", "low", "single"]  # the boot sweep covers every capsule


def test_core_100_no_capsules_runs_the_config_itself():
    launcher = _launcher(CONCURRENCY=2)
    assert len(launcher.managers) == 1 and launcher.manager.config is launcher.config


def test_pro_110_capsules_never_share_a_private_list_or_running_marker():
    launcher = _launcher(CONCURRENCY=3, QUEUES=["default"], CAPSULES={"single": {"concurrency": 2,
                                                                                  "queues": ["single"]}})
    numbers: dict[str, list[int]] = {}
    lists, markers = set(), set()

    def take(manager):
        slot = manager.fetcher._take_slot()
        numbers.setdefault(manager.name, []).append(slot.number)
        lists.add(slot.keys(manager.fetcher.order.names[0])[1])
        markers.add(slot.marker)

    for manager in launcher.managers:
        for _ in range(3):  # each slot is held by its thread until the thread ends: one thread each
            thread = threading.Thread(target=take, args=(manager,))
            thread.start()
            thread.join()
    # A thread that ended freed its slot: the next one reuses the lowest.
    assert numbers == {"default": [0, 0, 0], "single": [1, 1, 1]}
    holders = []
    release = threading.Event()

    def hold(manager):
        take(manager)
        release.wait(10)

    for manager in launcher.managers:
        for _ in range(3):
            holders.append(threading.Thread(target=hold, args=(manager,)))
            holders[-1].start()
    wait_for(lambda: sum(map(len, numbers.values())) == 12, message="every thread took a slot")
    release.set()
    for thread in holders:
        thread.join()
    assert sorted(numbers["default"][3:]) == [0, 2, 4] and sorted(numbers["single"][3:]) == [1, 3, 5]
    assert len(markers) == 6 and len(lists) == 6
    from wurk_django.keys import private_queue
    from wurk_django.server.state import NONCE, hostname

    single_lists = {private for _, private in launcher.managers[1].fetcher.all_keys()}
    assert single_lists == {private_queue("single", hostname(), os.getpid(), NONCE, n) for n in (1, 3, 5)}


def test_pool_sizes_count_every_capsule_thread():
    from wurk_django.redis.connection import pool_size_for

    launcher = _launcher(CONCURRENCY=5, CAPSULES={"single": {"concurrency": 1, "queues": ["single"]},
                                                  "bulk": {"concurrency": 20, "queues": ["bulk"]}})
    for manager in launcher.managers:
        assert pool_size_for(manager.config, "fetch") == 26 + 2
        assert pool_size_for(manager.config, "main") >= 26


def test_core_076_heartbeat_info_lists_every_capsule():
    launcher = _launcher(CONCURRENCY=5, QUEUES=["default,2", "low,1"], CAPSULES=SINGLE)
    info = json.loads(launcher.heartbeat.info())
    assert info["concurrency"] == 6
    assert info["capsules"] == {
        "default": {"concurrency": 5, "mode": "weighted", "weights": {"default": 2, "low": 1}},
        "single": {"concurrency": 1, "mode": "strict", "weights": {"single": 0}},
    }
    assert info["queues"] == ["default", "low", "single"]
    assert info["weights"] == [{"default": 2, "low": 1}, {"single": 0}]


def test_swarm_refuses_a_slot_queue_a_capsule_serves_before_forking():
    from wurk_django.server.swarm.slots import SwarmError
    from wurk_django.server.swarm.supervisor import Swarm
    from wurk_django.server.swarm.topology import assignments

    config = Config(CAPSULES=SINGLE, SWARM=[{"count": 1, "queues": ["default"]}, {"count": 1, "queues": ["single"]}])
    swarm = Swarm(config, assignments(config), memory_limit=0)
    first, second = swarm.slots
    assert swarm._slot_config(first).capsules == config.capsules  # each child runs the capsules too
    with pytest.raises(SwarmError, match="swarm slot 1: queue 'single' is in capsules 'default' and 'single'"):
        swarm._slot_config(second)


def test_describe_for_log_lines():
    assert describe([Capsule("default", 5, (("a", 0), ("b", 0))), Capsule("single", 1, (("s", 0),))]) == (
        "default (5 threads): a, b; single (1 thread): s")


# -- real worker processes ----------------------------------------------------------------


def test_core_192_busy_page_names_the_capsule_of_each_running_job(redis_db, admin_client):
    from tests.admin.conftest import heartbeat, job

    identity = heartbeat(redis_db, "worker.1:77:abc", busy=2, work={
        "t1": job("Exporter", queue="single"), "t2": job("Mailer", queue="mail")})
    info = json.loads(redis_db.hget(identity, "info"))
    info["capsules"] = {"default": {"concurrency": 5, "mode": "strict", "weights": {"default": 0, "mail": 0}},
                        "single": {"concurrency": 1, "mode": "strict", "weights": {"single": 0}}}
    redis_db.hset(identity, "info", json.dumps(info))
    body = admin_client.get("/admin/wurk_django/dashboard/busy/").content.decode()
    assert '<strong>single</strong> <span class="wurk-quiet">(1 thread)</span>: single' in body
    assert '<strong>default</strong> <span class="wurk-quiet">(5 threads)</span>: default, mail' in body
    rows = body.split('<table class="wurk-table" id="wurk-jobs">')[1].split("<tr>")
    assert any('<td class="wurk-job-capsule">single</td>' in row and "Exporter" in row for row in rows)
    assert any('<td class="wurk-job-capsule">default</td>' in row and "Mailer" in row for row in rows)


def test_embedded_workers_run_the_capsules_too():
    from tests.support import wurk_settings
    from wurk_django.embed.embedded import _Embedded
    from wurk_django.server.launcher import Launcher

    with wurk_settings(CAPSULES=SINGLE, EMBEDDED_CONCURRENCY=2):
        config = _Embedded(None, None)._config()
        launcher = Launcher(config, embedded=True)
    assert [(m.name, m.config.concurrency) for m in launcher.managers] == [("default", 2), ("single", 1)]


def _spans(redis_db) -> dict[str, tuple[float, float]]:
    out = {}
    for raw in redis_db.lrange("test:spans", 0, -1):
        marker, start, end = raw.decode().split()
        out[marker] = (float(start), float(end))
    return out


def _times(redis_db, key: str) -> dict[str, float]:
    return {marker: float(at) for marker, at in (raw.decode().split() for raw in redis_db.lrange(key, 0, -1))}


def _push(klass: str, queue: str, *args) -> None:
    from wurk_django.client.push import Client

    Client().push({"class": f"tests.jobsapp.capsule_jobs.{klass}", "queue": queue, "args": list(args)})


@pytest.mark.slow
def test_core_100_one_thread_capsule_never_overlaps_while_default_threads_run_in_parallel(
        redis_db, worker_factory, admin_client):
    for i in range(4):
        _push("SpanJob", "single", f"s{i}", 0.4)
    for i in range(5):
        _push("SpanJob", "default", f"d{i}", 2.5)
    worker = worker_factory("-c", "5", "--capsule", "single:1", "single", "-q", "default")
    # The heartbeat and the Busy page name both capsules.
    wait_for(lambda: redis_db.scard("processes"), timeout=60, message="the worker's first beat")
    identity = redis_db.smembers("processes").pop().decode()
    info = json.loads(redis_db.hget(identity, "info"))
    assert info["capsules"] == {"default": {"concurrency": 5, "mode": "strict", "weights": {"default": 0}},
                                "single": {"concurrency": 1, "mode": "strict", "weights": {"single": 0}}}
    assert redis_db.hget(identity, "concurrency") == b"6"
    body = admin_client.get("/admin/wurk_django/dashboard/busy/").content.decode()
    assert 'data-capsule="single"' in body and 'data-capsule="default"' in body
    assert "(1 thread)" in body and "(5 threads)" in body

    wait_for(lambda: len(_spans(redis_db)) == 9, timeout=60, message="all nine jobs")
    spans = _spans(redis_db)
    single = sorted(v for k, v in spans.items() if k.startswith("s"))
    for (_, end), (start, _) in zip(single, single[1:]):
        assert start >= end, single  # one at a time
    default = [v for k, v in spans.items() if k.startswith("d")]
    # The five default jobs ran side by side: each started before any of them ended...
    assert max(start for start, _ in default) < min(end for _, end in default), default
    # ...while the single capsule worked through its queue beside them.
    assert single[0][0] < min(end for _, end in default), (single, default)

    from wurk_django.management.commands.wurk_stats import as_text, snapshot

    data = snapshot()
    assert data["processes"][0]["capsules"]["single"] == {"concurrency": 1, "queues": ["single"]}
    assert "default (5): default; single (1): single" in as_text(data)
    assert worker.stop(timeout=30) == 0
    assert "6 threads in 2 capsules: default (5 threads): default; single (1 thread): single" in worker.output()


@pytest.mark.slow
def test_pro_110_kill_9_then_restart_recovers_the_jobs_of_both_capsules(redis_db, worker_factory):
    extra = json.dumps({"CAPSULES": SINGLE, "REAPER_ORPHAN_GRACE": 0})
    env = {"WURK_TEST_EXTRA": extra}
    _push("FirstRunSlowJob", "single", "s", 120)
    _push("FirstRunSlowJob", "default", "d", 120)
    worker = worker_factory("-c", "2", env=env)
    wait_for(lambda: set(redis_db.lrange("test:started", 0, -1)) == {b"s", b"d"}, timeout=60,
             message="both jobs running")
    # Each capsule's job sits in its own slot's list: default's slots are even, single's odd.
    private = {key.decode().split("|")[0]: key.decode() for key in redis_db.keys("queue:*|*")}
    assert int(private["queue:default"].rsplit("|", 1)[1]) % 2 == 0
    assert int(private["queue:single"].rsplit("|", 1)[1]) % 2 == 1
    wait_for(lambda: redis_db.scard("processes"), timeout=60, message="the worker's first beat")
    identity = redis_db.smembers("processes").pop().decode()
    worker.kill()
    assert redis_db.llen(private["queue:single"]) == 1 and redis_db.llen(private["queue:default"]) == 1
    # As if its heartbeat had lapsed (60 s): the dead process is no longer listed as alive.
    redis_db.delete(identity)
    redis_db.srem("processes", identity)

    second = worker_factory("-c", "2", env=env)
    wait_for(lambda: set(redis_db.lrange("test:finished", 0, -1)) == {b"s", b"d"}, timeout=60,
             message="both jobs recovered and run again")
    assert not redis_db.exists(private["queue:single"], private["queue:default"])
    assert second.stop(timeout=30) == 0


@pytest.mark.slow
def test_core_157_term_drains_every_capsule_in_parallel_and_requeues_from_all(redis_db, worker_factory):
    """RUN-202: a stop drains within ``-t`` and every capsule against one deadline."""
    _push("StubbornJob", "single", "s", 2.0)
    _push("StubbornJob", "default", "d", 2.0)
    worker = worker_factory("-c", "2", "-t", "1", "--capsule", "single:1", "single")
    wait_for(lambda: set(redis_db.lrange("test:started", 0, -1)) == {b"s", b"d"}, timeout=60,
             message="both jobs running")
    worker.signal(signal.SIGTERM)
    worker.wait(timeout=60)
    interrupted = _times(redis_db, "test:interrupted")
    lingered = _times(redis_db, "test:lingered")
    assert set(interrupted) == {"s", "d"} and set(lingered) == {"s", "d"}, worker.output()
    # One deadline for both capsules: each was interrupted before the other's job, which
    # lingers two seconds after its interrupt, ended. Drained one capsule after the other,
    # the second would be interrupted only once the first's job had ended.
    assert max(interrupted.values()) < min(lingered.values()), (interrupted, lingered)
    # Hard shutdown put both jobs back, each on its own queue.
    assert [json.loads(raw)["args"][0] for raw in redis_db.lrange("queue:single", 0, -1)] == ["s"]
    assert [json.loads(raw)["args"][0] for raw in redis_db.lrange("queue:default", 0, -1)] == ["d"]
    assert not redis_db.keys("queue:*|*")


def test_a_capsule_config_keeps_its_capsule_on_a_shard_and_leaves_the_settings_config_alone():
    config = Config(SHARDS={"b": "redis://127.0.0.1:6379/6"}, CAPSULES=SINGLE)
    single = capsule_config(config, plan(config), 1)
    assert (single.concurrency, single.queues, single.capsule.index, single.capsule.count) == (1, [("single", 0)], 1, 2)
    assert single.for_shard("b").capsule is single.capsule and single.for_shard(None) is single
    assert config.for_shard("b").capsule is None and config.concurrency == 5 and config.capsule is None
