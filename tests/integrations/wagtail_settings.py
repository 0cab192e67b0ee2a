"""A minimal Wagtail site over the test settings (Redis, WURK): tests/integrations/test_wagtail.py.
Its tasks (search index, reference index, file clean-up) run on the backend the test picks
in TASKS."""

import os

from tests.settings import *  # noqa: F403
from tests.settings import BASE_DIR, INSTALLED_APPS

INSTALLED_APPS = [
    "tests.integrations.wagtail_site",
    "wagtail.contrib.forms",
    "wagtail.contrib.redirects",
    "wagtail.sites",
    "wagtail.users",
    "wagtail.snippets",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail.api.v2",
    "rest_framework",
    "wagtail",
    "modelcluster",
    "taggit",
    "django_filters",
    *[app for app in INSTALLED_APPS if app != "tests.jobsapp"],
    "tests.jobsapp",
]
# Wagtail 8 enqueues through the django-tasks backport whatever the Django version.
if "django_tasks" not in INSTALLED_APPS:
    INSTALLED_APPS.append("django_tasks")
ROOT_URLCONF = "tests.integrations.wagtail_urls"
WAGTAIL_SITE_NAME = "wurk test site"
WAGTAILADMIN_BASE_URL = "http://testserver"
WAGTAILSEARCH_BACKENDS = {"default": {"BACKEND": "wagtail.search.backends.database"}}
MEDIA_ROOT = os.environ.get("WURK_TEST_MEDIA", str(BASE_DIR / ".test-media"))
MEDIA_URL = "/media/"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("WURK_TEST_WAGTAIL_SQLITE", str(BASE_DIR / ".test-wagtail.sqlite3")),
        # A worker process and the test share the file: each write waits for the other's.
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
    }
}
# The backend under test (the default), or the reference: the backport's ImmediateBackend.
TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"
                     if os.environ.get("WURK_TEST_WAGTAIL_BACKEND", "wurk") == "wurk"
                     else "django_tasks.backends.immediate.ImmediateBackend"}}
