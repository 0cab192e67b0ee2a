"""A ``django.tasks`` task (Django 6+), run by wurk through ``WurkBackend`` (settings.TASKS)."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:  # Django 5.2 has no django.tasks; the jobs in jobs.py still work
    task = None

if task is not None:

    @task
    def count_reports(prefix: str = "") -> int:
        """Returns how many reports start with ``prefix``; the result is kept in Redis for a day."""
        from .models import Report

        return Report.objects.filter(title__startswith=prefix).count()
