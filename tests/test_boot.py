"""The boot decision: which processes may run embedded workers, and ready() starting nothing (DJ-060, RUN-840..842)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import types

import pytest

from tests.support import ROOT
from wurk_django.embed import boot, embedded
from wurk_django.embed.boot import EMBEDDED, REFUSE, SKIP, SWARM, decide
from wurk_django.redis import connection

GUNICORN_ENV = {"SERVER_SOFTWARE": "gunicorn/27.0.1"}
GUNICORN_ARGV = ["/venv/bin/gunicorn", "-c", "gunicorn.conf.py", "site.wsgi"]
NO_MODULES: dict = {}


@pytest.mark.parametrize("mode", ["off", "standalone"])
def test_off_and_standalone_never_start_in_a_web_process(mode):
    """RUN-841: boot decision rules."""
    decision = decide(mode, GUNICORN_ARGV, GUNICORN_ENV, NO_MODULES)
    assert decision.action == SKIP
    assert mode in decision.reason


def test_embedded_under_gunicorn():
    decision = decide("embedded", GUNICORN_ARGV, GUNICORN_ENV, NO_MODULES)
    assert decision.action == EMBEDDED
    assert decision.embedded
    assert decision.preforking


def test_embedded_under_a_non_preforking_server():
    decision = decide("embedded", ["/venv/bin/uvicorn", "site.asgi:application"], {}, NO_MODULES)
    assert decision.action == EMBEDDED
    assert not decision.preforking


@pytest.mark.parametrize("value", ["1", "true", "yes", "TRUE"])
def test_wurk_disabled_wins_over_everything(value):
    """RUN-841: boot decision rules."""
    decision = decide("embedded", GUNICORN_ARGV, {**GUNICORN_ENV, "WURK_DISABLED": value}, NO_MODULES)
    assert decision.action == SKIP
    assert "WURK_DISABLED" in decision.reason


def test_wurk_disabled_0_does_not_disable():
    assert decide("embedded", GUNICORN_ARGV, {**GUNICORN_ENV, "WURK_DISABLED": "0"}, NO_MODULES).embedded


def test_pytest_skips_even_under_a_server_command_line():
    decision = decide("embedded", GUNICORN_ARGV, GUNICORN_ENV, {"pytest": object()})
    assert decision.action == SKIP
    assert "tests" in decision.reason


def test_this_test_process_itself_skips():
    assert decide("embedded", sys.argv, os.environ, sys.modules).action == SKIP


@pytest.mark.parametrize("command", ["migrate", "shell", "check", "collectstatic", "makemigrations",
                                     "createsuperuser", "dbshell", "compilemessages", "demo_enqueue"])
@pytest.mark.parametrize("program", ["manage.py", "/srv/site/manage.py", "django-admin"])
def test_other_management_commands_skip(program, command):
    decision = decide("embedded", [program, command, "--verbosity", "2"], {"RUN_MAIN": "true"}, NO_MODULES)
    assert decision.action == SKIP
    assert command in decision.reason


def test_python_dash_m_django_counts_as_a_management_command():
    argv = ["/usr/lib/python3/site-packages/django/__main__.py", "migrate"]
    assert decide("embedded", argv, {}, NO_MODULES).action == SKIP
    runserver = ["/usr/lib/python3/site-packages/django/__main__.py", "runserver", "--noreload"]
    assert decide("embedded", runserver, {}, NO_MODULES).action == EMBEDDED


def test_the_test_command_skips():
    decision = decide("embedded", ["manage.py", "test"], {"RUN_MAIN": "true"}, NO_MODULES)
    assert decision.action == SKIP
    assert "tests" in decision.reason


@pytest.mark.parametrize("mode", ["embedded", "swarm"])
def test_manage_py_wurk_runs_its_own_worker(mode):
    decision = decide(mode, ["manage.py", "wurk", "-c", "10"], {"RUN_MAIN": "true"}, NO_MODULES)
    assert decision.action == SKIP
    assert "wurk" in decision.reason


@pytest.mark.parametrize(("argv", "run_main", "action"), [
    (["manage.py", "runserver"], None, SKIP),                    # the autoreloader's watcher
    (["manage.py", "runserver"], "false", SKIP),
    (["manage.py", "runserver", "0.0.0.0:8000"], "true", EMBEDDED),  # the child that serves
    (["manage.py", "runserver", "--noreload"], None, EMBEDDED),   # one process, it serves
])
def test_runserver_reloader(argv, run_main, action):
    """RUN-841: boot decision rules."""
    environ = {} if run_main is None else {"RUN_MAIN": run_main}
    decision = decide("embedded", argv, environ, NO_MODULES)
    assert decision.action == action
    if action == SKIP:
        assert "autoreloader" in decision.reason


def test_swarm_is_refused_inside_a_preforking_server():
    for environ, modules in ((GUNICORN_ENV, NO_MODULES), ({}, {"uwsgi": object()})):
        decision = decide("swarm", ["/venv/bin/server"], environ, modules)
        assert decision.action == REFUSE
        assert "manage.py wurk --processes N" in decision.reason


def test_swarm_in_a_non_preforking_server_goes_to_the_supervisor():
    assert decide("swarm", ["manage.py", "runserver", "--noreload"], {}, NO_MODULES).action == SWARM


def test_unknown_mode_is_refused():
    assert decide("sideways", GUNICORN_ARGV, GUNICORN_ENV, NO_MODULES).action == REFUSE


def test_management_command_parsing():
    assert boot.management_command(["manage.py", "runserver"]) == "runserver"
    assert boot.management_command(["manage.py"]) == "help"
    assert boot.management_command(["/venv/bin/gunicorn", "site.wsgi"]) is None
    assert boot.management_command([]) is None


# -- recording at ready() ----------------------------------------------------------------------------------------


@pytest.fixture
def fresh_record(monkeypatch):
    """Forget this process's recorded decision for the test, and restore it after."""
    from django.core.signals import request_started

    monkeypatch.setattr(boot, "_recorded", None)
    yield
    request_started.disconnect(dispatch_uid="wurk_django.boot.first_request")


def _receivers() -> int:
    from django.core.signals import request_started

    return len(request_started.receivers)


def test_on_ready_records_once_and_starts_nothing(fresh_record, monkeypatch, redis_db):
    import threading

    calls = []
    embedded_here = boot.Decision(EMBEDDED, "test")
    monkeypatch.setattr(boot, "_decide_now", lambda: calls.append(1) or embedded_here)
    threads_before = threading.active_count()
    receivers_before = _receivers()

    assert boot.on_ready() is embedded_here
    assert boot.on_ready() is embedded_here  # ready() may run twice
    assert boot.current() is embedded_here
    assert calls == [1]
    assert _receivers() == receivers_before + 1  # the first-request fallback, connected once
    assert threading.active_count() == threads_before
    # No Redis pool was even built in this process.
    assert not [key for key in connection._clients if key[0] == os.getpid()]


def test_a_forked_child_decides_again(fresh_record, monkeypatch):
    monkeypatch.setattr(boot, "_recorded", (os.getpid() + 1, boot.Decision(EMBEDDED, "the parent's")))
    assert boot.current().action == SKIP  # this pytest process decides for itself


@pytest.mark.django_db  # request_started also runs Django's close_old_connections receiver
def test_first_request_starts_only_once(fresh_record, monkeypatch):
    """RUN-842: the last-resort entry point, a one-shot ``request_started`` receiver."""
    starts = []
    monkeypatch.setattr(boot, "_decide_now", lambda: boot.Decision(EMBEDDED, "test"))
    monkeypatch.setattr(embedded, "start", lambda **kwargs: starts.append(kwargs["source"]) or True)
    monkeypatch.setattr(embedded, "attempted", lambda: bool(starts))
    boot.on_ready()
    from django.core.signals import request_started

    request_started.send(sender=None)
    request_started.send(sender=None)
    assert starts == ["first request"]


def test_start_does_nothing_when_the_decision_skips(monkeypatch):
    starts = []
    monkeypatch.setattr(embedded, "start", lambda **kwargs: starts.append(kwargs) or True)
    assert boot.current().action == SKIP  # under pytest
    assert boot.start("a test") is False
    assert starts == []


def test_swarm_without_a_cohostable_supervisor_refuses_with_the_command_to_run(monkeypatch, caplog):
    from wurk_django import server

    monkeypatch.setattr(boot, "current", lambda: boot.Decision(SWARM, "test"))
    monkeypatch.delattr(server, "swarm", raising=False)
    monkeypatch.setitem(sys.modules, "wurk_django.server.swarm", types.ModuleType("wurk_django.server.swarm"))
    with caplog.at_level(logging.ERROR, logger="wurk_django.boot"):
        assert boot.start("a test") is False
    assert "manage.py wurk --processes N" in caplog.text


def test_swarm_hands_over_to_a_cohostable_supervisor(monkeypatch):
    from wurk_django import server

    handed = []
    module = types.ModuleType("wurk_django.server.swarm")
    module.start_cohosted = lambda: handed.append(True) or True
    monkeypatch.setattr(boot, "current", lambda: boot.Decision(SWARM, "test"))
    monkeypatch.delattr(server, "swarm", raising=False)
    monkeypatch.setitem(sys.modules, "wurk_django.server.swarm", module)
    assert boot.start("a test") is True
    assert handed == [True]


# -- a real Django boot in a fresh interpreter ----------------------------------------------------------------------


PROBE = """
import json, sys, threading
sys.argv = {argv!r}
import django
django.setup()
from wurk_django.redis import connection
from wurk_django.embed import boot, embedded
print(json.dumps({{"action": boot.current().action, "attempted": embedded.attempted(),
                  "threads": threading.active_count()}}))
"""


@pytest.mark.parametrize(("argv", "environ", "action"), [
    (["/venv/bin/gunicorn", "site.wsgi"], {"SERVER_SOFTWARE": "gunicorn/27.0.1"}, EMBEDDED),
    (["manage.py", "migrate"], {}, SKIP),
    (["manage.py", "runserver"], {}, SKIP),
    (["manage.py", "runserver"], {"RUN_MAIN": "true"}, EMBEDDED),
    (["/venv/bin/gunicorn", "site.wsgi"], {"SERVER_SOFTWARE": "gunicorn/27.0.1", "WURK_DISABLED": "1"}, SKIP),
])
def test_django_setup_decides_and_starts_nothing(argv, environ, action, test_redis_url_env):
    """RUN-842: ``django.setup()`` (the app registry being built) only decides; the start
    happens later, in an entry point (the ``wurk`` command, gunicorn's hooks, the ASGI
    lifespan wrapper, the first request: tests/test_embedded.py runs them)."""
    env = {**os.environ, **test_redis_url_env, **environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "WURK_TEST_EXTRA": json.dumps({"MODE": "embedded"})}
    if "WURK_DISABLED" not in environ:
        env.pop("WURK_DISABLED", None)
    if "RUN_MAIN" not in environ:
        env.pop("RUN_MAIN", None)
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], cwd=str(ROOT), env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["action"] == action
    assert result["attempted"] is False  # ready() never starts, whatever it decided
    assert result["threads"] == 1


@pytest.fixture
def test_redis_url_env():
    from django.conf import settings

    return {"WURK_TEST_REDIS_URL": settings.WURK_TEST_REDIS_URL}
