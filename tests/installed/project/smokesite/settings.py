"""Settings of the smoke project: what docs/django.md asks of a team, nothing from the repository."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "installed-wheel-smoke"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "wurk_django",
    "shop",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "smokesite.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(BASE_DIR / "smoke.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
LANGUAGES = [("en", "English"), ("fr", "Français")]
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "static-collected"

WURK = {
    "REDIS_URL": os.environ["SMOKE_REDIS_URL"],
    "QUEUES": ["default"],
    "UNIQUE_JOBS": True,
    # Every cron minute; the smoke speeds the poller's clock up (WURK_TEST_CLOCK) so it fires in seconds.
    "PERIODIC": [{"cron": "* * * * *", "job": "shop.jobs.Tick"}],
    "LEADER": {"INITIAL_WAIT": 0.5},
}
