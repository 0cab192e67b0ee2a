"""A table-less model so the admin has something to hang the Wurk pages and
their permissions on (DJ-050, DJ-051). Nothing is ever stored: jobs live in Redis."""

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _


class Dashboard(models.Model):
    """The admin's "Wurk" entry. Unmanaged: the migration creates no table, only
    the content type and the two permissions below."""

    page_key = "dashboard"  # the ``admin_pages`` key of the page this entry leads to

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_dashboard", _("Can view the Wurk dashboard")),
            ("manage_jobs", _("Can change jobs, queues and processes in the Wurk dashboard")),
        ]
        verbose_name = _("dashboard")
        verbose_name_plural = _("dashboard")


# One entry per Wurk page on the admin index, beside "Dashboard": proxies of the same
# table-less model (no table, no permissions of their own), each linking to its page.
# A page is keyed by its ``admin_pages`` key; ``admin/index_links.py`` registers the
# entries whose page exists in this process.

def _page_link(name: str, label: Any, key: str) -> type:
    meta = type("Meta", (), {"proxy": True, "default_permissions": (), "verbose_name": label,
                             "verbose_name_plural": label})
    return type(name, (Dashboard,), {"__module__": __name__, "Meta": meta, "page_key": key})


# Bound to module names, so ``wurk_django.models.BusyPage`` imports like any model (Django's
# shell auto-imports every model by its dotted path and complains about one it cannot find).
BusyPage = _page_link("BusyPage", _("busy"), "busy")
QueuesPage = _page_link("QueuesPage", _("queues"), "queues")
ScheduledPage = _page_link("ScheduledPage", _("scheduled"), "scheduled")
RetriesPage = _page_link("RetriesPage", _("retries"), "retries")
DeadPage = _page_link("DeadPage", _("dead"), "dead")
MetricsPage = _page_link("MetricsPage", _("metrics"), "metrics")
BatchesPage = _page_link("BatchesPage", _("batches"), "batches")
WorkflowsPage = _page_link("WorkflowsPage", _("workflows"), "workflows")
LimitsPage = _page_link("LimitsPage", _("limits"), "limits")
PeriodicPage = _page_link("PeriodicPage", _("periodic"), "periodic")
HistoricalPage = _page_link("HistoricalPage", _("historical"), "history")
TasksPage = _page_link("TasksPage", _("tasks"), "tasks")
ProfilesPage = _page_link("ProfilesPage", _("profiles"), "profiles")
PoliciesPage = _page_link("PoliciesPage", _("policies"), "policies")

PAGE_LINKS = [BusyPage, QueuesPage, ScheduledPage, RetriesPage, DeadPage, MetricsPage,
              BatchesPage, WorkflowsPage, LimitsPage, PeriodicPage, HistoricalPage, TasksPage, ProfilesPage,
              PoliciesPage]
