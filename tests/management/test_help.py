"""``manage.py wurk --help`` shows the defaults this project's settings give (issue 29 item 6)."""

from __future__ import annotations

from wurk_django.management.commands.wurk import Command


def _help() -> str:
    return " ".join(Command().create_parser("manage.py", "wurk").format_help().split())


def test_help_shows_the_settings_values(settings):
    settings.WURK = {**settings.WURK, "CONCURRENCY": 7, "QUEUES": ["mail,2", "default"]}
    text = _help()
    assert "processor threads (default 7, from WURK['CONCURRENCY'])" in text
    assert "(default: -q mail,2 -q default, from WURK['QUEUES'])" in text


def test_help_shows_the_builtin_defaults_and_what_debug_implies(settings):
    settings.WURK = {"REDIS_URL": settings.WURK["REDIS_URL"]}
    settings.DEBUG = True
    text = _help()
    assert "processor threads (default 5)" in text
    assert "(default: -q default)" in text
    assert "(default development, as DEBUG is true)" in text
