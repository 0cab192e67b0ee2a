"""Settings for the test suite. Redis: a dedicated logical database, 15 unless
WURK_TEST_REDIS_URL says otherwise; the suite flushes only that database."""

import importlib.util
import json
import os
from pathlib import Path

from tests import parallel

# Under pytest-xdist (-n N), this worker's own Redis database, ports and SQLite file
# (tests/parallel.py), written into the environment before anything below reads it.
parallel.apply()

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "tests-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "wurk_django",
    "tests.jobsapp",
]
# Django 5.2 runs the tasks backend on the django-tasks backport, as a user would: with its app
# installed (its AppConfig registers the system checks that call WurkBackend.check()). Django 6's
# own django.tasks needs no app, and wins where both are installed (wurk_django.tasks.compat).
if importlib.util.find_spec("django.tasks") is None and importlib.util.find_spec("django_tasks") is not None:
    INSTALLED_APPS.append("django_tasks")
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The admin, and the Wurk pages with it, in the language the browser asks for (or set_language).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
try:  # Django 6+: the CSP middleware, inert until a test sets SECURE_CSP (the admin's nonce tests)
    import django.middleware.csp  # noqa: F401

    MIDDLEWARE.append("django.middleware.csp.ContentSecurityPolicyMiddleware")
except ImportError:
    pass
# Tests that serve real HTTP from a subprocess point this at their own URLs.
ROOT_URLCONF = os.environ.get("WURK_TEST_URLCONF", "tests.urls")
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("WURK_TEST_SQLITE", str(BASE_DIR / ".test-db.sqlite3")),
    }
}
STATIC_URL = "/static/"

WURK_TEST_REDIS_URL = os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
WURK = {
    "REDIS_URL": WURK_TEST_REDIS_URL,
    "CONCURRENCY": 5,
    "TIMEOUT": 8,
}
# No push spool unless a test asks for one (tests/hostile/test_push_spool.py): the suite pushes to
# dead ports on purpose, and a file saved by one test would be pushed by a later test's process
# that reuses the port.
WURK["RELIABLE_PUSH_SPOOL"] = False
# Tests that start real workers pass extra WURK keys as JSON (e.g. a short poll interval).
WURK.update(json.loads(os.environ.get("WURK_TEST_EXTRA", "{}")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
if os.environ.get("WURK_TEST_NO_LOGGING"):
    # As a project that never configured logging: Django's defaults only.
    LOGGING = {"version": 1, "disable_existing_loggers": False}
