"""Defining limiters (and the other module-level objects the docs show) talks to no
Redis: a ``manage.py`` command of a project whose job module defines them runs with
Redis down as it does with Redis up, and says nothing about Redis (issue 45 item 4)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from tests.support import ROOT

SETTINGS = """
import os

SECRET_KEY = "x"
INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
                  "wurk_django", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SHOP_DB"]}}
ROOT_URLCONF = "urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                 "django.contrib.auth.context_processors.auth",
                                                 "django.contrib.messages.context_processors.messages"]}}]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware",
              "django.contrib.messages.middleware.MessageMiddleware"]
STATIC_URL = "/static/"
WURK = {"REDIS_URL": os.environ["SHOP_REDIS_URL"]}
"""

URLS = """
from django.contrib import admin
from django.urls import path

from shop import jobs  # noqa: F401  (a view module importing the jobs, as sites do)

urlpatterns = [path("admin/", admin.site.urls)]
"""

APPS = """
from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self):
        from wurk_django import periodic

        from . import jobs  # noqa: F401

        periodic.register("0 4 * * *", "shop.jobs.SyncOrder", queue="low", args=[1])
"""

# As docs/limiters.md shows: limiters defined once, at module level.
JOBS = """
from wurk_django import Job, limiter
from wurk_django.client import Client

ERP = limiter.concurrent("erp", 3, wait_timeout=5, lock_timeout=30)
STRIPE = limiter.window("stripe", 100, "second")
DAILY = limiter.bucket("daily", 1000, "day")
DRIP = limiter.leaky("drip", 10, "minute")
GRAPHQL = limiter.points("shopify", 1000, 50)
CLIENT = Client()


class SyncOrder(Job):
    def perform(self, order_id):
        ERP.within_limit(print, order_id)
"""

MANAGE = """
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
from django.core.management import execute_from_command_line

execute_from_command_line(sys.argv)
"""


def _project(where: Path) -> Path:
    (where / "shop").mkdir()
    for name, text in {"settings.py": SETTINGS, "urls.py": URLS, "manage.py": MANAGE,
                       "shop/__init__.py": "", "shop/apps.py": APPS, "shop/jobs.py": JOBS}.items():
        (where / name).write_text(textwrap.dedent(text))
    return where / "manage.py"


class Listener:
    """A port that accepts connections, counts them and closes them at once: what a
    Redis client trying to connect there would show up as."""

    def __init__(self) -> None:
        self.accepted = 0
        self.sock = socket.socket()
        # A port the kernel picks, outside WURK_TEST_PORTS: a port from the shared range may
        # have served a Redis another test killed, whose clients still knock on it.
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def _manage(manage: Path, tmp_path: Path, redis_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHOP_REDIS_URL": redis_url, "SHOP_DB": str(tmp_path / "db.sqlite3"),
           "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run([sys.executable, str(manage), *args], cwd=manage.parent, env=env,
                          capture_output=True, text=True, timeout=120)


def test_manage_commands_with_module_level_limiters_never_connect_to_redis(tmp_path):  # issue 45 item 4
    manage = _project(tmp_path)
    listener = Listener()
    try:
        # Not ``check --deploy``: its Redis check is meant to reach Redis.
        for command in (["check"], ["help"], ["showmigrations", "wurk_django"]):
            done = _manage(manage, tmp_path, f"redis://127.0.0.1:{listener.port}/0", *command)
            assert done.returncode == 0, done.stderr
            assert "redis" not in done.stderr.lower(), done.stderr
            assert "limiter" not in done.stderr.lower(), done.stderr
    finally:
        listener.close()
    assert listener.accepted == 0  # not one connection was attempted


def test_a_module_level_limiter_registers_at_its_first_use(redis_db):  # issue 45 item 4
    from wurk_django import limiter

    lim = limiter.concurrent("lazy", 2)
    assert lim.unregistered and not redis_db.exists("lmtr:lazy")  # defining it wrote nothing
    assert lim.within_limit(lambda: 42) == 42
    assert not lim.unregistered and redis_db.sismember("lmtr-list", "lazy")
