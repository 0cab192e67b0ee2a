"""features.install(): parts installed once, no thread seeing one before it is whole, and a
process that only pushes loading no part of the worker engine."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
import types

import pytest

from tests.settings_every_feature import WURK as EVERY_FEATURE
from tests.support import ROOT
from wurk_django import features, keys, payload
from wurk_django.encryption import is_envelope
from wurk_django.unique import lock_key


@pytest.fixture
def fresh(monkeypatch):
    """features with nothing installed yet and one fake feature, ``fake``, of every part."""
    monkeypatch.setattr(features, "_installed", set())
    monkeypatch.setattr(features, "_installing", set())
    monkeypatch.setattr(features, "BUILTIN", {"fake": features.PARTS})
    calls: list[str] = []
    module = types.SimpleNamespace(**{f"install_{part}": (lambda part=part: calls.append(part))
                                      for part in features.PARTS})
    monkeypatch.setattr(features, "importlib", types.SimpleNamespace(import_module=lambda name: module))
    return module, calls


def test_concurrent_first_use_waits_for_the_install(fresh):
    module, calls = fresh
    done = threading.Event()

    def slow_install():
        calls.append("client")
        features.install(features.CLIENT)  # an install that comes back through a seam returns at once
        time.sleep(0.2)
        done.set()

    module.install_client = slow_install
    seen = []

    def first_use():
        features.install(features.CLIENT)
        seen.append(done.is_set())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 8
    assert calls == ["client"]


def test_each_part_installs_once_and_the_server_part_brings_the_client_part(fresh):
    _module, calls = fresh
    features.install(features.CLIENT)
    features.install(features.CLIENT)
    assert calls == ["client"]
    features.install(features.SERVER)
    features.install(features.SERVER)
    assert calls == ["client", "death", "server"]
    features.install()
    assert calls == ["client", "death", "server", "admin"]


def test_a_part_that_does_not_exist_is_refused(fresh):
    with pytest.raises(ValueError, match="'workers'"):
        features.install("workers")


@pytest.mark.parametrize("name", sorted(features.BUILTIN))
def test_each_install_module_has_exactly_the_parts_it_is_listed_with(name):
    # A part listed but missing would fail at install; one defined but not listed would never run.
    module = importlib.import_module(f"wurk_django.{name}.install")
    defined = {part for part in features.PARTS if callable(getattr(module, f"install_{part}", None))}
    assert defined == set(features.BUILTIN[name])


PUSH = """
import json, sys
before = set(sys.modules)
import django
django.setup()
after_setup = set(sys.modules)
from tests.jobsapp.push_jobs import Plain, Secret, Unique
from wurk_django.batch import Batch
Plain.perform_async("plain")
Unique.perform_async("unique")
Secret.perform_async("secret", "card 4242")
batch = Batch()
with batch.jobs():
    Plain.perform_async("in a batch")
print(json.dumps({"bid": batch.bid, "setup": sorted(after_setup - before), "push": sorted(set(sys.modules) - after_setup)}))
"""


def _engine(modules: list[str]) -> list[str]:
    """What a process that only pushes must not load: the worker engine, the cron library
    (only the periodic poller needs it) and any admin module, ours or Django's."""
    return [m for m in modules
            if m == "wurk_django.server" or m.startswith("wurk_django.server.")
            or m == "croniter" or m.startswith("croniter.")
            or (m.startswith("wurk_django.") and "admin" in m.split(".")[1:])
            or m == "django.contrib.admin" or m.startswith("django.contrib.admin.")]


def _push_in_a_fresh_process(settings_module: str, extra: dict | None = None) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, "PYTHONPATH": str(ROOT),
           "WURK_TEST_EXTRA": json.dumps(extra or {})}
    done = subprocess.run([sys.executable, "-c", PUSH], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _not_ours(modules: list[str]) -> list[str]:
    """Modules another package loads, whoever pushes: the django-tasks backport (Django 5.2)
    brings django-stubs-ext, whose import loads Django's admin."""
    if "django_stubs_ext" not in modules:
        return modules
    return [m for m in modules if not (m == "django.contrib.admin" or m.startswith("django.contrib.admin."))]


def test_pushing_with_every_feature_on_loads_no_worker_engine(redis_db):
    seen = _push_in_a_fresh_process("tests.settings_every_feature")
    assert _engine(_not_ours(seen["setup"] + seen["push"])) == []
    # The pushes themselves went through every feature's client part.
    jobs = {job["args"][0]: job for job in map(payload.loads, redis_db.lrange("queue:default", 0, -1))}
    assert set(jobs) == {"plain", "unique", "secret", "in a batch"}
    assert redis_db.get(lock_key(jobs["unique"])) == jobs["unique"]["jid"].encode()
    assert is_envelope(jobs["secret"]["args"][-1])
    assert jobs["in a batch"]["bid"] == seen["bid"]
    assert redis_db.hget(keys.batch(seen["bid"]), "total") == b"1"


def test_with_the_admin_installed_pushing_adds_no_worker_engine(redis_db):
    # django.setup() imports the admin (Django's autodiscovery), and the admin loads a
    # little of the engine for its actions; what the pushes load on top must add none.
    every = {key: value for key, value in EVERY_FEATURE.items() if key != "REDIS_URL"}
    seen = _push_in_a_fresh_process("tests.settings", every)
    assert "wurk_django.admin" in seen["setup"]
    assert _engine(seen["push"]) == []
    assert redis_db.llen("queue:default") == 4



EVERY_PUSH = """
import json, sys
import django
django.setup()
from django.conf import settings
settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
after_setup = set(sys.modules)
from tests.jobsapp.push_jobs import Plain
from tests.jobsapp.push_tasks import celery_add, tasks_add
import wurk_django
from wurk_django.api.revoke import revoke
from wurk_django.batch import Batch
from wurk_django.client.push import Client, enqueue_to
from wurk_django.workflow import chain
Plain.perform_async("perform_async")
Client().push({"class": Plain, "args": ["client"]})
enqueue_to("default", Plain, "enqueue_to")
batch = Batch()
with batch.jobs():
    Plain.perform_async("batch")
chain(Plain.s("chain"), Plain.s()).run()
celery_add.delay(1, 2)
celery_add.apply_async((3, 4))
tasks_add.enqueue(5, 6)
scheduled = Plain.perform_in(600, "revoked")
where = [revoke(scheduled, by="a test"), revoke("no-such-jid")]
print(json.dumps({"where": where, "push": sorted(set(sys.modules) - after_setup)}))
"""


@pytest.mark.skipif(not importlib.util.find_spec("django.tasks"), reason="needs Django 6's django.tasks")
def test_every_public_push_api_loads_no_worker_engine(redis_db):
    """Issue 41 item 6: perform_async, Client, enqueue_to, a batch, a workflow chain, Celery's
    delay/apply_async, django.tasks' enqueue and a revoke (which buries the scheduled job
    through the death path, death handlers included) load no ``wurk_django.server`` module."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_every_feature", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", EVERY_PUSH], cwd=str(ROOT), env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["where"] == ["scheduled", "marked"]
    assert [m for m in seen["push"] if m == "wurk_django.server" or m.startswith("wurk_django.server.")] == []
    # Every push reached Redis, and the revoke buried its job.
    classes = [payload.loads(raw)["class"] for raw in redis_db.lrange("queue:default", 0, -1)]
    assert classes.count("tests.jobsapp.push_jobs.Plain") == 5  # perform_async, Client, enqueue_to, batch, chain
    assert classes.count("tests.jobsapp.push_tasks.celery_add") == 2
    assert classes.count("wurk_django.tasks.TaskJob") == 1
    assert redis_db.zcard("dead") == 1 and redis_db.zcard("schedule") == 0


def test_pro_008_ent_005_no_license_each_feature_is_switched_on_by_its_own_setting(redis_db):
    """PRO-008, ENT-005: no license check anywhere: a feature is off until its own setting
    (or enable call) turns it on, and then works with nothing else configured. Unique
    jobs here: off by default (two pushes, two jobs), on with ``UNIQUE_JOBS`` alone."""
    from tests.jobsapp.push_jobs import Unique
    from tests.support import wurk_settings

    assert Unique.perform_async("a") and Unique.perform_async("a")
    assert redis_db.llen("queue:default") == 2
    with wurk_settings(UNIQUE_JOBS=True):
        first = Unique.perform_async("b")
        assert first and Unique.perform_async("b") is None
    assert redis_db.llen("queue:default") == 3
    assert redis_db.get(lock_key(payload.loads(redis_db.lindex("queue:default", 0)))) == first.encode()
