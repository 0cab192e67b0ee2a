"""Registration, lid, storage and pruning of periodic loops (ENT-401..406), on the test Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT, wurk_settings
from wurk_django import canonical, periodic
from wurk_django.periodic import registration
from wurk_django.periodic.config import build_loop
from wurk_django.periodic.loops import LoopSet, lid_for, persist

NIGHTLY = "tests.jobsapp.jobs.RecordJob"


@pytest.fixture(autouse=True)
def _forget():
    registration.forget_code_registrations()
    yield
    registration.forget_code_registrations()


# (schedule, class, options, Ruby JSON.dump of the sorted options, lid) computed with Ruby 3.1's json.
RUBY_VECTORS = [
    ("0 4 * * *", "shop.jobs.Nightly", {"queue": "low", "retry": 2, "args": ["x"]},
     '{"args":["x"],"queue":"low","retry":2}', "bce9fc803fd02e70"),
    ("*/5 * * * *", "shop.jobs.Sweep", {}, "{}", "3468283af93d529f"),
    ("@daily", "Report", {"paused": False, "label": "nightly ✓", "args": [1e20, 0.5, "é\n\u0001", None, True]},
     '{"args":[1.0e+20,0.5,"é\\n\\u0001",null,true],"label":"nightly ✓","paused":false}', "93bfe93b59d0cc77"),
    ("0 0 * * 0", "Big", {"args": [1e15, 12.0, -0.0, {"z": 1, "a": 2}]},
     '{"args":[1.0e+15,12.0,-0.0,{"z":1,"a":2}]}', "cf084bf3460d2ac0"),
]


@pytest.mark.parametrize("schedule,klass,options,ruby,lid", RUBY_VECTORS)
def test_lid_matches_ruby(schedule, klass, options, ruby, lid):
    # ENT-402, ENT-004: conformance vectors (value, Ruby JSON, sha)
    assert canonical.dumps(dict(sorted(options.items()))) == ruby
    assert lid_for(schedule, klass, options) == lid


def test_tz_is_not_part_of_the_lid():
    # ENT-402, ENT-409
    assert lid_for("0 4 * * *", "X", {"tz": "Asia/Tokyo", "queue": "a"}) == lid_for("0 4 * * *", "X", {"queue": "a"})


def test_register_persists_the_spec_layout(redis_db):
    # ENT-401, ENT-403, ENT-405
    loop = periodic.register("0 4 * * *", NIGHTLY, queue="low", args=["x"], retry=2, tz="Asia/Tokyo")
    assert loop.lid == lid_for("0 4 * * *", NIGHTLY, {"queue": "low", "args": ["x"], "retry": 2})
    assert redis_db.smembers("periodic") == {loop.lid.encode()}
    stored = redis_db.hgetall(f"loops:{loop.lid}")
    assert stored == {
        b"schedule": b"0 4 * * *", b"klass": NIGHTLY.encode(), b"tz": b"Asia/Tokyo", b"paused": b"0",
        b"options": b'{"args":["x"],"queue":"low","retry":2}',
    }


def test_default_zone_is_djangos_time_zone(redis_db, settings):
    # ENT-409 / A8: the port defaults to TIME_ZONE
    settings.TIME_ZONE = "Europe/Paris"
    loop = periodic.register("0 4 * * *", NIGHTLY)
    assert redis_db.hget(f"loops:{loop.lid}", "tz") == b"Europe/Paris"


def test_registration_is_idempotent_and_keeps_a_dashboard_pause(redis_db):
    # ENT-402, ENT-403: HSETNX paused, so a pause survives the next deploy
    loop = periodic.register("*/5 * * * *", NIGHTLY)
    assert periodic.pause(loop.lid)
    again = periodic.register("*/5 * * * *", NIGHTLY)
    assert again.lid == loop.lid
    assert redis_db.hget(f"loops:{loop.lid}", "paused") == b"1"
    assert redis_db.scard("periodic") == 1
    assert periodic.unpause(loop.lid)
    assert redis_db.hget(f"loops:{loop.lid}", "paused") == b"0"


def test_pause_of_an_unknown_loop(redis_db):
    assert periodic.pause("0123456789abcdef") is False
    assert not redis_db.exists("loops:0123456789abcdef")


def test_initial_paused_option(redis_db):
    loop = periodic.register("* * * * *", NIGHTLY, paused=True)
    assert redis_db.hget(f"loops:{loop.lid}", "paused") == b"1"


@pytest.mark.parametrize("call,message", [
    (lambda: periodic.register("0 4 * *", NIGHTLY), "5 fields"),
    (lambda: periodic.register("0 4 * * *", "no.such.Job"), "no.such.Job"),
    (lambda: periodic.register("0 4 * * *", ""), "job"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, args="x"), "args"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, queue="bad\nqueue"), "queue"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, retry=-1), "retry"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, jid="x"), "jid"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, args=[object()]), "JSON"),
    (lambda: periodic.register("0 4 * * *", NIGHTLY, args=[float("nan")]), "JSON"),
])
def test_bad_registrations_raise_value_error_at_once(redis_db, call, message):
    # ENT-401
    with pytest.raises(ValueError, match=message):
        call()
    assert redis_db.scard("periodic") == 0


def test_register_accepts_a_job_class(redis_db):
    from tests.jobsapp.jobs import RecordJob

    assert periodic.register("0 4 * * *", RecordJob).klass == RecordJob.job_name


def test_unknown_zone_warns_once_and_runs_as_utc(redis_db, caplog):
    # ENT-409
    loop = periodic.register("0 4 * * *", NIGHTLY, tz="Mars/Olympus")
    from datetime import UTC
    assert loop.zone is UTC
    assert loop.zone is UTC
    assert sum("Mars/Olympus" in r.getMessage() for r in caplog.records) == 1


def test_unregister_deletes_everything(redis_db):
    # ENT-406
    loop = periodic.register("* * * * *", NIGHTLY)
    redis_db.lpush(f"loop-history:{loop.lid}", "[1,\"j\"]")
    periodic.unregister(loop.lid)
    assert not redis_db.exists("periodic", f"loops:{loop.lid}", f"loop-history:{loop.lid}")


def test_loop_set(redis_db):
    # ENT-406: each, size, fetch
    a = periodic.register("* * * * *", NIGHTLY, args=[1])
    b = periodic.register("0 * * * *", NIGHTLY, args=[2])
    loops = LoopSet()
    assert len(loops) == 2 and loops.size == 2
    assert {loop.lid for loop in loops} == {a.lid, b.lid}
    assert loops.fetch(a.lid).args == [1]
    assert loops.fetch("nope") is None


def test_pruning_removes_changed_loops_of_the_block_classes_only(redis_db):
    # ENT-404
    manager = registration.Manager()
    old = manager.register("0 4 * * *", NIGHTLY)
    other = manager.register("0 5 * * *", "tests.jobsapp.jobs.PidJob")
    foreign = "ffffffffffffffff"
    redis_db.sadd("periodic", foreign)
    redis_db.hset(f"loops:{foreign}", mapping={"schedule": "* * * * *", "klass": "RubyOnly", "options": "{}"})

    def block(mgr):
        mgr.register("0 6 * * *", NIGHTLY)  # changed schedule: replaces the 04:00 loop

    periodic.configure(block)
    lids = {m.decode() for m in redis_db.smembers("periodic")}
    assert old.lid not in lids and not redis_db.exists(f"loops:{old.lid}")
    assert other.lid in lids  # PidJob: not mentioned by this block
    assert foreign in lids  # a class only Ruby registers
    assert len(lids) == 3


def test_pruning_leaves_classes_the_block_never_mentions(redis_db):
    # ENT-404: classes the block never mentions are untouched
    first = periodic.configure(lambda mgr: (mgr.register("0 4 * * *", NIGHTLY),
                                            mgr.register("0 5 * * *", "tests.jobsapp.jobs.PidJob")))
    pid_lid = [lid for lid, loop in first.written.items() if loop.klass.endswith("PidJob")][0]
    periodic.configure(lambda mgr: mgr.register("0 6 * * *", NIGHTLY))
    lids = {m.decode() for m in redis_db.smembers("periodic")}
    assert pid_lid in lids
    assert len(lids) == 2


def test_boot_registers_settings_and_code_as_one_block(redis_db):
    # ENT-401: settings at worker boot, code registrations with them
    periodic.register("*/10 * * * *", "tests.jobsapp.jobs.PidJob", args=["code"])
    entries = [
        {"cron": "0 4 * * *", "job": NIGHTLY, "queue": "low", "args": ["x"], "tz": "Asia/Tokyo"},
        {"cron": "*/5 * * * *", "job": "tests.jobsapp.jobs.SlowJob"},
        {"cron": "0 4 * * *", "job": "missing.jobs.Gone"},  # logged and skipped, never fatal
    ]
    # What an earlier deploy stored: an older schedule of a class this block mentions.
    stale = build_loop("0 3 * * *", NIGHTLY)
    persist(stale)
    manager = registration.boot(entries)
    assert len(manager.written) == 3
    lids = {m.decode() for m in redis_db.smembers("periodic")}
    assert lids == set(manager.written)
    assert stale.lid not in lids
    tokyo = [loop for loop in manager.written.values() if loop.tz == "Asia/Tokyo"][0]
    assert json.loads(redis_db.hget(f"loops:{tokyo.lid}", "options")) == {"args": ["x"], "queue": "low"}


def test_settings_problems_are_reported(redis_db):
    from wurk_django.conf import problems

    bad = [{"cron": "0 4 * *", "job": NIGHTLY}, {"cron": "* * * * *", "job": NIGHTLY, "args": "x"}, "nope"]
    found = problems({"PERIODIC": bad})
    assert [p.key for p in found] == ["PERIODIC"]  # the shape is wrong: one problem
    found = problems({"PERIODIC": bad[:2]})
    assert len(found) == 2 and all(p.kind == "periodic" for p in found)
    assert "entry 0" in found[0].message and "5 fields" in found[0].message
    assert problems({"PERIODIC": [{"cron": "0 4 * * *", "job": NIGHTLY, "tz": "Asia/Tokyo"}]}) == []


def test_system_check_reports_bad_entries_classes_and_zones(redis_db):
    # manage.py check validates the periodic configuration
    from wurk_django.checks import check_periodic, check_settings

    with wurk_settings(PERIODIC=[{"cron": "61 * * * *", "job": NIGHTLY}]):
        assert [m.id for m in check_settings() + check_periodic()] == ["wurk.E020"]
    entries = [{"cron": "0 4 * * *", "job": "missing.jobs.Gone"},
               {"cron": "0 4 * * *", "job": NIGHTLY, "tz": "Mars/Olympus"}]
    with wurk_settings(PERIODIC=entries):
        ids = sorted(m.id for m in check_settings() + check_periodic())
    assert ids == ["wurk.W020", "wurk.W021"]
    with wurk_settings(PERIODIC=[{"cron": "0 4 * * *", "job": NIGHTLY}]):
        assert check_settings() + check_periodic() == []


def test_check_command(redis_db, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with wurk_settings(PERIODIC=[{"cron": "0 4 * * *", "job": NIGHTLY, "tz": "Asia/Tokyo"}]):
        call_command("wurk_check_periodic")
    out = capsys.readouterr().out
    assert "every day at 04:00" in out and "Asia/Tokyo" in out and "1 periodic job(s) OK" in out
    with wurk_settings(PERIODIC=[{"cron": "0 4 * * *", "job": "missing.jobs.Gone"}]):
        with pytest.raises(CommandError):
            call_command("wurk_check_periodic")
    assert "missing.jobs.Gone" in capsys.readouterr().err
    assert redis_db.dbsize() == 0  # the check touches no Redis


def test_verify_rolls_back_on_error(redis_db):
    # ENT-406 ConfigTester.verify
    def bad(mgr):
        mgr.register("0 4 * * *", NIGHTLY)
        mgr.register("0 4 * * *", "missing.jobs.Gone")

    with pytest.raises(ValueError, match="missing.jobs.Gone"):
        periodic.verify(bad)
    assert redis_db.scard("periodic") == 0 and redis_db.dbsize() == 0
    loops = periodic.verify(lambda mgr: mgr.register("0 4 * * *", NIGHTLY))
    assert [loop.klass for loop in loops] == [NIGHTLY]


def test_manager_tz_is_the_default_for_later_calls(redis_db):
    # ENT-401: mgr.tz sets the default; a per-call tz overrides it
    manager = registration.Manager(tz="Asia/Tokyo")
    assert manager.register("0 4 * * *", NIGHTLY).tz == "Asia/Tokyo"
    assert manager.register("0 5 * * *", NIGHTLY, tz="Europe/Paris").tz == "Europe/Paris"


def test_check_command_reports_every_problem_at_once(redis_db, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    entries = [{"cron": "0 4 * *", "job": NIGHTLY}, {"cron": "0 4 * * *", "job": "missing.jobs.Gone"},
               {"cron": "*/5 * * * *", "job": NIGHTLY}]
    with wurk_settings(PERIODIC=entries), pytest.raises(CommandError, match="2 periodic job problem"):
        call_command("wurk_check_periodic")
    captured = capsys.readouterr()
    assert "entry 0" in captured.err and "5 fields" in captured.err and "missing.jobs.Gone" in captured.err
    assert "every 5 minutes" in captured.out


def _manage(*args: str, periodic: list) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "WURK_TEST_EXTRA": json.dumps({"PERIODIC": periodic})}
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_finds_a_job_named_by_its_registered_name_in_a_fresh_process():
    # Issue 28 item 7: the job's module is imported by autodiscovery, as the worker does.
    done = _manage("check", periodic=[{"cron": "0 4 * * *", "job": "HardJob"}])
    assert done.returncode == 0, done.stderr
    assert "W021" not in done.stderr + done.stdout


def test_an_unknown_periodic_job_warns_and_never_stops_migrate():
    done = _manage("migrate", "--plan", periodic=[{"cron": "0 4 * * *", "job": "missing.jobs.Gone"}])
    assert "wurk.W021" in done.stderr + done.stdout
    assert done.returncode == 0, done.stderr
